package accuracy

import (
	"errors"
	"math"
	"sort"
	"testing"

	"github.com/idn-net/idn/policy/sim"
	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"
)

func near(a, b, tol float64) bool {
	return math.Abs(a-b) <= tol*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

// Paper 001 Example 1: with lambda-hat = 0.79 lambda^max the optimal class-3
// traffic at the true lambda = 0.8 lambda^max exceeds class-3 capacity:
// lambda p3*(lambda-hat) = 0.0843 > 0.0833 = alpha_3 mu_3.
func TestExample1(t *testing.T) {
	s := System{Mu: []float64{1, 0.5, 0.25}, A: []float64{40, 50, 100}, Alpha: []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}}
	lm, err := LambdaMax(s, 52)
	if err != nil {
		t.Fatal(err)
	}
	hat, err := SolveLP(s, 52, 0.79*lm)
	if err != nil {
		t.Fatal(err)
	}
	got := 0.8 * lm * hat.P[2]
	// The paper prints 0.0843: the exact value is 0.08439..., i.e. the paper
	// truncates to four decimals.
	if math.Floor(got*1e4)/1e4 != 0.0843 {
		t.Fatalf("lambda p3*(lambda-hat) = %.5f, paper says 0.0843", got)
	}
	if cap3 := s.Alpha[2] * s.Mu[2]; !(got > cap3) || math.Abs(cap3-0.0833) > 5e-5 {
		t.Fatalf("class-3 capacity %.5f, traffic %.5f: want traffic > capacity 0.0833", cap3, got)
	}
	t.Logf("lambda^max=%.6f  lambda p3*(lambda-hat)=%.6f > alpha3 mu3=%.6f", lm, got, s.Alpha[2]*s.Mu[2])
}

// Paper 001 Example 2 (LP part): a*=45 makes {1,3} the Lemma 3 pair with
// q=(11/12,0,1/12) and latency 15/12 = 1.25, against 1.5 for the {1,2}
// round robin that TAD picks (the TAD half is in policy_test.go).
func TestExample2Pair(t *testing.T) {
	s := System{Mu: []float64{1, 0.5, 0.25}, A: []float64{40, 50, 100}, Alpha: []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}}
	p, cost, err := Lemma3(s, 45)
	if err != nil {
		t.Fatal(err)
	}
	if !near(cost, 1.25, 1e-12) || !near(p[0], 11.0/12, 1e-12) || p[1] != 0 || !near(p[2], 1.0/12, 1e-12) {
		t.Fatalf("Lemma 3 pair p=%v cost=%v, want (11/12,0,1/12) cost 1.25", p, cost)
	}
	rr := 0.5*(1/s.Mu[0]) + 0.5*(1/s.Mu[1])
	if rr != 1.5 {
		t.Fatalf("round robin {1,2} latency %v, want 1.5", rr)
	}
}

