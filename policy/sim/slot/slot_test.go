package slot

import (
	"math"
	"testing"

	"github.com/idn-net/idn/policy/idn"
	"github.com/idn-net/idn/policy/idn/idntest"
	"github.com/idn-net/idn/policy/infida"
	"github.com/idn-net/idn/policy/sim"
)

// gainT is G_T(x) of eq. 14 with run-time capacities (one serving round,
// common random numbers).
func gainT(in *idn.Instance, x []float64, batches [][]float64) float64 {
	srv, _ := NewServer(in, Config{Rounds: 1})
	g := 0.0
	for t, r := range batches {
		st, _, _ := srv.Serve(r, x, sim.NewRand(uint64(1000+t)))
		g += st.Gain
	}
	return g / float64(len(batches))
}

// On tiny instances (3 vertices, 4 models) INFIDA_OFFLINE reaches at least
// (1 - 1/e - 0.05) of the brute-force optimal static allocation.
func TestOfflineVersusBruteForce(t *testing.T) {
	rng := sim.NewRand(21)
	worst := math.Inf(1)
	for trial := 0; trial < 8; trial++ {
		in, _, _ := idntest.Random(rng, 3, 1, 4, 5*rng.Float64())
		batches := make([][]float64, 12)
		for i := range batches {
			batches[i] = make([]float64, len(in.Types))
			for rho := range batches[i] {
				batches[i][rho] = float64(50 + rng.IntN(300))
			}
		}
		var free []int
		for i, o := range in.Omega {
			if !o {
				free = append(free, i)
			}
		}
		best := 0.0
		x := in.OmegaAlloc()
		for mask := 0; mask < 1<<len(free); mask++ {
			used := make([]float64, in.NV)
			ok := true
			for b, i := range free {
				x[i] = float64(mask >> b & 1)
				used[i/in.NM] += x[i] * in.Size[i]
			}
			for v := range used {
				rest := in.Budget[v]
				for m := 0; m < in.NM; m++ {
					if in.Omega[in.Index(v, m)] {
						rest -= in.Size[in.Index(v, m)]
					}
				}
				if used[v] > rest+1e-9 {
					ok = false
				}
			}
			if ok {
				best = math.Max(best, gainT(in, x, batches))
			}
		}
		if best <= 0 {
			continue
		}
		cfg := infida.DefaultConfig()
		cfg.Eta = 1e-3
		got := 0.0
		const seeds = 4
		for s := 0; s < seeds; s++ {
			xo, err := TrainOffline(in, Config{Rounds: 1}, cfg, batches, 30, sim.NewRand(uint64(s)))
			if err != nil {
				t.Fatal(err)
			}
			got += gainT(in, xo, batches) / seeds
		}
		ratio := got / best
		worst = math.Min(worst, ratio)
		if ratio < 1-1/math.E-0.05 {
			t.Fatalf("trial %d: INFIDA_OFFLINE %v < (1-1/e-0.05) x optimum %v (ratio %.3f)", trial, got, best, ratio)
		}
	}
	t.Logf("worst INFIDA_OFFLINE / optimum ratio: %.3f", worst)
}

func TestWorkloadCountsAndSliding(t *testing.T) {
	g, c := idn.TopologyI(), idn.YOLOv4Catalog()
	wc := DefaultWorkloadConfig()
	keys := BuildTypes(g, c, wc, sim.NewRand(1))
	if len(keys) != 40 {
		t.Fatalf("%d types, want 40", len(keys))
	}
	for i := 0; i < len(keys); i += 2 {
		if keys[i].Task != keys[i+1].Task || keys[i].Entry == keys[i+1].Entry {
			t.Fatalf("task %s must enter at two distinct base stations", keys[i].Task)
		}
	}
	in, err := idn.NewInstance(g, c, idn.DefaultInstanceConfig(), keys)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := NewWorkload(in, wc)
	rng := sim.NewRand(2)
	r := w.Batch(0, rng)
	total := 0.0
	for _, v := range r {
		total += v
	}
	if total != 450000 {
		t.Fatalf("batch has %v requests, want 450000", total)
	}
	// task 0 share ~ Zipf(1.2) p(0), within 4 sigma
	p0 := w.TaskProb(0, 0)
	got := (r[0] + r[1]) / total
	if sd := math.Sqrt(p0 * (1 - p0) / total); math.Abs(got-p0) > 4*sd {
		t.Fatalf("task 0 share %v, want %v", got, p0)
	}
	wc.Profile, wc.Expected = Sliding, true
	w, _ = NewWorkload(in, wc)
	// slot 60 is exactly one window (2.7e7 = 60 slots at 7,500 rps): shift 5
	r60 := w.Batch(60, rng)
	if want := 450000 * w.zipf.Prob(0); math.Abs(r60[30]+r60[31]-want) > 1e-6 {
		t.Fatalf("after one window task 15 must have rank-0 popularity (p((15+5) mod 20)): %v vs %v", r60[30]+r60[31], want)
	}
	if bad := (WorkloadConfig{}); bad.Validate() == nil {
		t.Fatal("zero workload config accepted")
	}
}

