// Package herd implements HERD, the periodic serving-group planner of paper
// 004 (Zhang et al., "SHEPHERD: Serving DNNs in the Wild", NSDI 2023,
// Sec. 4): it splits the GPU workers and the request streams into serving
// groups, each scheduled online by its own FLEX instance (package
// policy/flex), so as to maximise the minimum burst tolerance bt(i) subject
// to the constraints (a)-(e) of Sec. 4.
//
// Two solvers share one Problem: Exact, a branch-and-bound over the LP
// relaxation of the linearised ILP (LPs solved by our own dense simplex,
// cross-checked against gonum's; pure Go, nothing to install), for small
// instances; and Heuristic, a greedy
// load-balancing packer with an exact GPU water-filling step, for large ones.
// The package is pure: no clock, no goroutines; callers time the solve.
//
// Readings chosen where the extracted paper is ambiguous (the ILP itself,
// "Eq. 2", is missing from the text):
//
//   - burst tolerance. The text prints bt(i) = sum_j size_j*x_ij / n_i, the
//     group size over the stream's own need, which ignores the other streams
//     sharing the group: maximising its minimum fills one group with every
//     stream and leaves the other GPUs idle. We read "# GPUs i can use for
//     its peak load" as the GPUs of its group in proportion to the group's
//     total average need: bt(i) = size_j / sum_{i' in j} n_i' for the group j
//     of i. This is the ratio the planner must balance to "provision a
//     sufficient number of streams and GPU workers for each serving group";
//     with one stream per group both readings agree.
//   - n_i = rate_i / T_i, where T_i is the goodput of one GPU for the model:
//     T = b/l(b) for the largest batch b <= 128 with 2*l(b) <= SLO (a request
//     waits at most one batch, then runs); see Throughput.
//   - model-streams. Streams of one model are aggregated (Aggregate) into
//     model-streams whose need is capped (by default at G-bar/2 GPUs), so a
//     popular model can be replicated over several groups; the paper
//     aggregates "streams using the same model into a single model-stream"
//     but then could not use more than G-bar GPUs per model.
//   - affinity sets are given (paper: pre-computed so that K <= K-bar within
//     a set); AffinitySets builds them greedily from a K-bar.
package herd

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/idn-net/idn/policy/flex"
)

// ErrProblem is wrapped by every Problem validation error.
var ErrProblem = errors.New("herd: invalid problem")

// ErrInfeasible is returned when no plan satisfies the constraints.
var ErrInfeasible = errors.New("herd: infeasible")

// ModelStream is one (aggregated) model-stream: streams of one model.
type ModelStream struct {
	// Model indexes Problem.ModelMem and Problem.AffinitySet.
	Model int
	// Need is n_i = rate_i / T_i, the GPUs needed for the average load.
	Need float64
	// Streams lists the original stream ids aggregated here (informational).
	Streams []int
}

// Problem is one HERD planning instance (paper 004 Table 2).
type Problem struct {
	ModelStreams []ModelStream
	// ModelMem[k] is model k's GPU memory footprint (any unit, same as Mem).
	ModelMem []float64
	// AffinitySet[k] is model k's affinity set c (q_ck = 1).
	AffinitySet []int
	// Workers is N, the number of GPUs in the cluster (constraint (a)).
	Workers int
	// GroupLimit is G-bar, the most GPUs in one group (constraint (b)).
	GroupLimit int
	// Mem is the GPU memory capacity (constraint (c)); <= 0 means unlimited.
	Mem float64
}

// Validate checks the problem.
func (p *Problem) Validate() error {
	if len(p.ModelStreams) == 0 {
		return fmt.Errorf("%w: model streams: need at least one", ErrProblem)
	}
	if p.Workers <= 0 {
		return fmt.Errorf("%w: workers = %d must be positive", ErrProblem, p.Workers)
	}
	if p.GroupLimit <= 0 {
		return fmt.Errorf("%w: group limit = %d must be positive", ErrProblem, p.GroupLimit)
	}
	if len(p.AffinitySet) != len(p.ModelMem) {
		return fmt.Errorf("%w: affinity sets: %d entries for %d models", ErrProblem, len(p.AffinitySet), len(p.ModelMem))
	}
	for k, c := range p.AffinitySet {
		if c < 0 {
			return fmt.Errorf("%w: affinity set[%d] = %d must be >= 0", ErrProblem, k, c)
		}
		if p.ModelMem[k] < 0 || math.IsNaN(p.ModelMem[k]) {
			return fmt.Errorf("%w: model mem[%d] = %v must be >= 0", ErrProblem, k, p.ModelMem[k])
		}
		if p.Mem > 0 && p.ModelMem[k] > p.Mem {
			return fmt.Errorf("%w: model mem[%d] = %v exceeds GPU memory %v", ErrProblem, k, p.ModelMem[k], p.Mem)
		}
	}
	for i, ms := range p.ModelStreams {
		if ms.Model < 0 || ms.Model >= len(p.ModelMem) {
			return fmt.Errorf("%w: model streams[%d].model = %d out of range [0,%d)", ErrProblem, i, ms.Model, len(p.ModelMem))
		}
		if !(ms.Need > 0) || math.IsInf(ms.Need, 0) {
			return fmt.Errorf("%w: model streams[%d].need = %v must be positive and finite", ErrProblem, i, ms.Need)
		}
	}
	return nil
}

// Group is one serving group of a plan.
type Group struct {
	// Size is size_j, the GPUs of the group.
	Size int
	// ModelStreams indexes Problem.ModelStreams (x_ij = 1).
	ModelStreams []int
	// Models lists the models loaded on the group's GPUs (z_kj = 1).
	Models []int
	// Need is the group's total average need, sum of n_i.
	Need float64
}