// Paper 001 Example 3. The paper's capacity limits (0.0625 for pair {1,3},
// 0.25 for {2,3}) do not follow from its stated mu=(1,0.5,0.25),
// alpha=(0.025,0.95,0.025): lambda q <= mu_alpha gives 0.025/0.8 =
// 0.00625/0.2 = 0.03125 for {1,3} and 0.00625/0.04 = 0.15625 for {2,3}. We
// test what the stated parameters give.
func TestExample3(t *testing.T) {
	s := System{Mu: []float64{1, 0.5, 0.25}, A: []float64{40, 50, 100}, Alpha: []float64{0.025, 0.95, 0.025}}
	const astar = 52
	p, _, err := Lemma3(s, astar)
	if err != nil {
		t.Fatal(err)
	}
	if !near(p[0], 0.8, 1e-12) || p[1] != 0 || !near(p[2], 0.2, 1e-12) {
		t.Fatalf("optimal pair q=%v, want (0.8,0,0.2)", p)
	}
	tuples, err := RoutingTuples(s, astar)
	if err != nil {
		t.Fatal(err)
	}
	limit := func(i, j int) float64 {
		for _, tu := range tuples {
			if tu.I == i && tu.J == j {
				l := math.Inf(1)
				for c, q := range tu.Q {
					if q > 0 {
						l = math.Min(l, s.Alpha[c]*s.Mu[c]/q)
					}
				}
				return l
			}
		}
		t.Fatalf("no tuple {%d,%d}", i+1, j+1)
		return 0
	}
	if l := limit(0, 2); !near(l, 0.03125, 1e-12) {
		t.Fatalf("pair {1,3} capacity limit %v, want 0.03125 (paper prints 0.0625)", l)
	}
	if l := limit(1, 2); !near(l, 0.15625, 1e-12) {
		t.Fatalf("pair {2,3} capacity limit %v, want 0.15625 (paper prints 0.25)", l)
	}
	// order: {1,3} proper, {2,3} proper, {1,2} shuffle, {3} singleton
	var got []string
	for _, tu := range tuples {
		got = append(got, tu.String())
	}
	if tuples[0].I != 0 || tuples[0].J != 2 || tuples[1].I != 1 || tuples[1].J != 2 ||
		tuples[2].I != 0 || tuples[2].J != 1 || tuples[2].Kind != Shuffle || tuples[3].Kind != Singleton {
		t.Fatalf("S*_opt order %v", got)
	}
	lm, err := LambdaMax(s, astar)
	if err != nil {
		t.Fatal(err)
	}
	if !near(lm, 0.15625, 1e-12) {
		t.Fatalf("lambda^max = %v, want 0.15625", lm)
	}
	// As lambda grows the optimal mix leaves class 1 through the shuffle pair
	// {1,2}; at lambda^max only classes 2 and 3 are used.
	prev := math.Inf(1)
	for _, f := range []float64{0.1, 0.3, 0.5, 0.7, 0.9, 1} {
		lam := f * lm
		sol, err := SolveLP(s, astar, lam)
		if err != nil {
			t.Fatal(err)
		}
		wf, err := Waterfilling(s, astar, lam)
		if err != nil {
			t.Fatal(err)
		}
		if !near(wf.N, sol.N, 1e-9) {
			t.Fatalf("lambda=%v: N_WF=%v, N_LP=%v", lam, wf.N, sol.N)
		}
		traffic1 := lam * sol.P[0]
		if lam > 0.03125 && !(traffic1 < prev+1e-15) {
			t.Fatalf("lambda=%v: class-1 traffic %v grew (prev %v)", lam, traffic1, prev)
		}
		if lam > 0.03125 {
			prev = traffic1
			if wf.W[2] <= 0 {
				t.Fatalf("lambda=%v: shuffle pair {1,2} unused, weights %v", lam, wf.W)
			}
		}
	}
	sol, _ := SolveLP(s, astar, lm)
	if sol.P[0] > 1e-12 || !near(sol.P[1], 0.96, 1e-9) || !near(sol.P[2], 0.04, 1e-9) {
		t.Fatalf("p*(lambda^max) = %v, want (0,0.96,0.04)", sol.P)
	}
}

func TestPaperSystemTuples(t *testing.T) {
	s := DefaultSystem()
	tu, err := RoutingTuples(s, 76)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"{1,3}", "{2,3}", "{1,2}", "{3}", "{2,4}", "{1,4}", "{4}"}
	if len(tu) != len(want) {
		t.Fatalf("got %d tuples %v", len(tu), tu)
	}
	for i, w := range want {
		s := tu[i].String()
		if s[:len(w)] != w {
			t.Fatalf("tuple %d = %s, want %s...", i, s, w)
		}
	}
	lm, _ := LambdaMax(s, 76)
	if !near(lm, 0.225+0.025+0.25+1.25/6, 1e-12) {
		t.Fatalf("lambda^max=%v", lm)
	}
}

