package flex

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

func testModels() []Model {
	return []Model{
		{Name: "RN18", Alpha: 0.22, Beta: 3.74},
		{Name: "RS269", Alpha: 4.37, Beta: 74.20},
		{Name: "RN50", Alpha: 0.75, Beta: 7.96},
	}
}

// bruteLargest returns the size of the largest subset of rs that can all
// finish by their deadlines in one batch started at start.
func bruteLargest(rs []Request, m Model, start float64, maxB int) int {
	best := 0
	n := len(rs)
	for mask := 1; mask < 1<<n; mask++ {
		k := 0
		minD := math.Inf(1)
		for i := 0; i < n; i++ {
			if mask&(1<<i) != 0 {
				k++
				minD = math.Min(minD, rs[i].Deadline)
			}
		}
		if k <= maxB && k > best && start+m.Latency(k) <= minD {
			best = k
		}
	}
	return best
}

func TestLargestFeasibleMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 3000; trial++ {
		m := Model{Alpha: 0.1 + r.Float64()*3, Beta: r.Float64() * 20}
		n := r.IntN(11)
		nExtra := r.IntN(4)
		start := r.Float64() * 10
		var q queue
		var all, extra []Request
		for i := 0; i < n+nExtra; i++ {
			rq := Request{ID: uint64(i), Deadline: start + r.Float64()*(m.Latency(12)+5)}
			all = append(all, rq)
			if i < n {
				q.insert(rq)
			} else {
				extra = append(extra, rq)
			}
		}
		sort.Slice(extra, func(a, b int) bool { return extra[a].Deadline < extra[b].Deadline })
		maxB := 1 + r.IntN(14)
		want := bruteLargest(all, m, start, maxB)
		got, fin := largestFeasible(&q, extra, &m, start, maxB)
		if got != want {
			t.Fatalf("trial %d: largestFeasible = %d, brute force = %d", trial, got, want)
		}
		if got > 0 && math.Abs(fin-(start+m.Latency(got))) > 1e-9 {
			t.Fatalf("trial %d: finish %v", trial, fin)
		}
		// without the extra set, the batch FLEX would dequeue is feasible
		wantQ := bruteLargest(all[:n], m, start, maxB)
		gotQ, fin := largestFeasible(&q, nil, &m, start, maxB)
		if gotQ != wantQ {
			t.Fatalf("trial %d: queue only: %d, brute force %d", trial, gotQ, wantQ)
		}
		if gotQ > 0 {
			i := q.firstAtLeast(fin)
			b := q.take(nil, i, gotQ)
			for _, rq := range b {
				if fin > rq.Deadline {
					t.Fatalf("trial %d: taken request misses deadline", trial)
				}
			}
			if q.len() != n-gotQ {
				t.Fatalf("trial %d: queue len %d after taking %d of %d", trial, q.len(), gotQ, n)
			}
		}
	}
}

func TestFlexStartsLargestFeasibleBatchAcrossModels(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	models := testModels()
	for trial := 0; trial < 300; trial++ {
		cfg := DefaultConfig()
		cfg.Models = models
		cfg.Preemption = false
		f, err := NewFlex(cfg)
		if err != nil {
			t.Fatal(err)
		}
		// occupy the GPU with a long batch so arrivals queue up
		f.Arrive(Request{ID: 1000, Model: 1, Deadline: 1e9}, 0)
		busyID := f.Decisions()[0].BatchID
		var queued []Request
		for i := 0; i < 1+r.IntN(10); i++ {
			rq := Request{ID: uint64(i), Model: int32(r.IntN(len(models))), Arrival: 0, Deadline: 79 + r.Float64()*150}
			f.Arrive(rq, 0)
			queued = append(queued, rq)
		}
		now := 78.57
		f.Complete(0, busyID, now)
		best := 0
		for mi, m := range models {
			var rs []Request
			for _, rq := range queued {
				if int(rq.Model) == mi && now+m.Latency(1) <= rq.Deadline {
					rs = append(rs, rq)
				}
			}
			best = max(best, bruteLargest(rs, m, now, 128))
		}
		got := 0
		for _, d := range f.Decisions() {
			if d.Kind == Start {
				got = len(d.Batch)
				for _, rq := range d.Batch {
					if d.Finish > rq.Deadline || int(rq.Model) != d.Model {
						t.Fatalf("trial %d: infeasible batch", trial)
					}
				}
			}
		}
		if got != best {
			t.Fatalf("trial %d: started batch of %d, brute-force largest %d", trial, got, best)
		}
	}
}

