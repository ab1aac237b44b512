package allocator

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/idn-net/idn/messages"
	"github.com/idn-net/idn/policy/idn"
)

// propagate delivers announcements from every vertex to its children until
// nothing changes (a tree: at most depth rounds).
func propagate(t *testing.T, anns []*Announcer, force bool) {
	t.Helper()
	for round := 0; round < 10; round++ {
		moved := false
		for v, a := range anns {
			for _, o := range a.Announce(0, force && round == 0) {
				moved = true
				if err := anns[o.To].FromParent(v, o.Batch); err != nil {
					t.Fatalf("vertex %d -> %d: %v", v, o.To, err)
				}
			}
		}
		if !moved {
			return
		}
	}
	t.Fatal("announcements did not settle")
}

// bruteBest is the cheapest usable model strictly upstream of v for task
// name, from v's point of view (eq. 6 costs), computed from the paths.
func bruteBest(in *idn.Instance, v int, task string, usable [][]int) float64 {
	g := in.Graph
	path, _ := g.Path(g.Vertices[v].ID, task)
	best := math.Inf(1)
	rtt := 0.0
	for j := 1; j < len(path); j++ {
		rtt += g.RTT(path[j-1], path[j])
		u, _ := g.VertexIndex(path[j])
		for _, m := range usable[u] {
			if in.Catalog.Models[m].Task != task {
				continue
			}
			c := rtt + in.Cost([]int{u}, 0, m)
			best = math.Min(best, c)
		}
	}
	return best
}

func TestAnnouncerBestEqualsBruteForce(t *testing.T) {
	for _, g := range []*idn.Graph{idn.TopologyII(), idn.TopologyI()} {
		cat := idn.YOLOv4Catalog()
		in, err := idn.NewInstance(g, cat, idn.DefaultInstanceConfig(), nil)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(7, uint64(in.NV)))
		anns := make([]*Announcer, in.NV)
		for v := range anns {
			if anns[v], err = NewAnnouncer(in, v); err != nil {
				t.Fatal(err)
			}
		}
		for trial := 0; trial < 20; trial++ {
			usable := make([][]int, in.NV)
			for v := range anns {
				var hosted, exhausted []int
				for m := 0; m < in.NM; m++ {
					if in.Omega[in.Index(v, m)] {
						hosted = append(hosted, m)
						usable[v] = append(usable[v], m) // the repository is never exhausted
						if rng.IntN(4) == 0 {
							exhausted = append(exhausted, m)
						}
						continue
					}
					if rng.IntN(40) == 0 {
						hosted = append(hosted, m)
						if rng.IntN(3) == 0 {
							exhausted = append(exhausted, m)
						} else {
							usable[v] = append(usable[v], m)
						}
					}
				}
				anns[v].SetHosted(hosted)
				anns[v].SetExhausted(exhausted)
			}
			propagate(t, anns, true)
			for v, a := range anns {
				best := a.Best()
				for _, task := range cat.Tasks {
					want := bruteBest(in, v, task, usable)
					got, ok := best[task]
					if math.IsInf(want, 1) {
						if ok {
							t.Fatalf("%s trial %d vertex %d task %s: best %v, want none", g.Name, trial, v, task, got)
						}
						continue
					}
					if !ok || math.Abs(got-want) > 1e-9 {
						t.Fatalf("%s trial %d vertex %d task %s: best %v (known %v), want %v", g.Name, trial, v, task, got, ok, want)
					}
				}
				// Pruning: the announced list is the own best plus strictly
				// cheaper upstream alternatives.
				for ti := range cat.Tasks {
					l := a.List(ti)
					for k := 1; k < len(l); k++ {
						if l[k].Cost < l[k-1].Cost {
							t.Fatalf("list of vertex %d task %d not sorted: %+v", v, ti, l)
						}
					}
					if len(a.own[ti]) > 0 {
						own := a.own[ti][0].Cost
						for _, e := range l {
							if e.V != v && e.Cost >= own {
								t.Fatalf("vertex %d task %d announces upstream %+v not cheaper than own %v", v, ti, e, own)
							}
						}
					}
				}
			}
		}
	}
}

func TestAnnouncerOnlyChangesAreSent(t *testing.T) {
	in, err := idn.NewInstance(idn.TopologyII(), idn.YOLOv4Catalog(), idn.DefaultInstanceConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	co, _ := in.Graph.VertexIndex("co-0")
	a, err := NewAnnouncer(in, co)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Children()) != 2 {
		t.Fatalf("co-0 children %v, want the two base stations", a.Children())
	}
	if outs := a.Announce(1, false); len(outs) != 2 {
		t.Fatalf("first announcement: %d batches, want 2", len(outs))
	}
	if outs := a.Announce(2, false); len(outs) != 0 {
		t.Fatalf("unchanged state announced again: %d batches", len(outs))
	}
	m, _ := in.Catalog.ModelIndex("task-00/yolov4-tiny-288p#0")
	a.SetHosted([]int{m})
	outs := a.Announce(3, false)
	if len(outs) != 2 || len(outs[0].Batch.Costs) != 1 || outs[0].Batch.Costs[0].Model != int32(m) {
		t.Fatalf("after hosting one model: %+v", outs)
	}
	a.SetExhausted([]int{m})
	outs = a.Announce(4, false)
	if len(outs) != 2 || len(outs[0].Batch.Costs) != 0 || !outs[0].Batch.CostsUpdate {
		t.Fatalf("after exhausting it: %+v, want empty updates", outs)
	}
	if outs := a.Announce(5, true); len(outs) != 2 {
		t.Fatalf("forced: %d batches, want 2", len(outs))
	}
}

func TestAnnouncerRejectsMalformed(t *testing.T) {
	in, err := idn.NewInstance(idn.TopologyII(), idn.YOLOv4Catalog(), idn.DefaultInstanceConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	bs, _ := in.Graph.VertexIndex("bs-0")
	co, _ := in.Graph.VertexIndex("co-0")
	dc, _ := in.Graph.VertexIndex("dc-0")
	a, _ := NewAnnouncer(in, bs)
	cases := map[string]struct {
		from int
		e    *messages.CostEntry
	}{
		"task":   {co, &messages.CostEntry{Task: 99}},
		"parent": {dc, &messages.CostEntry{Task: 0, Vertex: int32(dc)}},
		"vertex": {co, &messages.CostEntry{Task: 0, Vertex: 77}},
		"model":  {co, &messages.CostEntry{Task: 0, Vertex: int32(co), Model: -1}},
		"cost":   {co, &messages.CostEntry{Task: 0, Vertex: int32(co), Cost: math.NaN()}},
	}
	for name, c := range cases {
		err := a.FromParent(c.from, &messages.ControlBatch{CostsUpdate: true, Costs: []*messages.CostEntry{c.e}})
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err %v, want ErrMalformed", name, err)
		}
	}
	if len(a.Best()) != 0 {
		t.Fatalf("malformed announcements changed the state: %v", a.Best())
	}
}
