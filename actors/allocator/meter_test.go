package allocator

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/idn-net/idn/policy/idn"
	"github.com/idn-net/idn/policy/sim"
	"github.com/idn-net/idn/policy/sim/slot"
)

const testSlot = 2 * time.Second

// meterInstance builds the instance a node builds (policy/sim/slot.Prepare):
// Topology II, the YOLOv4 catalog and entries random base stations per task.
func meterInstance(t *testing.T, seed uint64, entries int, alpha, slotSeconds float64) *idn.Instance {
	t.Helper()
	g, c := idn.TopologyII(), idn.YOLOv4Catalog()
	keys := slot.BuildTypes(g, c, slot.WorkloadConfig{EntriesPerTask: entries}, sim.NewRand(sim.SplitSeed(seed, 0)))
	in, err := idn.NewInstance(g, c, idn.InstanceConfig{Alpha: alpha, InaccuracyScale: 100, SlotSeconds: slotSeconds}, keys)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// slotTime returns an instant inside slot s (offset frac of the slot).
func slotTime(s int64, frac float64) time.Time {
	return time.Unix(0, s*int64(testSlot)+int64(frac*float64(testSlot)))
}

func same(a, b float64) bool {
	return a == b || math.IsInf(a, 1) && math.IsInf(b, 1) || math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b))
}

// TestMeasureMatchesLoadsFromServing checks Measure against an independent
// computation of eq. 7 with idn.Instance.LoadsFromServing on random
// instances, vertices and served counts.
func TestMeasureMatchesLoadsFromServing(t *testing.T) {
	partial := 0 // local non-repository entries strictly between 0 and L_m^v
	for trial := 0; trial < 24; trial++ {
		rng := rand.New(rand.NewPCG(uint64(trial), 99))
		in := meterInstance(t, uint64(trial+1), 1+rng.IntN(4), 2*rng.Float64(), 0.5+3*rng.Float64())
		v := rng.IntN(in.NV)
		if trial%3 == 0 { // make sure entry vertices are covered too
			v = in.Types[rng.IntN(len(in.Types))].Path[0]
		}
		vid := in.Graph.Vertices[v].ID
		m := NewMeter(in, v, testSlot)
		s := int64(880_000_000 + rng.IntN(1000))

		served := make([][]float64, len(in.Types))
		total := make([]float64, in.NV*in.NM)
		wantR := make([]float64, len(in.Types))
		local := 0
		for rho, ty := range in.Types {
			served[rho] = make([]float64, len(ty.Cands))
			for k, c := range ty.Cands {
				if c.V != v {
					continue
				}
				local++
				i := in.Index(v, c.M)
				n := rng.IntN(int(in.Cap[i]/2) + 3)
				if c.Repo {
					n = rng.IntN(40)
				}
				name := in.Catalog.Models[c.M].Name
				for j := 0; j < n; j++ {
					m.Serve(slotTime(s, rng.Float64()), ty.Key.Task, ty.Key.Entry, name)
				}
				served[rho][k] += float64(n)
				total[i] += float64(n)
			}
			if ty.Path[0] == v {
				a := rng.IntN(100)
				for j := 0; j < a; j++ {
					m.Arrive(slotTime(s, rng.Float64()), ty.Key.Task, ty.Key.Entry)
				}
				wantR[rho] = float64(a)
			} else {
				m.Arrive(slotTime(s, 0.5), ty.Key.Task, ty.Key.Entry) // enters elsewhere: ignored
			}
			// Events of neighbouring slots do not count in slot s.
			m.Arrive(slotTime(s+1, 0), ty.Key.Task, ty.Key.Entry)
			m.Arrive(slotTime(s-1, 0.99), ty.Key.Task, ty.Key.Entry)
		}
		// A request of a type outside the instance loads the model but is
		// served by no candidate; unknown names are ignored.
		for mi, md := range in.Catalog.Models {
			if rng.IntN(3) == 0 {
				m.Serve(slotTime(s, 0.3), md.Task, "no-such-entry", md.Name)
				total[in.Index(v, mi)]++
			}
			m.Serve(slotTime(s+1, 0.1), md.Task, vid, md.Name)
		}
		m.Serve(slotTime(s, 0.3), "no-such-task", vid, "no-such-model")
		m.Arrive(slotTime(s, 0.3), "no-such-task", vid)

		// Remaining before the measurement.
		for mi, md := range in.Catalog.Models {
			i := in.Index(v, mi)
			want := in.Cap[i] - total[i]
			if in.Omega[i] {
				want = math.Inf(1)
			}
			if got := m.Remaining(slotTime(s, 0.9), md.Name); !same(got, want) {
				t.Fatalf("trial %d: Remaining(%s) = %v, want %v", trial, md.Name, got, want)
			}
		}

		r, l := m.Measure(s)
		inf := make([]float64, len(in.Types))
		for i := range inf {
			inf[i] = math.Inf(1)
		}
		want := in.LoadsFromServing(inf, served, total, nil)
		rr := make([]float64, len(in.Types))
		for i := range rr {
			rr[i] = float64(rng.IntN(200))
		}
		clamped := in.LoadsFromServing(rr, served, total, nil)
		if len(r) != len(in.Types) || len(l) != len(in.Types) {
			t.Fatalf("trial %d: shapes r %d l %d, want %d", trial, len(r), len(l), len(in.Types))
		}
		for rho, ty := range in.Types {
			if r[rho] != wantR[rho] {
				t.Fatalf("trial %d: r[%d] = %v, want %v", trial, rho, r[rho], wantR[rho])
			}
			if len(l[rho]) != len(ty.Cands) {
				t.Fatalf("trial %d: len l[%d] = %d, want %d", trial, rho, len(l[rho]), len(ty.Cands))
			}
			for k, c := range ty.Cands {
				if c.V != v {
					if l[rho][k] != 0 {
						t.Fatalf("trial %d: l[%d][%d] = %v at another vertex, want 0", trial, rho, k, l[rho][k])
					}
					continue
				}
				if !c.Repo && l[rho][k] > 0 && l[rho][k] < in.Cap[in.Index(v, c.M)] {
					partial++
				}
				if !same(l[rho][k], want[rho][k]) {
					t.Fatalf("trial %d: l[%d][%d] = %v, want %v", trial, rho, k, l[rho][k], want[rho][k])
				}
				if got := math.Min(l[rho][k], rr[rho]); !same(got, clamped[rho][k]) {
					t.Fatalf("trial %d: min(l, r)[%d][%d] = %v, want %v", trial, rho, k, got, clamped[rho][k])
				}
			}
		}
		if local == 0 && trial%3 == 0 {
			t.Fatalf("trial %d: entry vertex %s has no candidate", trial, vid)
		}

		// Slot s is forgotten; slot s+1 is kept.
		r2, l2 := m.Measure(s)
		for rho, ty := range in.Types {
			if r2[rho] != 0 {
				t.Fatalf("trial %d: slot %d not forgotten: r[%d] = %v", trial, s, rho, r2[rho])
			}
			for k, c := range ty.Cands {
				if c.V == v && !c.Repo && l2[rho][k] != in.Cap[in.Index(v, c.M)] {
					t.Fatalf("trial %d: slot %d not forgotten: l[%d][%d] = %v", trial, s, rho, k, l2[rho][k])
				}
			}
		}
		r3, _ := m.Measure(s + 1)
		for rho, ty := range in.Types {
			if ty.Path[0] == v && r3[rho] != 1 {
				t.Fatalf("trial %d: slot %d: r[%d] = %v, want 1", trial, s+1, rho, r3[rho])
			}
		}
	}
	if partial < 10 {
		t.Fatalf("only %d partially loaded candidates: the test exercises too little", partial)
	}
	t.Logf("%d partially loaded candidates", partial)
}

