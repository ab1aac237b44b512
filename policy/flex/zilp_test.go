package flex

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// optimalZILP is the optimum of paper 004 eq. (3) by exhaustive search: it
// tries every way to pick disjoint same-model batches, place each on a GPU
// after the GPU's previous batch and start it as early as possible
// (max(GPU free, latest arrival in the batch): starting later never helps),
// keeping only batches that finish by their earliest deadline. Time is
// continuous, so this optimum is at least the ZILP's discrete-time one.
func optimalZILP(reqs []Request, models []Model, gpus int) int {
	n := len(reqs)
	free := make([]float64, gpus)
	best := 0
	var dfs func(used int, val int)
	dfs = func(used int, val int) {
		if val > best {
			best = val
		}
		rest := (1<<n - 1) &^ used
		if val+popcount(rest) <= best {
			return
		}
		for sub := rest; sub > 0; sub = (sub - 1) & rest {
			m := -1
			ok := true
			k := 0
			minD, maxA := math.Inf(1), 0.0
			for i := 0; i < n && ok; i++ {
				if sub&(1<<i) == 0 {
					continue
				}
				if m >= 0 && int(reqs[i].Model) != m {
					ok = false
				}
				m = int(reqs[i].Model)
				k++
				minD = math.Min(minD, reqs[i].Deadline)
				maxA = math.Max(maxA, reqs[i].Arrival)
			}
			if !ok {
				continue
			}
			for g := 0; g < gpus; g++ {
				if g > 0 && free[g] == free[g-1] {
					continue // identical idle GPUs are interchangeable
				}
				s := math.Max(free[g], maxA)
				fin := s + models[m].Latency(k)
				if fin > minD {
					continue
				}
				old := free[g]
				free[g] = fin
				dfs(used|sub, val+k)
				free[g] = old
			}
		}
	}
	dfs(0, 0)
	return best
}

func popcount(x int) int {
	c := 0
	for ; x > 0; x &= x - 1 {
		c++
	}
	return c
}

// runOffline drives a scheduler over a trace with its own event loop and
// returns the number of requests completed by their deadline. It fails the
// test if a completed batch misses a deadline, a batch exceeds maxB or mixes
// models, or a request completes twice.
func runOffline(t *testing.T, s Scheduler, reqs []Request, gpus, maxB int) int {
	t.Helper()
	type ev struct {
		t    float64
		kind int // 0 completion, 1 arrival (completions first on ties)
		gpu  int
		id   uint64
		req  Request
	}
	var evs []ev
	for _, r := range reqs {
		evs = append(evs, ev{t: r.Arrival, kind: 1, req: r})
	}
	type run struct {
		id     uint64
		finish float64
		batch  []Request
	}
	running := make([]run, gpus)
	done := map[uint64]bool{}
	good := 0
	apply := func() {
		for _, d := range s.Decisions() {
			switch d.Kind {
			case Start:
				if len(d.Batch) == 0 || len(d.Batch) > maxB {
					t.Fatalf("batch of %d", len(d.Batch))
				}
				for _, r := range d.Batch {
					if int(r.Model) != d.Model {
						t.Fatalf("batch mixes models")
					}
				}
				running[d.GPU] = run{id: d.BatchID, finish: d.Finish, batch: append([]Request(nil), d.Batch...)}
				evs = append(evs, ev{t: d.Finish, kind: 0, gpu: d.GPU, id: d.BatchID})
			case Preempt:
				if running[d.GPU].id == d.BatchID {
					running[d.GPU] = run{}
				}
			}
		}
	}
	for len(evs) > 0 {
		sort.SliceStable(evs, func(a, b int) bool {
			if evs[a].t != evs[b].t {
				return evs[a].t < evs[b].t
			}
			return evs[a].kind < evs[b].kind
		})
		e := evs[0]
		evs = evs[1:]
		if e.kind == 1 {
			s.Arrive(e.req, e.t)
		} else {
			rn := running[e.gpu]
			if rn.id == e.id {
				for _, r := range rn.batch {
					if rn.finish > r.Deadline+1e-9 {
						t.Fatalf("completed batch misses deadline: finish %v > %v", rn.finish, r.Deadline)
					}
					if done[r.ID] {
						t.Fatalf("request %d completed twice", r.ID)
					}
					done[r.ID] = true
					good++
				}
				running[e.gpu] = run{}
			}
			s.Complete(e.gpu, e.id, e.t)
		}
		apply()
	}
	return good
}