func TestErrors(t *testing.T) {
	s := DefaultSystem()
	if _, err := SolveLP(s, 76, 0.8); !errors.Is(err, ErrInfeasible) {
		t.Fatalf("lambda above lambda^max: %v", err)
	}
	if _, err := LambdaMax(s, 101); !errors.Is(err, ErrInfeasible) {
		t.Fatalf("astar above max a: %v", err)
	}
	if _, err := Waterfilling(s, 76, 0.8); !errors.Is(err, ErrInfeasible) {
		t.Fatalf("waterfilling above lambda^max: %v", err)
	}
	bad := System{Mu: []float64{1, -1}, A: []float64{1, 2}, Alpha: []float64{0.5, 0.5}}
	if _, err := LambdaMax(bad, 1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("negative mu: %v", err)
	}
	bad = System{Mu: []float64{1, 1}, A: []float64{1, 2}, Alpha: []float64{0.5, 0.6}}
	if _, err := LambdaMax(bad, 1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("alpha sum: %v", err)
	}
}

// randomSystem draws an instance in the paper's regime: mu strictly
// decreasing, a strictly increasing, alpha > 0 summing to 1.
func randomSystem(r interface {
	Float64() float64
	IntN(int) int
}) System {
	k := 1 + r.IntN(6)
	mu := make([]float64, k)
	a := make([]float64, k)
	al := make([]float64, k)
	sum := 0.0
	for i := 0; i < k; i++ {
		mu[i] = 0.05 + 3*r.Float64()
		a[i] = 100 * r.Float64()
		al[i] = 0.05 + r.Float64()
		sum += al[i]
	}
	sort.Sort(sort.Reverse(sort.Float64Slice(mu)))
	sort.Float64s(a)
	for i := range al {
		al[i] /= sum
	}
	return System{Mu: mu, A: a, Alpha: al}
}

// gonumLP solves eq. (3) with gonum's float simplex (the independent method).
func gonumLP(s System, astar, lambda float64) (p []float64, obj float64, err error) {
	k := s.K()
	nv := 2*k + 1
	rows := k + 2
	A := mat.NewDense(rows, nv, nil)
	b := make([]float64, rows)
	for i := 0; i < k; i++ {
		A.Set(i, i, lambda)
		A.Set(i, k+i, 1)
		b[i] = s.Alpha[i] * s.Mu[i]
		A.Set(k, i, 1)
		A.Set(k+1, i, s.A[i])
	}
	A.Set(k+1, 2*k, -1)
	b[k], b[k+1] = 1, astar
	c := make([]float64, nv)
	for i := 0; i < k; i++ {
		c[i] = 1 / s.Mu[i]
	}
	obj, x, err := lp.Simplex(c, A, b, 1e-10, nil)
	if err != nil {
		return nil, 0, err
	}
	return x[:k], obj, nil
}