// smallCatalog is the YOLOv4 catalog cut to 6 tasks and 4 variants with
// 2 replicas, to keep the race-enabled tests fast.
func smallCatalog(t *testing.T) *idn.Catalog {
	c, err := idn.ParseCatalogYAML([]byte(`
task_count: 6
replicas: 2
variants:
  - {name: tiny-288p, accuracy: 0.344, size_mb: 160,  speed: {titan-rtx: {fps: 1272}, gtx-980: {fps: 433}}}
  - {name: 3.99pruned, accuracy: 0.551, size_mb: 395, speed: {titan-rtx: {fps: 209}, gtx-980: {fps: 71.0}}}
  - {name: 416p, accuracy: 0.628, size_mb: 1009, speed: {titan-rtx: {fps: 73.8}, gtx-980: {fps: 25.1}}}
  - {name: 608p, accuracy: 0.657, size_mb: 1577, speed: {titan-rtx: {fps: 41.7}, gtx-980: {fps: 14.2}}}
`))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRunMetricsAndDeterminism(t *testing.T) {
	c := DefaultExperimentConfig()
	c.Catalog = smallCatalog(t)
	c.Workload.Rate = 2000
	c.Slots = 20
	c.SGSlots = 10
	a, err := RunExperiment(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := Prepare(c)
	for _, r := range a {
		if r.NTAG > s.NTAGBound()+1e-9 {
			t.Fatalf("%s: NTAG %v above the capacity-free bound %v", r.Policy, r.NTAG, s.NTAGBound())
		}
	}
	b, _ := RunExperiment(c, nil)
	for i := range a {
		if a[i].NTAG != b[i].NTAG || a[i].MU != b[i].MU {
			t.Fatalf("%s not deterministic", a[i].Policy)
		}
		if !(a[i].NTAG > 0) || a[i].AvgLatency <= 0 || a[i].AvgInaccuracy <= 0 {
			t.Fatalf("%s: bad metrics %+v", a[i].Policy, a[i])
		}
		if (a[i].Policy == "SG" || a[i].Policy == "INFIDA_OFFLINE") && a[i].MU != 0 {
			t.Fatalf("static policy %s has MU %v", a[i].Policy, a[i].MU)
		}
	}
	c.Policies = []string{"bogus"}
	if _, err := RunExperiment(c, nil); err == nil {
		t.Fatal("unknown policy accepted")
	}
}

// Every allocation a policy produces respects the budgets (budget-mode
// DepRound, OLAG and SG fill within b^v).
func TestAllocationsRespectBudgets(t *testing.T) {
	c := DefaultExperimentConfig()
	c.Catalog = smallCatalog(t)
	c.Workload.Rate = 2000
	c.Slots = 20
	s, err := Prepare(c)
	if err != nil {
		t.Fatal(err)
	}
	in := s.Instance
	check := func(name string, x []float64) {
		for v := 0; v < in.NV; v++ {
			used, rest := 0.0, in.Budget[v]
			for m := 0; m < in.NM; m++ {
				i := in.Index(v, m)
				if in.Omega[i] {
					rest -= in.Size[i]
					if x[i] != 1 {
						t.Fatalf("%s: repository model not hosted", name)
					}
					continue
				}
				used += x[i] * in.Size[i]
			}
			if used > rest+1e-6 {
				t.Fatalf("%s: vertex %d uses %v > %v", name, v, used, rest)
			}
		}
	}
	p, _ := infida.New(in, c.INFIDA, sim.NewRand(1))
	o := infida.NewOLAG(in, infida.OLAGCumulative)
	srv, _ := NewServer(in, c.Serving)
	for ti, r := range s.Batches {
		for _, pol := range []infida.Policy{p, o} {
			check(pol.Name(), pol.Allocation())
			_, l, served := srv.Serve(r, pol.Allocation(), sim.NewRand(uint64(ti)))
			pol.Update(&infida.Observation{Slot: ti, R: r, L: l, Served: served})
		}
	}
	check("SG", infida.StaticGreedy(in, s.Batches[:5]))
}
