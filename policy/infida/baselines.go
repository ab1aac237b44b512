package infida

import (
	"container/heap"
	"math"

	"github.com/idn-net/idn/policy/idn"
)

// Static is a policy that keeps one allocation for the whole horizon (the
// form SG and INFIDA_OFFLINE take once computed in hindsight).
type Static struct {
	name string
	x    []float64
}

// NewStatic returns a static policy; repository models are forced to 1.
func NewStatic(in *idn.Instance, name string, x []float64) *Static {
	cp := append([]float64(nil), x...)
	for i, o := range in.Omega {
		if o {
			cp[i] = 1
		}
	}
	return &Static{name: name, x: cp}
}

// Name returns the policy name.
func (s *Static) Name() string { return s.name }

// Allocation returns the fixed allocation.
func (s *Static) Allocation() []float64 { return s.x }

// Update does nothing.
func (s *Static) Update(*Observation) {}

// OLAGCounters selects how OLAG's counters phi^v_{m,rho} are kept; the
// paper's one-sentence description admits both readings.
type OLAGCounters int

const (
	// OLAGCumulative (default, the literal reading): phi^v_{m,rho} counts,
	// since the start, the type-rho requests v forwarded upstream while m
	// had a positive gain q^v_{m,rho}; counters are never reset.
	OLAGCumulative OLAGCounters = iota
	// OLAGPerSlot: phi^v_{m,rho} is, each slot, the number of type-rho
	// requests that reached v (served at v or forwarded), so a hosted
	// model's counter does not vanish because it serves locally.
	OLAGPerSlot
)

// String names the counter mode.
func (c OLAGCounters) String() string {
	if c == OLAGPerSlot {
		return "per-slot"
	}
	return "cumulative"
}

// OLAG is the online load-aware greedy heuristic of paper 000 Sec. VI. At
// the end of every slot each vertex v recomputes its allocation greedily:
// for every model m (of size s_m^v) it computes the importance weight
// w_m^v = (1/s_m^v)(1/|R|) sum_rho q^v_{m,rho} min{phi^v_{m,rho}, L_m^v}, where
// q^v_{m,rho} = gamma_rho^repository - C^v_{p,m} is the model's gain over the
// repository (only positive values count), picks the model of highest
// weight that fits in the remaining budget, subtracts min{phi, L} from
// phi_{m*,rho} and from phi_{m',rho} of every model with q_{m',rho} <
// q_{m*,rho} (on a working copy), and repeats until nothing fits or no
// weight is positive. See OLAGCounters for the two readings of phi.
type OLAG struct {
	in   *idn.Instance
	mode OLAGCounters
	x    []float64
	// per vertex: its candidates (type, rank, model, gain q).
	vcands [][]vcand
	counts [][]float64 // per vertex, per vcand: the counter phi
	phi    []float64   // scratch working copy
	w      []float64   // scratch weight per model
	reach  [][]float64
}

type vcand struct {
	rho, k int
	m      int
	q      float64
}

// NewOLAG returns OLAG starting from the minimal allocation omega.
func NewOLAG(in *idn.Instance, mode OLAGCounters) *OLAG {
	o := &OLAG{in: in, mode: mode, x: in.OmegaAlloc(), vcands: make([][]vcand, in.NV), counts: make([][]float64, in.NV), w: make([]float64, in.NM)}
	for rho, t := range in.Types {
		repo := t.Cands[len(t.Cands)-1].Cost
		for k, c := range t.Cands {
			if c.Repo || repo-c.Cost <= 0 {
				continue
			}
			o.vcands[c.V] = append(o.vcands[c.V], vcand{rho: rho, k: k, m: c.M, q: repo - c.Cost})
		}
	}
	for v := range o.counts {
		o.counts[v] = make([]float64, len(o.vcands[v]))
	}
	return o
}

// Name returns "OLAG".
func (o *OLAG) Name() string { return "OLAG" }

// Allocation returns x_t.
func (o *OLAG) Allocation() []float64 { return o.x }

