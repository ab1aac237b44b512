package herd

import (
	"fmt"
	"math"
	"sort"
)

// Heuristic plans large instances (paper 004 Sec. 4 solves the ILP on
// aggregated model-streams; this is our documented replacement when the
// exact search is too big):
//
//  1. Groups per affinity set (constraint (e)): J = max(ceil(N/G-bar), number
//     of sets) groups are shared out over the sets in proportion to their
//     total need (largest remainder, at least one per set, at most one per
//     model-stream of the set).
//  2. Within a set, model-streams in decreasing need go to the group with
//     the least total need whose memory still fits the model (constraint
//     (c); a model already loaded there costs nothing); a new group is
//     opened when none fits (longest-processing-time-first balancing, as
//     for makespan scheduling).
//  3. GPUs are water-filled: every group gets one, then each further GPU goes
//     to the group with the smallest size/need below G-bar (constraints (a),
//     (b)). For fixed groups this maximises the minimum bt exactly.
//  4. Local search: move a model-stream out of the bottleneck group when
//     re-water-filling raises the minimum bt; at most maxMoves moves.
//
// It returns ErrInfeasible when the groups memory and affinity force are
// more than N.
func Heuristic(p *Problem) (Plan, error) {
	if err := p.Validate(); err != nil {
		return Plan{}, err
	}
	// 1. affinity sets
	setNeed := map[int]float64{}
	setStreams := map[int][]int{}
	var sets []int
	for i, ms := range p.ModelStreams {
		c := p.AffinitySet[ms.Model]
		if _, ok := setStreams[c]; !ok {
			sets = append(sets, c)
		}
		setNeed[c] += ms.Need
		setStreams[c] = append(setStreams[c], i)
	}
	sort.Ints(sets)
	totalNeed := 0.0
	for _, c := range sets {
		totalNeed += setNeed[c]
	}
	J := (p.Workers + p.GroupLimit - 1) / p.GroupLimit
	if J < len(sets) {
		J = len(sets)
	}
	quota := map[int]int{}
	type rem struct {
		c int
		r float64
	}
	var rems []rem
	used := 0
	for _, c := range sets {
		x := float64(J) * setNeed[c] / totalNeed
		q := int(math.Floor(x))
		if q < 1 {
			q = 1
		}
		if q > len(setStreams[c]) {
			q = len(setStreams[c])
		}
		quota[c] = q
		used += q
		rems = append(rems, rem{c, x - math.Floor(x)})
	}
	sort.SliceStable(rems, func(a, b int) bool { return rems[a].r > rems[b].r })
	for len(rems) > 0 && used < J {
		progress := false
		for _, r := range rems {
			if used >= J {
				break
			}
			if quota[r.c] < len(setStreams[r.c]) {
				quota[r.c]++
				used++
				progress = true
			}
		}
		if !progress {
			break
		}
	}
	// 2. LPT packing within each set
	var groups []hgroup
	for _, c := range sets {
		ids := append([]int(nil), setStreams[c]...)
		sort.SliceStable(ids, func(a, b int) bool { return p.ModelStreams[ids[a]].Need > p.ModelStreams[ids[b]].Need })
		first := len(groups)
		for g := 0; g < quota[c]; g++ {
			groups = append(groups, hgroup{models: map[int]bool{}})
		}
		for _, i := range ids {
			k := p.ModelStreams[i].Model
			best := -1
			for g := first; g < len(groups); g++ {
				if !groups[g].fits(p, k) {
					continue
				}
				if best < 0 || groups[g].need < groups[best].need {
					best = g
				}
			}
			if best < 0 {
				groups = append(groups, hgroup{models: map[int]bool{}})
				best = len(groups) - 1
			}
			groups[best].add(p, i)
		}
		// drop groups left empty (possible when memory forced new ones)
		kept := groups[:first]
		for _, g := range groups[first:] {
			if len(g.streams) > 0 {
				kept = append(kept, g)
			}
		}
		groups = kept
	}
	if len(groups) > p.Workers {
		return Plan{}, fmt.Errorf("%w: %d groups are needed for memory and affinity but N = %d", ErrInfeasible, len(groups), p.Workers)
	}
	// 3. water-fill
	sizes := waterFill(groups, p.Workers, p.GroupLimit)
	best := minBT(groups, sizes)
	// 4. local search on the bottleneck group
	const maxMoves = 200
	for mv := 0; mv < maxMoves; mv++ {
		b := bottleneck(groups, sizes)
		if b < 0 || len(groups[b].streams) <= 1 {
			break
		}
		improved := false
		for _, i := range append([]int(nil), groups[b].streams...) {
			k := p.ModelStreams[i].Model
			c := p.AffinitySet[k]
			for g := range groups {
				if g == b || len(groups[g].streams) == 0 || p.AffinitySet[p.ModelStreams[groups[g].streams[0]].Model] != c || !groups[g].fits(p, k) {
					continue
				}
				groups[b].remove(p, i)
				groups[g].add(p, i)
				s2 := waterFill(groups, p.Workers, p.GroupLimit)
				if v := minBT(groups, s2); v > best*(1+1e-9) {
					best, sizes, improved = v, s2, true
					break
				}
				groups[g].remove(p, i)
				groups[b].add(p, i)
			}
			if improved {
				break
			}
		}
		if !improved {
			break
		}
	}
	plan := Plan{MinBT: best}
	for j, g := range groups {
		ms := append([]int(nil), g.streams...)
		sort.Ints(ms)
		models := make([]int, 0, len(g.models))
		for k, n := range g.count {
			if n > 0 {
				models = append(models, k)
			}
		}
		sort.Ints(models)
		plan.Groups = append(plan.Groups, Group{Size: sizes[j], ModelStreams: ms, Models: models, Need: g.need})
	}
	return plan, nil
}