// TestPreemptionExactlyAtLambda: same-model arrivals with loose deadlines on
// one GPU without exit points. The candidate batch is Q_m plus the running
// batch, so with lambda = 3.03 preemption must happen exactly at arrivals
// 4 (>= 3.03*1), 13 (>= 3.03*4 = 12.12), 40 (>= 39.39) and 122 (>= 121.2),
// and never one request earlier.
func TestPreemptionExactlyAtLambda(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Models = []Model{{Name: "a", Alpha: 1, Beta: 10}, {Name: "b", Alpha: 1, Beta: 10}}
	f, err := NewFlex(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var at []int
	var sizes []int
	for i := 1; i <= 128; i++ {
		f.Arrive(Request{ID: uint64(i), Deadline: 1e6}, 0)
		for _, d := range f.Decisions() {
			if d.Kind == Preempt {
				at = append(at, i)
			}
			if d.Kind == Start {
				sizes = append(sizes, len(d.Batch))
			}
		}
	}
	want := []int{4, 13, 40, 122}
	if len(at) != len(want) {
		t.Fatalf("preempted at arrivals %v, want %v", at, want)
	}
	for i := range want {
		if at[i] != want[i] {
			t.Fatalf("preempted at arrivals %v, want %v", at, want)
		}
	}
	if want := []int{1, 4, 13, 40, 122}; len(sizes) != len(want) || sizes[4] != 122 {
		t.Fatalf("batch sizes %v, want %v", sizes, want)
	}
	// Cross-model: running batch of 13 of model a; model b requests preempt
	// at exactly ceil(3.03*13) = 40 of them.
	g, _ := NewFlex(cfg)
	for i := 1; i <= 13; i++ {
		g.Arrive(Request{ID: uint64(i), Deadline: 1e6}, 0)
	}
	if _, b, _ := g.Running(0); len(b) != 13 {
		t.Fatalf("running batch %d, want 13", len(b))
	}
	for i := 1; i <= 40; i++ {
		g.Arrive(Request{ID: uint64(100 + i), Model: 1, Deadline: 1e6}, 1)
		pre := false
		for _, d := range g.Decisions() {
			pre = pre || d.Kind == Preempt
		}
		if pre != (i == 40) {
			t.Fatalf("model-b arrival %d: preempted = %v, want %v", i, pre, i == 40)
		}
	}
	if m, b, _ := g.Running(0); m != 1 || len(b) != 40 {
		t.Fatalf("after preemption running model %d batch %d, want model 1 batch 40", m, len(b))
	}
	if g.Queued() != 13 {
		t.Fatalf("preempted requests re-enqueued: queued %d, want 13", g.Queued())
	}
	// SHEPHERD-NP never preempts.
	cfg.Preemption = false
	np, _ := NewFlex(cfg)
	for i := 1; i <= 200; i++ {
		np.Arrive(Request{ID: uint64(i), Deadline: 1e6}, 0)
		for _, d := range np.Decisions() {
			if d.Kind == Preempt {
				t.Fatal("flex-np preempted")
			}
		}
	}
}

func TestPreemptionWaitsForExitPoint(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Models = []Model{{Name: "a", Alpha: 1, Beta: 9, ExitPoints: 10}}
	f, _ := NewFlex(cfg)
	f.Arrive(Request{ID: 1, Deadline: 1e6}, 0) // runs [0, 10], exit points every 1 ms
	for i := 2; i <= 4; i++ {
		f.Arrive(Request{ID: uint64(i), Deadline: 1e6}, 2.5)
	}
	var pre, st Decision
	for _, d := range f.Decisions() {
		switch d.Kind {
		case Preempt:
			pre = d
		case Start:
			st = d
		}
	}
	if pre.Kind != Preempt || pre.At != 3 || st.At != 3 || st.Finish != 3+4+9 {
		t.Fatalf("preempt %+v start %+v: want both at the exit point 3, finish 16", pre, st)
	}
}

func TestAffinityAndK(t *testing.T) {
	rn18 := Model{Alpha: 0.22, Beta: 3.74}
	rs269 := Model{Alpha: 4.37, Beta: 74.20}
	// hand computation (see the definition before eq. (4)):
	// A(RN18,RS269): a_j+b_j-b_i = 74.83 > 0: min(3.96/4.37, max(0.22/74.83, 0.22/4.37)) = 0.22/4.37
	if got, want := Affinity(rn18, rs269), 0.22/4.37; math.Abs(got-want) > 1e-12 {
		t.Fatalf("A(RN18,RS269) = %v, want %v", got, want)
	}
	// A(RS269,RN18): 0.22+3.74-74.2 < 0: (4.37+74.2)/0.22
	if got, want := Affinity(rs269, rn18), 78.57/0.22; math.Abs(got-want) > 1e-9 {
		t.Fatalf("A(RS269,RN18) = %v, want %v", got, want)
	}
	if got := K([]Model{rn18}); got != 1 {
		t.Fatalf("K of one model = %v, want 1", got)
	}
	if got, want := K([]Model{rn18, rs269}), 78.57/0.22; math.Abs(got-want) > 1e-9 {
		t.Fatalf("K = %v, want %v", got, want)
	}
	if got, want := CompetitiveRatio([]Model{rn18}), 12.62; got != want {
		t.Fatalf("bound %v want %v", got, want)
	}
}

func TestConfigValidate(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err == nil {
		t.Fatal("no models accepted")
	}
	c.Models = testModels()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []func(*Config){
		func(c *Config) { c.GPUs = 0 },
		func(c *Config) { c.Lambda = 0.5 },
		func(c *Config) { c.MaxBatch = 0 },
		func(c *Config) { c.Models = []Model{{Name: "x", Alpha: 0, Beta: 1}} },
		func(c *Config) { c.Models = []Model{{Name: "x", Alpha: 1, Beta: math.NaN()}} },
	} {
		cc := c
		bad(&cc)
		if err := cc.Validate(); err == nil {
			t.Fatalf("bad config accepted: %+v", cc)
		}
	}
}

func TestBatchGenPublicMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for trial := 0; trial < 1000; trial++ {
		m := Model{Alpha: 0.2 + r.Float64()*2, Beta: r.Float64() * 10}
		var qd, run []Request
		for i := 0; i < r.IntN(9); i++ {
			qd = append(qd, Request{ID: uint64(i), Deadline: r.Float64() * 40})
		}
		for i := 0; i < r.IntN(3); i++ {
			run = append(run, Request{ID: uint64(100 + i), Deadline: r.Float64() * 40})
		}
		all := append(append([]Request(nil), qd...), run...)
		want := bruteLargest(all, m, 1, 128)
		b := BatchGen(qd, run, m, 1, 128)
		if len(b) != want {
			t.Fatalf("trial %d: BatchGen size %d, brute force %d", trial, len(b), want)
		}
		for _, x := range b {
			if 1+m.Latency(len(b)) > x.Deadline {
				t.Fatalf("trial %d: infeasible member", trial)
			}
		}
	}
}

func TestPlanNexusHandExample(t *testing.T) {
	models := []Model{{Name: "RN18", Alpha: 0.22, Beta: 3.74}}
	sessions := []Session{{Model: 0, SLO: 250}}
	// b = 128 (2*l(128) = 63.8 <= 250), T = 128/31.9 req/ms per GPU; a peak
	// of 10 req/ms needs floor(10/T) = 2 dedicated GPUs plus one residual.
	tput := 128 / models[0].Latency(128)
	p, err := PlanNexus(models, sessions, []float64{10}, 12, 128)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.GPUs) != 3 || p.Scale != 1 || p.GPUs[0][0].Batch != 128 {
		t.Fatalf("plan %+v", p)
	}
	// With 2 GPUs the plan scales the peak down to what 2 dedicated GPUs serve.
	p, err = PlanNexus(models, sessions, []float64{10}, 2, 128)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.GPUs) > 2 || math.Abs(p.Scale-2*tput/10) > 1e-3 {
		t.Fatalf("scale %v, want %v (plan %+v)", p.Scale, 2*tput/10, p)
	}
	if _, err := PlanNexus(models, sessions, []float64{1, 2}, 2, 128); err == nil {
		t.Fatal("mismatched peaks accepted")
	}
}
