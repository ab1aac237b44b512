package allocator

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/idn-net/idn/messages"
	"github.com/idn-net/idn/policy/idn"
)

// Alt is one serving alternative of a task known at a vertex: model M at
// vertex V, at Cost (paper 000 eq. 6, ms) measured from the vertex that
// holds the Alt (RTT from it to V, plus d_m^V, plus alpha times the
// inaccuracy of m).
type Alt struct {
	V, M int
	Cost float64
}

// Announcer is the serving-cost announcement state of one vertex (paper
// 000 Sec. III-E, "downstream serving-cost announcements"): it knows the
// vertex's own usable models (x^v minus those whose slot capacity is
// exhausted) and the alternatives its parent announced for each task, and
// computes
//
//   - Best: per task, the cheapest alternative upstream of the vertex,
//     which the vertex's scheduler compares with its own cheapest model to
//     serve or forward (the live form of the cost order of eq. 12), and
//   - the announcements to its children: per task, its own cheapest model
//     plus the upstream alternatives cheaper than it (pruned as they travel:
//     a request reaching this vertex is served here before it could reach a
//     more expensive upstream model), costs shifted by the child-to-vertex
//     RTT at the child.
//
// It is pure (no I/O, no clock); the allocator actor feeds it and sends
// what it returns.
type Announcer struct {
	in *idn.Instance
	v  int
	// parent[t] is the next vertex from v toward task t's repository (-1
	// at the repository); children[t] the vertices whose next hop for t is v.
	parent   []int
	children map[int][]int // child vertex -> tasks
	kids     []int         // sorted child vertices
	repo     []bool        // v is task t's repository
	own      [][]Alt       // per task: usable own models, cheapest first
	hosted   []int
	excluded map[int]bool
	fromPar  [][]Alt // per task: parent's announced alternatives (relative to the parent)
	sent     map[int][]*messages.CostEntry
}

// NewAnnouncer returns the announcement state of vertex v of in.
func NewAnnouncer(in *idn.Instance, v int) (*Announcer, error) {
	if v < 0 || v >= in.NV {
		return nil, fmt.Errorf("allocator: announcer: vertex %d outside [0,%d)", v, in.NV)
	}
	nt := len(in.Catalog.Tasks)
	a := &Announcer{in: in, v: v, parent: make([]int, nt), children: map[int][]int{}, repo: make([]bool, nt),
		own: make([][]Alt, nt), fromPar: make([][]Alt, nt), sent: map[int][]*messages.CostEntry{}, excluded: map[int]bool{}}
	g := in.Graph
	for t, task := range in.Catalog.Tasks {
		a.parent[t] = -1
		for u := 0; u < in.NV; u++ {
			p, err := g.Path(g.Vertices[u].ID, task)
			if err != nil {
				return nil, fmt.Errorf("allocator: announcer: path from %q for task %q: %w", g.Vertices[u].ID, task, err)
			}
			if len(p) == 1 && u == v {
				a.repo[t] = true
			}
			if len(p) < 2 {
				continue
			}
			next, _ := g.VertexIndex(p[1])
			if u == v {
				a.parent[t] = next
			}
			if next == v {
				a.children[u] = append(a.children[u], t)
			}
		}
	}
	for u := range a.children {
		a.kids = append(a.kids, u)
	}
	sort.Ints(a.kids)
	return a, nil
}

// Parent returns the vertex task t's requests go to after v (-1 at the repository).
func (a *Announcer) Parent(t int) int { return a.parent[t] }

// Children returns the vertices that receive v's announcements, sorted.
func (a *Announcer) Children() []int { return a.kids }

// LocalCost returns the cost of model m served at v for a request already
// at v: d_m^v + alpha * scale * (1 - a_m) (eq. 6 without the path RTT).
func (a *Announcer) LocalCost(m int) float64 {
	return a.in.Cost([]int{a.v}, 0, m)
}

// SetHosted sets x^v (catalog model indices).
func (a *Announcer) SetHosted(models []int) {
	a.hosted = append(a.hosted[:0], models...)
	a.rebuild()
}

// SetExhausted sets the hosted models whose slot capacity is used up; the
// repository's models are never excluded (its capacity is unlimited, as in
// policy/idn TypeServe).
func (a *Announcer) SetExhausted(models []int) {
	a.excluded = map[int]bool{}
	for _, m := range models {
		a.excluded[m] = true
	}
	a.rebuild()
}

func (a *Announcer) rebuild() {
	for t := range a.own {
		a.own[t] = a.own[t][:0]
	}
	for _, m := range a.hosted {
		if m < 0 || m >= a.in.NM {
			continue
		}
		t, ok := a.in.Catalog.TaskIndex(a.in.Catalog.Models[m].Task)
		if !ok || (a.excluded[m] && !a.repo[t]) {
			continue
		}
		a.own[t] = append(a.own[t], Alt{V: a.v, M: m, Cost: a.LocalCost(m)})
	}
	for t := range a.own {
		sort.Slice(a.own[t], func(i, j int) bool { return altLess(a.own[t][i], a.own[t][j]) })
	}
}

