package infida

import (
	"math"
	"testing"

	"github.com/idn-net/idn/policy/idn"
	"github.com/idn-net/idn/policy/idn/idntest"
	"github.com/idn-net/idn/policy/sim"
)

// bisectProject is an independent solver of the projection: the KKT
// conditions give y = min{1, c y'}; find c by bisection on the budget.
func bisectProject(yp, s []float64, b float64) []float64 {
	total := 0.0
	for _, v := range s {
		total += v
	}
	out := make([]float64, len(yp))
	if total <= b {
		for i := range out {
			out[i] = 1
		}
		return out
	}
	used := func(c float64) float64 {
		u := 0.0
		for i := range yp {
			u += s[i] * math.Min(1, c*yp[i])
		}
		return u
	}
	// bisection on log c, so inputs spanning hundreds of orders of
	// magnitude are handled.
	lo, hi := -1500.0, 1500.0
	for it := 0; it < 300; it++ {
		mid := (lo + hi) / 2
		if used(math.Exp(mid)) < b {
			lo = mid
		} else {
			hi = mid
		}
	}
	for i := range yp {
		out[i] = math.Min(1, math.Exp(hi+math.Log(yp[i])))
	}
	return out
}

func TestProjectionKKTAndBisection(t *testing.T) {
	rng := sim.NewRand(10)
	for trial := 0; trial < 2000; trial++ {
		n := 1 + rng.IntN(40)
		yp := make([]float64, n)
		s := make([]float64, n)
		total := 0.0
		for i := range yp {
			yp[i] = math.Exp(8 * (rng.Float64() - 0.5))
			if trial%3 == 0 { // huge dynamic range, as after many mirror steps
				yp[i] = math.Exp(600 * (rng.Float64() - 0.5))
			}
			if i > 0 && rng.IntN(6) == 0 {
				yp[i] = yp[i-1] // ties
			}
			s[i] = 1 + 100*rng.Float64()
			total += s[i]
		}
		b := total * rng.Float64() * 1.1
		out := make([]float64, n)
		Project(yp, s, b, out, nil)
		want := bisectProject(yp, s, b)
		for i := range out {
			if math.Abs(out[i]-want[i]) > 1e-7*math.Max(1e-12, want[i]) && math.Abs(out[i]-want[i]) > 1e-12 {
				t.Fatalf("trial %d: projection[%d] = %v, bisection %v", trial, i, out[i], want[i])
			}
		}
		if total <= b {
			continue
		}
		// KKT (61a-e): tau from any uncapped entry, beta from (61a).
		tau := math.NaN()
		for i := range out {
			if out[i] < 1-1e-12 {
				tau = math.Log(out[i] / yp[i])
				break
			}
		}
		sum := 0.0
		for i := range out {
			sum += s[i] * out[i]
			if out[i] > 1+1e-12 { // (61b)
				t.Fatalf("(61b) violated: %v", out[i])
			}
			if math.IsNaN(tau) {
				continue
			}
			beta := s[i] * (tau + math.Log(yp[i]) - math.Log(out[i])) // (61a)
			if beta < -1e-7*s[i] {                                    // (61c)
				t.Fatalf("(61c) violated: beta %v tau %v out %v yp %v b %v", beta, tau, out, yp, b)
			}
			if math.Abs(beta*(1-out[i])) > 1e-7*s[i] { // (61e)
				t.Fatalf("(61e) violated: beta %v y %v", beta, out[i])
			}
		}
		if math.Abs(sum-b) > 1e-8*math.Max(1, b) { // (61d)
			t.Fatalf("(61d) violated: %v != %v", sum, b)
		}
	}
}

func TestProjectionCorners(t *testing.T) {
	out := make([]float64, 3)
	Project([]float64{1, 2, 3}, []float64{1, 1, 1}, 5, out, nil)
	for _, v := range out {
		if v != 1 {
			t.Fatal("corner case ||s|| < b must give all ones")
		}
	}
	Project([]float64{0, 0, 2}, []float64{1, 1, 1}, 2, out, nil)
	if math.Abs(out[0]+out[1]+out[2]-2) > 1e-9 || out[2] != 1 {
		t.Fatalf("zero entries: %v", out)
	}
}