// Update updates the counters with the slot's traffic and recomputes the
// allocation.
func (o *OLAG) Update(obs *Observation) {
	in := o.in
	// reach[rho][j]: type-rho requests that reached path position j.
	if o.reach == nil {
		o.reach = make([][]float64, len(in.Types))
	}
	for rho, t := range in.Types {
		if len(o.reach[rho]) != len(t.Path)+1 {
			o.reach[rho] = make([]float64, len(t.Path)+1)
		}
		servedAt := make([]float64, len(t.Path))
		for k, c := range t.Cands {
			servedAt[c.Pos] += obs.Served[rho][k]
		}
		acc := 0.0
		for j := range t.Path {
			o.reach[rho][j] = math.Max(0, obs.R[rho]-acc)
			acc += servedAt[j]
		}
		o.reach[rho][len(t.Path)] = 0
	}
	nR := float64(len(in.Types))
	for v := 0; v < in.NV; v++ {
		vc := o.vcands[v]
		if len(vc) == 0 {
			continue
		}
		for a, c := range vc {
			j := in.Types[c.rho].Cands[c.k].Pos
			if o.mode == OLAGPerSlot {
				o.counts[v][a] = o.reach[c.rho][j]
			} else { // forwarded upstream = reached v minus served at v
				o.counts[v][a] += o.reach[c.rho][j+1]
			}
		}
		base := in.Index(v, 0)
		budget := in.Budget[v]
		for m := 0; m < in.NM; m++ {
			i := base + m
			if in.Omega[i] {
				budget -= in.Size[i]
				o.x[i] = 1
			} else {
				o.x[i] = 0
			}
		}
		if cap(o.phi) < len(vc) {
			o.phi = make([]float64, len(vc))
		}
		phi := o.phi[:len(vc)]
		copy(phi, o.counts[v])
		for {
			for _, c := range vc {
				o.w[c.m] = 0
			}
			for a, c := range vc {
				i := base + c.m
				if o.x[i] == 1 || in.Size[i] > budget+1e-9 {
					continue
				}
				o.w[c.m] += c.q * math.Min(phi[a], in.Cap[i]) / (in.Size[i] * nR)
			}
			best, bw := -1, 0.0
			for _, c := range vc {
				if wm := o.w[c.m]; wm > bw || (wm == bw && wm > 0 && c.m < best) {
					best, bw = c.m, wm
				}
			}
			if best < 0 || bw <= 0 {
				break
			}
			i := base + best
			o.x[i] = 1
			budget -= in.Size[i]
			// subtract from the chosen model and the worse ones, per type.
			for a, c := range vc {
				if c.m != best {
					continue
				}
				d := math.Min(phi[a], in.Cap[i])
				for b2, c2 := range vc {
					if c2.rho == c.rho && (c2.m == best || c2.q < c.q) {
						phi[b2] = math.Max(0, phi[b2]-d)
					}
				}
			}
		}
	}
}

// SGConfig configures StaticGreedyWith.
type SGConfig struct {
	// StopWhenAllServed adds the paper's first stopping rule (Sec. VI,
	// "Static greedy": "This process is repeated until either the
	// intermediate allocation is capable of serving all requests or none of
	// the remaining valid allocations introduces a positive marginal
	// gain"). Reading: the intermediate allocation is capable of serving all
	// requests when, in every hindsight slot t, serving r_t under it with
	// the serving strategy of Sec. III-E and each model's capacity L_m^v
	// shared by all the types it serves (eq. 7) sends no request to a
	// repository. false keeps only the second rule (no positive marginal
	// gain).
	StopWhenAllServed bool
}

// DefaultSGConfig returns the paper's SG: both stopping rules.
func DefaultSGConfig() SGConfig { return SGConfig{StopWhenAllServed: true} }

// StaticGreedy is SG of paper 000 Sec. VI, the cost-benefit greedy of [62]
// in hindsight, with DefaultSGConfig: starting from omega it repeatedly
// adds the (v, m) of highest marginal time-averaged gain (eq. 14) per unit
// of size among those that fit in v's remaining budget, until the
// allocation is capable of serving all requests without the repositories
// or no addition has a positive marginal gain (see SGConfig). The gain is
// submodular (Lemma A.2), so marginal gains are evaluated lazily (a
// max-heap of stale upper bounds).
//
// Reading: the potential available capacities used in hindsight are the
// contention-free l = min{L_m^v, r_rho} (Sec. III-D), since the run-time
// capacities depend on the allocation being built (the paper states how
// capacities are obtained only for INFIDA_OFFLINE). batches lists r_t for
// the slots SG optimises over (callers may subsample a long horizon).
func StaticGreedy(in *idn.Instance, batches [][]float64) []float64 {
	return StaticGreedyWith(in, batches, DefaultSGConfig())
}