func altLess(x, y Alt) bool {
	if x.Cost != y.Cost {
		return x.Cost < y.Cost
	}
	if x.V != y.V {
		return x.V < y.V
	}
	return x.M < y.M
}

// FromParent takes an announcement received from vertex from. It returns
// an error (and changes nothing) when from is not v's parent for a task it
// announces or an entry is malformed.
func (a *Announcer) FromParent(from int, b *messages.ControlBatch) error {
	per := make([][]Alt, len(a.fromPar))
	for i, e := range b.GetCosts() {
		t := int(e.Task)
		switch {
		case e.Task < 0 || t >= len(a.parent):
			return fmt.Errorf("%w: costs[%d].task: %d outside the catalog", ErrMalformed, i, e.Task)
		case a.parent[t] != from:
			return fmt.Errorf("%w: costs[%d]: vertex %d is not the next hop of task %d from vertex %d", ErrMalformed, i, from, t, a.v)
		case e.Vertex < 0 || int(e.Vertex) >= a.in.NV:
			return fmt.Errorf("%w: costs[%d].vertex: %d outside the topology", ErrMalformed, i, e.Vertex)
		case e.Model < 0 || int(e.Model) >= a.in.NM:
			return fmt.Errorf("%w: costs[%d].model: %d outside the catalog", ErrMalformed, i, e.Model)
		case math.IsNaN(e.Cost) || math.IsInf(e.Cost, 0) || e.Cost < 0:
			return fmt.Errorf("%w: costs[%d].cost: %v must be finite and >= 0", ErrMalformed, i, e.Cost)
		case len(per[t]) >= a.in.NV:
			return fmt.Errorf("%w: costs[%d]: more than %d alternatives for task %d", ErrMalformed, i, a.in.NV, t)
		}
		per[t] = append(per[t], Alt{V: int(e.Vertex), M: int(e.Model), Cost: e.Cost})
	}
	for t := range a.fromPar {
		if a.parent[t] == from {
			a.fromPar[t] = per[t]
		}
	}
	return nil
}

// upstream returns task t's parent alternatives shifted to costs from v.
func (a *Announcer) upstream(t int) []Alt {
	p := a.parent[t]
	if p < 0 {
		return nil
	}
	rtt := a.in.Graph.RTT(a.in.Graph.Vertices[a.v].ID, a.in.Graph.Vertices[p].ID)
	out := make([]Alt, 0, len(a.fromPar[t]))
	for _, e := range a.fromPar[t] {
		out = append(out, Alt{V: e.V, M: e.M, Cost: e.Cost + rtt})
	}
	return out
}

// Best returns, per task name, the cost from v of the cheapest alternative
// upstream of v (tasks with none are absent).
func (a *Announcer) Best() map[string]float64 {
	out := map[string]float64{}
	for t, task := range a.in.Catalog.Tasks {
		best := math.Inf(1)
		for _, e := range a.upstream(t) {
			best = math.Min(best, e.Cost)
		}
		if !math.IsInf(best, 1) {
			out[task] = best
		}
	}
	return out
}

// List returns what v announces for task t: its cheapest usable model and
// the upstream alternatives cheaper than it, cheapest first.
func (a *Announcer) List(t int) []Alt {
	var out []Alt
	own := math.Inf(1)
	if len(a.own[t]) > 0 {
		out = append(out, a.own[t][0])
		own = a.own[t][0].Cost
	}
	for _, e := range a.upstream(t) {
		if e.Cost < own {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return altLess(out[i], out[j]) })
	return out
}

// Announce returns the announcement batch for each child whose content
// changed since it was last returned (all of them when force), keyed by
// child vertex. slot stamps the batches.
func (a *Announcer) Announce(slot int64, force bool) []Out {
	var outs []Out
	for _, u := range a.kids {
		var entries []*messages.CostEntry
		for _, t := range a.children[u] {
			for _, e := range a.List(t) {
				entries = append(entries, &messages.CostEntry{Task: int32(t), Vertex: int32(e.V), Model: int32(e.M), Cost: e.Cost})
			}
		}
		if prev, ok := a.sent[u]; ok && !force && slices.EqualFunc(entries, prev, costEntryEqual) {
			continue
		}
		a.sent[u] = entries
		outs = append(outs, Out{To: u, Batch: &messages.ControlBatch{Slot: max(slot, 0), FromVertex: int32(a.v), CostsUpdate: true, Costs: entries}})
	}
	return outs
}

func costEntryEqual(x, y *messages.CostEntry) bool {
	return x.Task == y.Task && x.Vertex == y.Vertex && x.Model == y.Model && x.Cost == y.Cost
}