type hgroup struct {
	streams []int
	models  map[int]bool
	count   map[int]int
	need    float64
	mem     float64
}

func (g *hgroup) fits(p *Problem, k int) bool {
	if p.Mem <= 0 || g.count[k] > 0 {
		return true
	}
	return g.mem+p.ModelMem[k] <= p.Mem+1e-9
}

func (g *hgroup) add(p *Problem, i int) {
	if g.count == nil {
		g.count = map[int]int{}
	}
	k := p.ModelStreams[i].Model
	if g.count[k] == 0 {
		g.mem += p.ModelMem[k]
		g.models[k] = true
	}
	g.count[k]++
	g.streams = append(g.streams, i)
	g.need += p.ModelStreams[i].Need
}

func (g *hgroup) remove(p *Problem, i int) {
	for x, s := range g.streams {
		if s == i {
			g.streams = append(g.streams[:x], g.streams[x+1:]...)
			break
		}
	}
	k := p.ModelStreams[i].Model
	g.count[k]--
	if g.count[k] == 0 {
		g.mem -= p.ModelMem[k]
		delete(g.models, k)
	}
	g.need -= p.ModelStreams[i].Need
}

// waterFill gives one GPU per non-empty group, then each further GPU to the
// group with the smallest size/need below the limit.
func waterFill(groups []hgroup, n, limit int) []int {
	sizes := make([]int, len(groups))
	left := n
	for j, g := range groups {
		if len(g.streams) > 0 && left > 0 {
			sizes[j] = 1
			left--
		}
	}
	for ; left > 0; left-- {
		best := -1
		bv := math.Inf(1)
		for j, g := range groups {
			if len(g.streams) == 0 || sizes[j] >= limit {
				continue
			}
			if v := float64(sizes[j]) / g.need; v < bv {
				best, bv = j, v
			}
		}
		if best < 0 {
			break
		}
		sizes[best]++
	}
	return sizes
}

func minBT(groups []hgroup, sizes []int) float64 {
	m := math.Inf(1)
	for j, g := range groups {
		if len(g.streams) > 0 {
			m = math.Min(m, float64(sizes[j])/g.need)
		}
	}
	return m
}

func bottleneck(groups []hgroup, sizes []int) int {
	b := -1
	bv := math.Inf(1)
	for j, g := range groups {
		if len(g.streams) > 0 {
			if v := float64(sizes[j]) / g.need; v < bv {
				b, bv = j, v
			}
		}
	}
	return b
}