// StaticGreedyWith is StaticGreedy with an explicit configuration.
func StaticGreedyWith(in *idn.Instance, batches [][]float64, cfg SGConfig) []float64 {
	x := in.OmegaAlloc()
	loads := make([]idn.Loads, len(batches))
	for t, r := range batches {
		loads[t] = in.FullLoads(r)
	}
	// types touching each (v, m)
	touch := map[int][]int{}
	for rho, t := range in.Types {
		for _, c := range t.Cands {
			if !c.Repo {
				i := in.Index(c.V, c.M)
				touch[i] = append(touch[i], rho)
			}
		}
	}
	// cover[t][rho]: non-repository effective capacity of rho in slot t
	// under x; short counts the (t, rho) with cover < r (first stop rule).
	cover := make([][]float64, len(batches))
	short := 0
	for t, r := range batches {
		cover[t] = make([]float64, len(in.Types))
		for rho := range in.Types {
			if r[rho] > 0 {
				short++
			}
		}
	}
	// allServed is the first stop rule. The per-type cover above ignores
	// that a model's capacity is shared by every type it serves (eq. 7), so
	// it is only a necessary condition; once it holds, every hindsight
	// batch is served under x with shared capacities (types in index order,
	// the serving strategy of Sec. III-E) and the rule holds when no
	// request reaches a repository.
	rem := make([]float64, len(in.Cap))
	var scratch []float64
	allServed := func() bool {
		if !cfg.StopWhenAllServed || short > 0 {
			return false
		}
		for _, r := range batches {
			copy(rem, in.Cap)
			for rho, t := range in.Types {
				if r[rho] <= 0 {
					continue
				}
				if cap(scratch) < len(t.Cands) {
					scratch = make([]float64, len(t.Cands))
				}
				sv := scratch[:len(t.Cands)]
				clear(sv)
				in.TypeServe(rho, r[rho], x, rem, sv)
				for k, c := range t.Cands {
					if c.Repo && sv[k] > 1e-9 {
						return false
					}
				}
			}
		}
		return true
	}
	cur := make([][]float64, len(batches)) // current gain per slot per type
	for t := range batches {
		cur[t] = make([]float64, len(in.Types))
		for rho := range in.Types {
			cur[t][rho] = in.TypeGain13(rho, batches[t][rho], loads[t][rho], x)
		}
	}
	marginal := func(i int) float64 {
		x[i] = 1
		d := 0.0
		for _, rho := range touch[i] {
			for t := range batches {
				d += in.TypeGain13(rho, batches[t][rho], loads[t][rho], x) - cur[t][rho]
			}
		}
		x[i] = 0
		return d / float64(len(batches))
	}
	budget := append([]float64(nil), in.Budget...)
	for i, o := range in.Omega {
		if o {
			budget[i/in.NM] -= in.Size[i]
		}
	}
	h := &lazyHeap{}
	for i := range touch {
		if in.Size[i] <= budget[i/in.NM]+1e-9 {
			h.items = append(h.items, lazyItem{i: i, score: marginal(i) / in.Size[i]})
		}
	}
	heap.Init(h)
	for h.Len() > 0 && !allServed() {
		top := heap.Pop(h).(lazyItem)
		v := top.i / in.NM
		if in.Size[top.i] > budget[v]+1e-9 {
			continue
		}
		fresh := marginal(top.i) / in.Size[top.i]
		if h.Len() > 0 && fresh < h.items[0].score-1e-12 {
			top.score = fresh
			heap.Push(h, top)
			continue
		}
		if fresh <= 0 {
			break
		}
		x[top.i] = 1
		budget[v] -= in.Size[top.i]
		for _, rho := range touch[top.i] {
			for t := range batches {
				cur[t][rho] = in.TypeGain13(rho, batches[t][rho], loads[t][rho], x)
				r := batches[t][rho]
				if r <= 0 || cover[t][rho] >= r {
					continue
				}
				for k, c := range in.Types[rho].Cands {
					if !c.Repo && in.Index(c.V, c.M) == top.i {
						cover[t][rho] += loads[t][rho][k]
					}
				}
				if cover[t][rho] >= r {
					short--
				}
			}
		}
	}
	return x
}

type lazyItem struct {
	i     int
	score float64
}

type lazyHeap struct{ items []lazyItem }

// Len implements heap.Interface.
func (h *lazyHeap) Len() int { return len(h.items) }

// Less implements heap.Interface: larger score first, then smaller index.
func (h *lazyHeap) Less(a, b int) bool {
	if h.items[a].score != h.items[b].score {
		return h.items[a].score > h.items[b].score
	}
	return h.items[a].i < h.items[b].i
}

// Swap implements heap.Interface.
func (h *lazyHeap) Swap(a, b int) { h.items[a], h.items[b] = h.items[b], h.items[a] }

// Push implements heap.Interface.
func (h *lazyHeap) Push(x any) { h.items = append(h.items, x.(lazyItem)) }

// Pop implements heap.Interface.
func (h *lazyHeap) Pop() any {
	n := len(h.items)
	it := h.items[n-1]
	h.items = h.items[:n-1]
	return it
}