func TestMeterSlotAt(t *testing.T) {
	in := meterInstance(t, 1, 2, 1, 2)
	m := NewMeter(in, 0, testSlot)
	for _, c := range []struct {
		ns   int64
		want int64
	}{
		{0, 0}, {1, 0}, {int64(testSlot) - 1, 0}, {int64(testSlot), 1}, {-1, -1},
		{-int64(testSlot), -1}, {-int64(testSlot) - 1, -2}, {5*int64(testSlot) + 7, 5},
	} {
		if got := m.SlotAt(time.Unix(0, c.ns)); got != c.want {
			t.Errorf("SlotAt(%d ns) = %d, want %d", c.ns, got, c.want)
		}
	}
}

func TestMeterRemainingExhausts(t *testing.T) {
	in := meterInstance(t, 1, 2, 1, 0.1)
	ty := in.Types[0]
	v := ty.Path[0]
	var c idn.Candidate
	found := false
	for _, cc := range ty.Cands {
		if cc.V == v && !cc.Repo {
			c, found = cc, true
			break
		}
	}
	if !found {
		t.Skip("no non-repository candidate at the entry vertex")
	}
	m := NewMeter(in, v, testSlot)
	name := in.Catalog.Models[c.M].Name
	capacity := in.Cap[in.Index(v, c.M)]
	at := slotTime(1000, 0.2)
	for i := 0; float64(i) < math.Ceil(capacity); i++ {
		if m.Remaining(at, name) <= 0 {
			t.Fatalf("exhausted after %d of %v", i, capacity)
		}
		m.Serve(at, ty.Key.Task, ty.Key.Entry, name)
	}
	if got := m.Remaining(at, name); got > 0 {
		t.Fatalf("Remaining = %v after %v serves, want <= 0", got, math.Ceil(capacity))
	}
	if got := m.Remaining(slotTime(1001, 0), name); got != capacity {
		t.Fatalf("next slot Remaining = %v, want %v", got, capacity)
	}
	if got := m.Remaining(at, "no-such-model"); !math.IsInf(got, 1) {
		t.Fatalf("unknown model Remaining = %v, want +Inf", got)
	}
}

// TestMeterConcurrent exercises the mutex under -race.
func TestMeterConcurrent(t *testing.T) {
	in := meterInstance(t, 3, 2, 1, 2)
	ty := in.Types[0]
	v := ty.Path[0]
	m := NewMeter(in, v, testSlot)
	model := in.Catalog.Models[ty.Cands[0].M].Name
	at := slotTime(7, 0.5)
	var wg sync.WaitGroup
	const workers, each = 8, 200
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				m.Arrive(at, ty.Key.Task, ty.Key.Entry)
				m.Serve(at, ty.Key.Task, ty.Key.Entry, model)
				m.Remaining(at, model)
				if i%50 == 0 {
					m.Measure(3) // an old slot: must not disturb slot 7
				}
			}
		}()
	}
	wg.Wait()
	r, _ := m.Measure(7)
	if r[0] != workers*each {
		t.Fatalf("r[0] = %v, want %d", r[0], workers*each)
	}
}

func TestNewMeterPanicsOnBadArgs(t *testing.T) {
	in := meterInstance(t, 1, 2, 1, 2)
	for name, f := range map[string]func(){
		"v":       func() { NewMeter(in, in.NV, testSlot) },
		"slotLen": func() { NewMeter(in, 0, 0) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}