// TestFlexWithinCompetitiveRatioOfZILP compares FLEX with the brute-force
// optimum of eq. (3) on tiny random offline traces: Theorem 5.2 says
// OPT <= 12.62*K*FLEX.
func TestFlexWithinCompetitiveRatioOfZILP(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	sets := [][]Model{
		{{Name: "a", Alpha: 1, Beta: 4}},
		{{Name: "rn18", Alpha: 0.22, Beta: 3.74}, {Name: "rn34", Alpha: 0.38, Beta: 5.78}},
		{{Name: "x", Alpha: 2, Beta: 10}, {Name: "y", Alpha: 2.5, Beta: 9}},
	}
	worst := 0.0
	trials := 0
	for trial := 0; trial < 400; trial++ {
		models := sets[trial%len(sets)]
		gpus := 1 + r.IntN(2)
		n := 2 + r.IntN(5)
		var reqs []Request
		for i := 0; i < n; i++ {
			m := r.IntN(len(models))
			a := float64(r.IntN(15))
			slo := models[m].Latency(1) + float64(r.IntN(20))
			reqs = append(reqs, Request{ID: uint64(i + 1), Model: int32(m), Arrival: a, Deadline: a + slo})
		}
		sort.SliceStable(reqs, func(a, b int) bool { return reqs[a].Arrival < reqs[b].Arrival })
		opt := optimalZILP(reqs, models, gpus)
		cfg := DefaultConfig()
		cfg.Models = models
		cfg.GPUs = gpus
		f, err := NewFlex(cfg)
		if err != nil {
			t.Fatal(err)
		}
		got := runOffline(t, f, reqs, gpus, cfg.MaxBatch)
		if got > opt {
			t.Fatalf("trial %d: FLEX %d beats the optimum %d: brute force is wrong", trial, got, opt)
		}
		bound := CompetitiveRatio(models)
		if float64(opt) > bound*float64(got) {
			t.Fatalf("trial %d: OPT %d > %.2f * FLEX %d", trial, opt, bound, got)
		}
		if got > 0 {
			worst = math.Max(worst, float64(opt)/float64(got))
		}
		trials++
	}
	t.Logf("%d traces: worst OPT/FLEX = %.3f (bound 12.62*K, K >= 1)", trials, worst)
}

// TestNoCompletedBatchMissesDeadline drives every scheme with random bursty
// multi-model traces and checks each completed batch (runOffline fails on a
// late one) and conservation of requests.
func TestNoCompletedBatchMissesDeadline(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	models := testModels()
	for trial := 0; trial < 30; trial++ {
		gpus := 1 + r.IntN(4)
		var reqs []Request
		tm := 0.0
		for i := 0; i < 400; i++ {
			if r.IntN(10) == 0 {
				tm += r.ExpFloat64() * 20
			}
			m := r.IntN(len(models))
			slo := models[m].Latency(1) + r.Float64()*200
			reqs = append(reqs, Request{ID: uint64(i + 1), Model: int32(m), Stream: int32(m), Arrival: tm, Deadline: tm + slo})
		}
		cfg := DefaultConfig()
		cfg.Models = models
		cfg.GPUs = gpus
		if trial%3 == 1 {
			for i := range cfg.Models {
				cfg.Models[i].ExitPoints = 7
			}
		}
		fl, _ := NewFlex(cfg)
		cfg.Preemption = false
		np, _ := NewFlex(cfg)
		cw, _ := NewClockwork(cfg)
		sessions := []Session{{0, 1e9}, {1, 1e9}, {2, 1e9}}
		nx, err := NewNexus(NexusConfig{Models: cfg.Models, Sessions: sessions, GPUs: gpus, MaxBatch: 128})
		if err != nil {
			t.Fatal(err)
		}
		plan, err := PlanNexus(cfg.Models, []Session{{0, 250}, {1, 250}, {2, 250}}, []float64{0.5, 0.01, 0.1}, gpus, 128)
		if err != nil {
			t.Fatal(err)
		}
		if err := nx.SetPlan(plan, 0); err != nil {
			t.Fatal(err)
		}
		for _, s := range []Scheduler{fl, np, cw, nx} {
			good := runOffline(t, s, reqs, gpus, 128)
			if good == 0 || good > len(reqs) {
				t.Fatalf("%s: good = %d of %d", s.Name(), good, len(reqs))
			}
		}
	}
}

func TestZILPBruteForceHandInstance(t *testing.T) {
	models := []Model{{Name: "a", Alpha: 1, Beta: 4}}
	reqs := []Request{
		{ID: 1, Arrival: 0, Deadline: 5},
		{ID: 2, Arrival: 1, Deadline: 10}, {ID: 3, Arrival: 1, Deadline: 10}, {ID: 4, Arrival: 1, Deadline: 10},
	}
	// By hand: the three late requests together start at 1 and finish at 8
	// (value 3); serving request 1 first (0..5) leaves room for one more
	// (5..10): value 2; all four together cannot meet deadline 5.
	if got := optimalZILP(reqs, models, 1); got != 3 {
		t.Fatalf("OPT = %d, want 3", got)
	}
	// FLEX runs request 1 at once; at t = 1 the candidate of 3 is below
	// 3.03*1, so no preemption; afterwards one more fits: FLEX = 2.
	cfg := DefaultConfig()
	cfg.Models = models
	f, _ := NewFlex(cfg)
	if got := runOffline(t, f, reqs, 1, 128); got != 2 {
		t.Fatalf("FLEX = %d, want 2", got)
	}
	if got := optimalZILP(reqs, models, 2); got != 4 {
		t.Fatalf("OPT on 2 GPUs = %d, want 4", got)
	}
}