// BT is the group's burst tolerance size_j / sum n_i (see the package doc).
func (g Group) BT() float64 {
	if g.Need == 0 {
		return math.Inf(1)
	}
	return float64(g.Size) / g.Need
}

// Plan is HERD's output.
type Plan struct {
	Groups []Group
	// MinBT is the objective: the minimum burst tolerance over streams.
	MinBT float64
	// Exact is true when the plan is proven optimal.
	Exact bool
	// Nodes is the number of branch-and-bound nodes explored (Exact only).
	Nodes int
}

// GroupOf maps every model-stream to its group index.
func (p Plan) GroupOf(numModelStreams int) []int {
	out := make([]int, numModelStreams)
	for i := range out {
		out[i] = -1
	}
	for j, g := range p.Groups {
		for _, i := range g.ModelStreams {
			out[i] = j
		}
	}
	return out
}

// Check verifies a plan against constraints (a)-(e) and recomputes MinBT.
func (pr *Problem) Check(p Plan) (float64, error) {
	seen := make([]int, len(pr.ModelStreams))
	total := 0
	minBT := math.Inf(1)
	for j, g := range p.Groups {
		if g.Size < 0 || g.Size > pr.GroupLimit {
			return 0, fmt.Errorf("herd: group %d size %d violates (b) G-bar = %d", j, g.Size, pr.GroupLimit)
		}
		total += g.Size
		models := map[int]bool{}
		set := -1
		need := 0.0
		for _, i := range g.ModelStreams {
			seen[i]++
			k := pr.ModelStreams[i].Model
			models[k] = true
			need += pr.ModelStreams[i].Need
			c := pr.AffinitySet[k]
			if set >= 0 && c != set {
				return 0, fmt.Errorf("herd: group %d mixes affinity sets %d and %d, violates (e)", j, set, c)
			}
			set = c
		}
		mem := 0.0
		for k := range models {
			mem += pr.ModelMem[k]
		}
		if pr.Mem > 0 && mem > pr.Mem+1e-9 {
			return 0, fmt.Errorf("herd: group %d needs memory %v > %v, violates (c)", j, mem, pr.Mem)
		}
		if len(g.ModelStreams) > 0 {
			minBT = math.Min(minBT, float64(g.Size)/need)
		}
	}
	if total > pr.Workers {
		return 0, fmt.Errorf("herd: %d GPUs assigned > N = %d, violates (a)", total, pr.Workers)
	}
	for i, c := range seen {
		if c != 1 {
			return 0, fmt.Errorf("herd: model stream %d assigned %d times, violates (d)", i, c)
		}
	}
	return minBT, nil
}

// Throughput is T_i of paper 004 Sec. 4 for a model under an SLO (ms): the
// goodput in requests/ms of one GPU running the largest batch b <= maxBatch
// with 2*l(b) <= slo (1 if even that fails).
func Throughput(m flex.Model, slo float64, maxBatch int) float64 {
	b := maxBatch
	for b > 1 && 2*m.Latency(b) > slo {
		b--
	}
	return float64(b) / m.Latency(b)
}

// StreamLoad is one request stream's average load for Aggregate.
type StreamLoad struct {
	ID    int
	Model int
	// Need is rate/T in GPUs.
	Need float64
}

// Aggregate merges streams of the same model into model-streams whose need
// stays at most maxNeed (first-fit decreasing within each model; a stream
// bigger than maxNeed stays alone). maxNeed <= 0 aggregates each model into
// one model-stream, as paper 004 Sec. 4 does.
func Aggregate(streams []StreamLoad, maxNeed float64) []ModelStream {
	byModel := map[int][]StreamLoad{}
	var models []int
	for _, s := range streams {
		if _, ok := byModel[s.Model]; !ok {
			models = append(models, s.Model)
		}
		byModel[s.Model] = append(byModel[s.Model], s)
	}
	sort.Ints(models)
	var out []ModelStream
	for _, k := range models {
		ss := byModel[k]
		sort.SliceStable(ss, func(a, b int) bool { return ss[a].Need > ss[b].Need })
		first := len(out)
		for _, s := range ss {
			placed := false
			if maxNeed > 0 {
				for i := first; i < len(out); i++ {
					if out[i].Need+s.Need <= maxNeed {
						out[i].Need += s.Need
						out[i].Streams = append(out[i].Streams, s.ID)
						placed = true
						break
					}
				}
			} else if len(out) > first {
				out[first].Need += s.Need
				out[first].Streams = append(out[first].Streams, s.ID)
				placed = true
			}
			if !placed {
				out = append(out, ModelStream{Model: k, Need: s.Need, Streams: []int{s.ID}})
			}
		}
	}
	return out
}

// AffinitySets partitions models greedily so that the affinity K (paper 004
// eq. (4)) within every set stays <= kBar: models sorted by alpha+beta join
// the first set they keep under the bound. kBar = +Inf gives one set, as the
// paper's evaluation uses.
func AffinitySets(models []flex.Model, kBar float64) []int {
	idx := make([]int, len(models))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		return models[idx[a]].Alpha+models[idx[a]].Beta < models[idx[b]].Alpha+models[idx[b]].Beta
	})
	out := make([]int, len(models))
	var sets [][]flex.Model
	for _, i := range idx {
		placed := false
		for c := range sets {
			if flex.K(append(append([]flex.Model(nil), sets[c]...), models[i])) <= kBar {
				sets[c] = append(sets[c], models[i])
				out[i] = c
				placed = true
				break
			}
		}
		if !placed {
			sets = append(sets, []flex.Model{models[i]})
			out[i] = len(sets) - 1
		}
	}
	return out
}