func TestDepRoundStatistics(t *testing.T) {
	rng := sim.NewRand(11)
	for trial := 0; trial < 6; trial++ {
		n := 5 + rng.IntN(20)
		yp := make([]float64, n)
		s := make([]float64, n)
		total := 0.0
		for i := range yp {
			yp[i] = rng.Float64()
			s[i] = 10 + 200*rng.Float64()
			total += s[i]
		}
		b := total * (0.2 + 0.6*rng.Float64())
		y := make([]float64, n)
		Project(yp, s, b, y, nil)
		smax := 0.0
		for _, v := range s {
			smax = math.Max(smax, v)
		}
		for _, mode := range []ResidualMode{ResidualRandom, ResidualBudget} {
			const draws = 20000
			mean := make([]float64, n)
			x := make([]float64, n)
			for d := 0; d < draws; d++ {
				DepRound(rng, y, s, b, mode, nil, x)
				used := 0.0
				for i := range x {
					if x[i] != 0 && x[i] != 1 {
						t.Fatalf("non-integral %v", x[i])
					}
					used += s[i] * x[i]
					mean[i] += x[i] / draws
				}
				if math.Abs(used-b) > smax+1e-9 {
					t.Fatalf("mode %v: used %v budget %v beyond one model size %v", mode, used, b, smax)
				}
				if mode == ResidualBudget && used > b*(1+1e-12) {
					t.Fatalf("budget mode exceeded: %v > %v", used, b)
				}
			}
			if mode != ResidualRandom {
				continue // budget mode trades E[x] = y for feasibility
			}
			for i := range y {
				sd := math.Sqrt(y[i] * (1 - y[i]) / draws)
				if math.Abs(mean[i]-y[i]) > 4*sd+1e-9 {
					t.Fatalf("E[x_%d] = %v, y = %v (4 sigma = %v)", i, mean[i], y[i], 4*sd)
				}
			}
		}
	}
}

// Eq. 18 is a supergradient of the concave gain (eq. 16):
// G(y') <= G(y) + g.(y'-y) for random pairs; and it matches central finite
// differences where G is differentiable.
func TestSubgradientSupergradientAndFiniteDifferences(t *testing.T) {
	rng := sim.NewRand(12)
	checkedFD := 0
	for trial := 0; trial < 300; trial++ {
		in, r, l := idntest.Random(rng, 2+rng.IntN(3), 1+rng.IntN(3), 1+rng.IntN(4), 10*rng.Float64())
		y := idntest.RandomY(rng, in)
		g := make([]float64, len(y))
		Subgradient(in, r, l, y, g, nil)
		gy := in.Gain16(r, l, y)
		for pair := 0; pair < 10; pair++ {
			y2 := idntest.RandomY(rng, in)
			lin := gy
			for i := range y {
				if !in.Omega[i] {
					lin += g[i] * (y2[i] - y[i])
				}
			}
			if g2 := in.Gain16(r, l, y2); g2 > lin+1e-6*math.Max(1, math.Abs(lin)) {
				t.Fatalf("trial %d: not a supergradient: G(y')=%v > %v", trial, g2, lin)
			}
		}
		const h = 1e-6
		for i := range y {
			if in.Omega[i] {
				continue
			}
			yp := append([]float64(nil), y...)
			ym := append([]float64(nil), y...)
			yp[i] += h
			ym[i] -= h
			right := (in.Gain16(r, l, yp) - gy) / h
			left := (gy - in.Gain16(r, l, ym)) / h
			scale := math.Max(1, math.Abs(right))
			if math.Abs(right-left) > 1e-4*scale {
				continue // kink: not differentiable here
			}
			if math.Abs(g[i]-right) > 1e-4*scale {
				t.Fatalf("trial %d coord %d: g %v, finite difference %v", trial, i, g[i], right)
			}
			checkedFD++
		}
	}
	if checkedFD < 500 {
		t.Fatalf("only %d differentiable coordinates checked", checkedFD)
	}
}

// The per-vertex control-message pieces give the centralised eq. 18 to 1e-9.
func TestDistributedSubgradientEqualsCentralised(t *testing.T) {
	rng := sim.NewRand(13)
	outOfOrder := 0
	for trial := 0; trial < 500; trial++ {
		in, r, l := idntest.Random(rng, 2+rng.IntN(4), 1+rng.IntN(3), 1+rng.IntN(5), 20*rng.Float64())
		y := idntest.RandomY(rng, in)
		g1 := make([]float64, len(y))
		g2 := make([]float64, len(y))
		Subgradient(in, r, l, y, g1, nil)
		DistributedSubgradient(in, r, l, y, g2)
		for i := range g1 {
			if math.Abs(g1[i]-g2[i]) > 1e-9 {
				t.Fatalf("trial %d idx %d: centralised %v distributed %v", trial, i, g1[i], g2[i])
			}
		}
		for _, ty := range in.Types {
			for k := 1; k < len(ty.Cands); k++ {
				if ty.Cands[k].Pos < ty.Cands[k-1].Pos {
					outOfOrder++
				}
			}
		}
	}
	if outOfOrder == 0 {
		t.Fatal("no instance had costs out of path order; the pending-entry logic is untested")
	}
}

