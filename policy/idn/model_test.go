package idn_test

import (
	"math"
	"testing"

	"github.com/idn-net/idn/policy/idn"
	"github.com/idn-net/idn/policy/idn/idntest"
	"github.com/idn-net/idn/policy/sim"
)

// Eq. 13 (via eq. 12) equals eq. 16 on random small instances, for random
// fractional and integral allocations.
func TestGain13EqualsGain16(t *testing.T) {
	rng := sim.NewRand(1)
	for trial := 0; trial < 300; trial++ {
		in, r, l := idntest.Random(rng, 2+rng.IntN(3), 1+rng.IntN(3), 1+rng.IntN(4), 10*rng.Float64())
		y := idntest.RandomY(rng, in)
		g13, g16 := in.Gain13(r, l, y), in.Gain16(r, l, y)
		if math.Abs(g13-g16) > 1e-7*math.Max(1, math.Abs(g13)) {
			t.Fatalf("trial %d: eq13 %v != eq16 %v", trial, g13, g16)
		}
		if g13 < -1e-9 {
			t.Fatalf("negative gain %v", g13)
		}
		if g := in.Gain13(r, l, in.OmegaAlloc()); math.Abs(g) > 1e-9 {
			t.Fatalf("gain of omega %v", g)
		}
	}
}

// An independent brute-force of eq. 12: serve requests one at a time,
// each to the cheapest (v,m) with spare effective capacity, all candidates
// of the path enumerated from scratch (no use of the Cands order).
func TestCost12BruteForce(t *testing.T) {
	rng := sim.NewRand(2)
	for trial := 0; trial < 100; trial++ {
		in, r, l := idntest.Random(rng, 2+rng.IntN(3), 1+rng.IntN(2), 1+rng.IntN(3), 5*rng.Float64())
		x := idntest.RandomY(rng, in)
		for i := range x {
			x[i] = math.Round(x[i])
		}
		for rho, ty := range in.Types {
			type opt struct {
				cost, capLeft float64
			}
			var opts []opt
			for j, v := range ty.Path {
				for _, m := range in.Catalog.ModelsFor(ty.Key.Task) {
					cost := in.Cost(ty.Path, j, m)
					k := in.Rank(rho, v, m)
					capv := 0.0
					switch {
					case in.Omega[in.Index(v, m)]:
						capv = math.Inf(1)
					case k > 0:
						capv = x[in.Index(v, m)] * l[rho][k-1]
					}
					opts = append(opts, opt{cost, capv})
				}
			}
			want := 0.0
			for q := 0; q < int(r[rho]); q++ {
				best := -1
				for i, o := range opts {
					if o.capLeft >= 1 && (best < 0 || o.cost < opts[best].cost) {
						best = i
					}
				}
				want += opts[best].cost
				opts[best].capLeft--
			}
			got := in.TypeCost12(rho, r[rho], l[rho], x)
			if math.Abs(got-want) > 1e-6*math.Max(1, want) {
				t.Fatalf("trial %d type %d: eq12 %v brute force %v", trial, rho, got, want)
			}
		}
	}
}

// Serving with eq. 7 capacities reproduces the served cost under eq. 12.
func TestServeMatchesEq12(t *testing.T) {
	rng := sim.NewRand(3)
	for trial := 0; trial < 100; trial++ {
		in, r, _ := idntest.Random(rng, 2+rng.IntN(3), 1+rng.IntN(3), 1+rng.IntN(4), 5*rng.Float64())
		x := idntest.RandomY(rng, in)
		for i := range x {
			x[i] = math.Round(x[i])
		}
		rem := append([]float64(nil), in.Cap...)
		served := make([][]float64, len(in.Types))
		total := make([]float64, len(in.Cap))
		cost := 0.0
		for _, rho := range rng.Perm(len(in.Types)) {
			served[rho] = make([]float64, len(in.Types[rho].Cands))
			cost += in.TypeServe(rho, r[rho], x, rem, served[rho])
		}
		for rho, ty := range in.Types {
			for k, c := range ty.Cands {
				if !c.Repo {
					total[in.Index(c.V, c.M)] += served[rho][k]
				}
			}
		}
		l := in.LoadsFromServing(r, served, total, nil)
		if c12 := in.Cost12(r, l, x); math.Abs(c12-cost) > 1e-6*math.Max(1, cost) {
			t.Fatalf("trial %d: served cost %v, eq. 12 with eq. 7 loads %v", trial, cost, c12)
		}
	}
}

func TestInstanceTopologyI(t *testing.T) {
	g, c := idn.TopologyI(), idn.YOLOv4Catalog()
	cfg := idn.DefaultInstanceConfig()
	cfg.Alpha = 4
	in, err := idn.NewInstance(g, c, cfg, []idn.TypeKey{{Task: "task-00", Entry: "bs-00"}})
	if err != nil {
		t.Fatal(err)
	}
	ty := in.Types[0]
	last := ty.Cands[len(ty.Cands)-1]
	if !last.Repo || c.Models[last.M].Variant != "yolov4-512p" {
		t.Fatalf("repository model at alpha=4: %+v %q", last, c.Models[last.M].Name)
	}
	for k := 1; k < len(ty.Cands); k++ {
		if ty.Cands[k].Cost < ty.Cands[k-1].Cost {
			t.Fatal("not sorted")
		}
	}
	if _, err := idn.NewInstance(g, c, cfg, []idn.TypeKey{{Task: "nope", Entry: "bs-00"}}); err == nil {
		t.Fatal("unknown task accepted")
	}
	bad := cfg
	bad.SlotSeconds = 0
	if err := bad.Validate(); err == nil {
		t.Fatal("slot_seconds 0 accepted")
	}
}