// Theorem 1 of paper 001: Waterfilling (Algorithm 1) equals the LP optimum.
// Checked on 1,500 random instances with K <= 6 against gonum's simplex (an
// independent float method) and against our exact rational simplex.
func TestWaterfillingEqualsLP(t *testing.T) {
	r := sim.NewRand(20261122)
	checked, pchecked := 0, 0
	for it := 0; checked < 1500; it++ {
		s := randomSystem(r)
		astar := s.A[0] - 5 + (s.A[s.K()-1]-s.A[0]+5)*r.Float64()
		lm, err := LambdaMax(s, astar)
		if err != nil {
			t.Fatal(err)
		}
		lam := lm * (1e-3 + (1-1e-3)*r.Float64())
		if it%10 == 0 {
			lam = lm // the boundary is part of Theorem 1
		}
		wf, err := Waterfilling(s, astar, lam)
		if err != nil {
			t.Fatalf("instance %d %+v a*=%v lambda=%v (max %v): %v", it, s, astar, lam, lm, err)
		}
		gp, gobj, err := gonumLP(s, astar, lam)
		if err != nil {
			if lam == lm {
				continue // gonum may report the boundary infeasible by rounding
			}
			t.Fatalf("instance %d: gonum: %v", it, err)
		}
		ex, err := SolveLP(s, astar, lam)
		if err != nil {
			t.Fatal(err)
		}
		if !near(wf.N, lam*gobj, 1e-8) || !near(ex.T, gobj, 1e-8) {
			t.Fatalf("instance %d %+v a*=%v lambda=%v: N_WF=%.12g, lambda*T_gonum=%.12g, lambda*T_exact=%.12g",
				it, s, astar, lam, wf.N, lam*gobj, ex.N)
		}
		// p is unique for generic instances (Assumption 1); compare it too.
		same := true
		for i := range gp {
			if math.Abs(wf.P[i]-ex.P[i]) > 1e-7 {
				same = false
			}
		}
		if same {
			pchecked++
		}
		acc := 0.0
		for i := range wf.P {
			acc += wf.P[i] * s.A[i]
			if lam*wf.P[i] > s.Alpha[i]*s.Mu[i]*(1+1e-9)+1e-12 || wf.P[i] < -1e-12 {
				t.Fatalf("instance %d: waterfilling p=%v breaks capacity", it, wf.P)
			}
		}
		if acc < astar-1e-7 {
			t.Fatalf("instance %d: waterfilling accuracy %v < a* %v", it, acc, astar)
		}
		checked++
	}
	if pchecked < checked*99/100 {
		t.Fatalf("p vectors agree on only %d of %d instances", pchecked, checked)
	}
	t.Logf("%d instances: N_WF == lambda*T_LP (gonum and exact); p identical on %d", checked, pchecked)
}

// Lemma 3 of paper 001: the closed form equals the relaxed LP (eq. 8).
func TestLemma3EqualsRelaxedLP(t *testing.T) {
	r := sim.NewRand(7)
	for it := 0; it < 1000; it++ {
		s := randomSystem(r)
		astar := s.A[0] - 5 + (s.A[s.K()-1]-s.A[0]+5)*r.Float64()
		p, cost, err := Lemma3(s, astar)
		if err != nil {
			t.Fatal(err)
		}
		rel, err := SolveRelaxedLP(s, astar)
		if err != nil {
			t.Fatal(err)
		}
		if !near(cost, rel.T, 1e-10) {
			t.Fatalf("instance %d: Lemma 3 cost %v, relaxed LP %v", it, cost, rel.T)
		}
		for i := range p {
			if math.Abs(p[i]-rel.P[i]) > 1e-9 {
				t.Fatalf("instance %d: Lemma 3 p=%v, relaxed LP p=%v", it, p, rel.P)
			}
		}
	}
}

// LambdaMax (rational simplex) equals the greedy closed form: take the
// classes with a_i >= a* in full, then the others in decreasing accuracy
// while the accuracy slack lasts.
func TestLambdaMaxGreedy(t *testing.T) {
	r := sim.NewRand(3)
	for it := 0; it < 1000; it++ {
		s := randomSystem(r)
		astar := s.A[0] + (s.A[s.K()-1]-s.A[0])*r.Float64()
		lm, err := LambdaMax(s, astar)
		if err != nil {
			t.Fatal(err)
		}
		slack, tot := 0.0, 0.0
		for i := range s.A {
			if s.A[i] >= astar {
				slack += (s.A[i] - astar) * s.Alpha[i] * s.Mu[i]
				tot += s.Alpha[i] * s.Mu[i]
			}
		}
		for i := s.K() - 1; i >= 0; i-- {
			if s.A[i] >= astar {
				continue
			}
			d := astar - s.A[i]
			x := math.Min(s.Alpha[i]*s.Mu[i], slack/d)
			tot += x
			slack -= x * d
		}
		if !near(lm, tot, 1e-10) {
			t.Fatalf("instance %d: lambda^max %v, greedy %v", it, lm, tot)
		}
	}
}
