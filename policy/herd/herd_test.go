package herd

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/idn-net/idn/policy/flex"
)

// bruteForce enumerates every assignment of model-streams to at most J
// labelled groups and, for each, every vector of group sizes, checking
// constraints (a)-(e) directly; it returns the best minimum burst tolerance.
// Independent of Exact's LP and of the heuristic's water-filling.
func bruteForce(p *Problem) float64 {
	I := len(p.ModelStreams)
	J := I
	if J > p.Workers {
		J = p.Workers
	}
	best := math.Inf(-1)
	assign := make([]int, I)
	var rec func(i int)
	sizes := make([]int, J)
	var recSize func(j, left int, need []float64)
	recSize = func(j, left int, need []float64) {
		if j == J {
			m := math.Inf(1)
			for g := 0; g < J; g++ {
				if need[g] > 0 {
					m = math.Min(m, float64(sizes[g])/need[g])
				}
			}
			best = math.Max(best, m)
			return
		}
		for s := 0; s <= p.GroupLimit && s <= left; s++ {
			sizes[j] = s
			recSize(j+1, left-s, need)
		}
	}
	rec = func(i int) {
		if i == I {
			need := make([]float64, J)
			for g := 0; g < J; g++ {
				set := -1
				mem := 0.0
				models := map[int]bool{}
				for x := 0; x < I; x++ {
					if assign[x] != g {
						continue
					}
					k := p.ModelStreams[x].Model
					need[g] += p.ModelStreams[x].Need
					if set >= 0 && p.AffinitySet[k] != set {
						return
					}
					set = p.AffinitySet[k]
					if !models[k] {
						models[k] = true
						mem += p.ModelMem[k]
					}
				}
				if p.Mem > 0 && mem > p.Mem {
					return
				}
			}
			recSize(0, p.Workers, need)
			return
		}
		for g := 0; g < J; g++ {
			assign[i] = g
			rec(i + 1)
		}
	}
	rec(0)
	return best
}

func randomProblem(r *rand.Rand, I int) *Problem {
	K := 1 + r.IntN(3)
	p := &Problem{Workers: 2 + r.IntN(6), GroupLimit: 1 + r.IntN(4), Mem: 0, ModelMem: make([]float64, K), AffinitySet: make([]int, K)}
	for k := 0; k < K; k++ {
		p.ModelMem[k] = float64(1 + r.IntN(3))
		p.AffinitySet[k] = r.IntN(2)
	}
	if r.IntN(2) == 0 {
		p.Mem = float64(3 + r.IntN(3))
	}
	for i := 0; i < I; i++ {
		p.ModelStreams = append(p.ModelStreams, ModelStream{Model: r.IntN(K), Need: 0.2 + r.Float64()*3})
	}
	return p
}

func TestExactMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	solved := 0
	for trial := 0; trial < 36; trial++ {
		I := 2 + trial%3 // 2, 3 or 4 model-streams
		p := randomProblem(r, I)
		want := bruteForce(p)
		plan, err := Exact(p, DefaultExactLimits())
		if math.IsInf(want, -1) {
			if !errors.Is(err, ErrInfeasible) {
				t.Fatalf("trial %d: brute force infeasible, Exact: %v", trial, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("trial %d: %v (problem %+v)", trial, err, p)
		}
		if math.Abs(plan.MinBT-want) > 1e-6*math.Max(1, want) {
			t.Fatalf("trial %d: Exact min bt %v, brute force %v (problem %+v, plan %+v)", trial, plan.MinBT, want, p, plan)
		}
		got, err := p.Check(plan)
		if err != nil || math.Abs(got-plan.MinBT) > 1e-9 {
			t.Fatalf("trial %d: plan check %v %v", trial, got, err)
		}
		if h, err := Heuristic(p); err == nil {
			hb, err := p.Check(h)
			if err != nil {
				t.Fatalf("trial %d: heuristic plan invalid: %v", trial, err)
			}
			if hb > want+1e-9 {
				t.Fatalf("trial %d: heuristic %v beats the optimum %v", trial, hb, want)
			}
		}
		solved++
	}
	if solved < 18 {
		t.Fatalf("only %d feasible instances", solved)
	}
}

func TestHeuristicLargeIsFeasibleAndBalanced(t *testing.T) {
	p := largeProblem(300, 120) // the 1,000 x 400 case is BenchmarkHerdPlan1000x400
	plan, err := Heuristic(p)
	if err != nil {
		t.Fatal(err)
	}
	bt, err := p.Check(plan)
	if err != nil {
		t.Fatal(err)
	}
	// Upper bound: no plan beats N / sum n (all GPUs, all load).
	sum := 0.0
	for _, ms := range p.ModelStreams {
		sum += ms.Need
	}
	ub := float64(p.Workers) / sum
	if bt > ub+1e-9 || bt < 0.8*ub {
		t.Fatalf("heuristic min bt %v, upper bound %v", bt, ub)
	}
	t.Logf("300 model-streams / 120 workers: %d groups, min bt %.4f (upper bound %.4f)", len(plan.Groups), bt, ub)
}

func largeProblem(I, N int) *Problem {
	r := rand.New(rand.NewPCG(21, 22))
	K := 13
	p := &Problem{Workers: N, GroupLimit: 12, Mem: 16, ModelMem: make([]float64, K), AffinitySet: make([]int, K)}
	for k := range p.ModelMem {
		p.ModelMem[k] = 0.5 + r.Float64()*2
	}
	for i := 0; i < I; i++ {
		p.ModelStreams = append(p.ModelStreams, ModelStream{Model: i % K, Need: math.Exp(r.NormFloat64()) * 0.3})
	}
	return p
}

func TestAggregateAndAffinitySets(t *testing.T) {
	ms := Aggregate([]StreamLoad{{0, 0, 2}, {1, 0, 3}, {2, 1, 1}, {3, 0, 4}}, 5)
	// model 0 (4, 3, 2 by need desc) with cap 5: {4}, {3,2}; model 1: {1}
	if len(ms) != 3 || ms[0].Need != 4 || ms[1].Need != 5 || ms[2].Need != 1 || ms[2].Model != 1 {
		t.Fatalf("Aggregate = %+v", ms)
	}
	if one := Aggregate([]StreamLoad{{0, 0, 2}, {1, 0, 3}}, 0); len(one) != 1 || one[0].Need != 5 {
		t.Fatalf("Aggregate(0) = %+v", one)
	}
	models := []flex.Model{{Alpha: 1, Beta: 1}, {Alpha: 1, Beta: 1.1}, {Alpha: 0.1, Beta: 50}}
	sets := AffinitySets(models, 3)
	if sets[0] != sets[1] || sets[2] == sets[0] {
		t.Fatalf("AffinitySets = %v", sets)
	}
	if all := AffinitySets(models, math.Inf(1)); all[0] != 0 || all[1] != 0 || all[2] != 0 {
		t.Fatalf("AffinitySets(inf) = %v", all)
	}
	// T for RN18 at 250 ms: largest b with 2(0.22b+3.74) <= 250 is 128 (capped)
	if got, want := Throughput(flex.Model{Alpha: 0.22, Beta: 3.74}, 250, 128), 128/(0.22*128+3.74); math.Abs(got-want) > 1e-12 {
		t.Fatalf("Throughput = %v want %v", got, want)
	}
}

func TestValidate(t *testing.T) {
	good := largeProblem(10, 24)
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for i, mut := range []func(*Problem){
		func(p *Problem) { p.Workers = 0 },
		func(p *Problem) { p.GroupLimit = 0 },
		func(p *Problem) { p.ModelStreams[0].Need = 0 },
		func(p *Problem) { p.ModelStreams[0].Model = 99 },
		func(p *Problem) { p.AffinitySet = p.AffinitySet[:1] },
		func(p *Problem) { p.ModelMem[0] = 100 },
	} {
		p := largeProblem(10, 24)
		mut(p)
		if err := p.Validate(); !errors.Is(err, ErrProblem) {
			t.Fatalf("mutation %d: err = %v", i, err)
		}
	}
	if _, err := Exact(largeProblem(20, 40), DefaultExactLimits()); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Exact on a large instance: %v", err)
	}
}

// BenchmarkHerdPlan1000x400 plans 1,000 model-streams over 400 workers
// (G-bar 12, memory 16 with 0.5-2.5 per model): the goal is < 10 s.
func BenchmarkHerdPlan1000x400(b *testing.B) {
	p := largeProblem(1000, 400)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Heuristic(p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHerdExactSmall times the exact branch-and-bound on small sizes
// (random memory limits and affinity sets, 8 workers, G-bar 4).
func BenchmarkHerdExactSmall(b *testing.B) {
	for _, I := range []int{3, 4, 5, 6} {
		b.Run(fmt.Sprintf("streams=%d", I), func(b *testing.B) {
			r := rand.New(rand.NewPCG(31, uint64(I)))
			p := randomProblem(r, I)
			p.Workers, p.GroupLimit = 8, 4
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				plan, err := Exact(p, ExactLimits{MaxModelStreams: 8, MaxGroups: 8, MaxNodes: 200000})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(plan.Nodes), "nodes")
				_ = t0
			}
		})
	}
}