func TestUpstreamStepCarriesOutOfOrderEntries(t *testing.T) {
	msg := UpMsg{R: 10}
	// vertex 0 has a cost-9 entry, upstream offers cost 5: it must travel.
	UpstreamStep(&msg, []Entry{{Z: 4, Gamma: 9, Pos: 0}, {Z: 3, Gamma: 2, Pos: 0}}, 5)
	if msg.Z != 3 || len(msg.Pending) != 1 || msg.Done {
		t.Fatalf("after vertex 0: %+v", msg)
	}
	UpstreamStep(&msg, []Entry{{Z: 5, Gamma: 5, Pos: 1}}, 100)
	if msg.Z != 12 || !msg.Done || msg.GammaK != 9 {
		t.Fatalf("after vertex 1: %+v", msg)
	}
}

func TestTheoryEtaAndInit(t *testing.T) {
	g, c := idn.TopologyII(), idn.YOLOv4Catalog()
	in, err := idn.NewInstance(g, c, idn.DefaultInstanceConfig(), []idn.TypeKey{{Task: "task-00", Entry: "bs-0"}})
	if err != nil {
		t.Fatal(err)
	}
	eta := TheoryEta(in, 720)
	if !(eta > 0) || eta > 1e-6 {
		t.Fatalf("theory eta %v", eta)
	}
	v, _ := g.VertexIndex("bs-0")
	st := NewVertexState(in, v)
	used := 0.0
	for i := range st.Y {
		used += st.Y[i] * st.Sizes[i]
		if st.Y[i] != st.Y[0] {
			t.Fatal("Lemma E.5 init must be uniform")
		}
	}
	if math.Abs(used-4096) > 1e-6 {
		t.Fatalf("init uses %v of 4096", used)
	}
	cv, _ := g.VertexIndex("cloud")
	if st := NewVertexState(in, cv); len(st.Models) != 0 {
		t.Fatal("repository vertex must have no free models")
	}
	bad := DefaultConfig()
	bad.RefreshInit = 0
	if err := bad.Validate(); err == nil {
		t.Fatal("refresh 0 accepted")
	}
	cfg := Config{RefreshInit: 1, RefreshTarget: 32, Stretch: 60}
	if cfg.RefreshPeriod(0) != 1 || cfg.RefreshPeriod(30) != 16.5 || cfg.RefreshPeriod(100) != 32 {
		t.Fatal("linear stretching")
	}
}

// One INFIDA slot run vertex by vertex from the distributed subgradient
// (what the allocator actors will do) gives the centralised policy's state.
func TestVertexStatesMatchCentralisedUpdate(t *testing.T) {
	rng := sim.NewRand(14)
	for trial := 0; trial < 50; trial++ {
		in, r, l := idntest.Random(rng, 2+rng.IntN(3), 1+rng.IntN(3), 1+rng.IntN(4), 5*rng.Float64())
		cfg := DefaultConfig()
		p, err := New(in, cfg, sim.NewRand(1))
		if err != nil {
			t.Fatal(err)
		}
		var states []*VertexState
		for v := 0; v < in.NV; v++ {
			if st := NewVertexState(in, v); len(st.Models) > 0 {
				states = append(states, st)
			}
		}
		y := p.Fractional()
		for step := 0; step < 3; step++ {
			g := make([]float64, len(y))
			DistributedSubgradient(in, r, l, y, g)
			for _, st := range states {
				base := in.Index(st.V, 0)
				st.Step(g[base:base+in.NM], cfg.Eta)
			}
			p.Update(&Observation{R: r, L: l})
			y = p.Fractional()
			for _, st := range states {
				for i, m := range st.Models {
					if d := math.Abs(st.Y[i] - y[in.Index(st.V, m)]); d > 1e-12 {
						t.Fatalf("trial %d step %d: vertex %d model %d differs by %v", trial, step, st.V, m, d)
					}
				}
			}
		}
	}
}
