package herd

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// ExactLimits bounds the instances Exact accepts.
type ExactLimits struct {
	// MaxModelStreams and MaxGroups bound the ILP size.
	MaxModelStreams int
	MaxGroups       int
	// MaxNodes bounds the branch-and-bound nodes; beyond it Exact fails.
	MaxNodes int
}

// DefaultExactLimits allows 6 model-streams, 6 groups and 50,000 nodes
// (6 model-streams take a few seconds, see BenchmarkHerdExactSmall).
func DefaultExactLimits() ExactLimits {
	return ExactLimits{MaxModelStreams: 6, MaxGroups: 6, MaxNodes: 50000}
}

// Validate checks the limits.
func (l ExactLimits) Validate() error {
	if l.MaxModelStreams <= 0 || l.MaxGroups <= 0 || l.MaxNodes <= 0 {
		return fmt.Errorf("%w: exact limits %+v must all be positive", ErrProblem, l)
	}
	return nil
}

// ErrTooLarge is returned by Exact for instances beyond its limits.
var ErrTooLarge = errors.New("herd: instance too large for the exact solver")

// Exact solves the linearised HERD ILP of paper 004 Sec. 4 to optimality by
// depth-first branch-and-bound over its LP relaxation (each LP solved by
// solveLP, a dense two-phase simplex checked against gonum's lp.Simplex).
// With J candidate groups (see below), the variables are x_ij, z_kj, y_cj in {0,1}, size_j in
// {0..G-bar}, the objective t >= 0 and v_ij = t*x_ij:
//
//	maximise t
//	(a) sum_j size_j <= N
//	(b) size_j <= G-bar
//	(c) sum_k mem_k z_kj <= mem                 for all j
//	(d) sum_j x_ij = 1;  x_ij <= z_{k(i)j}        for all i, j
//	(e) z_kj <= y_{c(k)j};  sum_c y_cj <= 1     for all k, j
//	bt: sum_i n_i v_ij <= size_j                for all j   (t <= size_j / need_j)
//	v_ij <= t,  v_ij <= U x_ij,  v_ij >= t - U(1 - x_ij)
//	size_j >= size_{j+1}                         (symmetry breaking)
//
// with U = min(G-bar/min n_i, N/sum n_i) an upper bound on t. The max-min
// objective and the product t*x_ij are linearised as the paper says ("standard
// techniques [22]"). J = min(#model-streams, N): a plan never needs more
// groups than model-streams. Instances with more than lim.MaxGroups such
// groups or more model-streams than lim.MaxModelStreams get ErrTooLarge.
func Exact(p *Problem, lim ExactLimits) (Plan, error) {
	if err := p.Validate(); err != nil {
		return Plan{}, err
	}
	if err := lim.Validate(); err != nil {
		return Plan{}, err
	}
	I := len(p.ModelStreams)
	J := I
	if J > p.Workers {
		J = p.Workers
	}
	if I > lim.MaxModelStreams || J > lim.MaxGroups {
		return Plan{}, fmt.Errorf("%w: %d model-streams, %d groups (limits %d, %d)", ErrTooLarge, I, J, lim.MaxModelStreams, lim.MaxGroups)
	}
	K := len(p.ModelMem)
	C := 0
	for _, c := range p.AffinitySet {
		if c+1 > C {
			C = c + 1
		}
	}
	minNeed, sumNeed := math.Inf(1), 0.0
	for _, ms := range p.ModelStreams {
		minNeed = math.Min(minNeed, ms.Need)
		sumNeed += ms.Need
	}
	U := math.Min(float64(p.GroupLimit)/minNeed, float64(p.Workers)/sumNeed)
	// variable layout
	ix := func(i, j int) int { return i*J + j }
	iv := func(i, j int) int { return I*J + i*J + j }
	is := func(j int) int { return 2*I*J + j }
	// z is only needed with a memory limit or several affinity sets, y only
	// with several affinity sets: dropping them keeps the LPs small.
	useZ, useY := p.Mem > 0 || C > 1, C > 1
	Kv, Cv := 0, 0
	if useZ {
		Kv = K
	}
	if useY {
		Cv = C
	}
	iz := func(k, j int) int { return 2*I*J + J + k*J + j }
	iy := func(c, j int) int { return 2*I*J + J + Kv*J + c*J + j }
	it := 2*I*J + J + Kv*J + Cv*J
	nv := it + 1

	var G [][]float64
	var h []float64
	row := func() []float64 { r := make([]float64, nv); G = append(G, r); return r }
	// (a)
	r := row()
	for j := 0; j < J; j++ {
		r[is(j)] = 1
	}
	h = append(h, float64(p.Workers))
	for j := 0; j < J; j++ {
		r = row() // (b)
		r[is(j)] = 1
		h = append(h, float64(p.GroupLimit))
		if p.Mem > 0 { // (c)
			r = row()
			for k := 0; k < K; k++ {
				r[iz(k, j)] = p.ModelMem[k]
			}
			h = append(h, p.Mem)
		}
		if useZ {
			for i := 0; i < I; i++ { // (d) x <= z
				r = row()
				r[ix(i, j)] = 1
				r[iz(p.ModelStreams[i].Model, j)] = -1
				h = append(h, 0)
			}
		}
		if useY {
			for k := 0; k < K; k++ { // (e) z <= y (so z <= 1 via sum_c y <= 1)
				r = row()
				r[iz(k, j)] = 1
				r[iy(p.AffinitySet[k], j)] = -1
				h = append(h, 0)
			}
			r = row() // (e) one set per group
			for c := 0; c < C; c++ {
				r[iy(c, j)] = 1
			}
			h = append(h, 1)
		} else if useZ {
			for k := 0; k < K; k++ { // z <= 1
				r = row()
				r[iz(k, j)] = 1
				h = append(h, 1)
			}
		}
		r = row() // bt
		for i := 0; i < I; i++ {
			r[iv(i, j)] = p.ModelStreams[i].Need
		}
		r[is(j)] = -1
		h = append(h, 0)
		for i := 0; i < I; i++ {
			r = row() // v <= t
			r[iv(i, j)] = 1
			r[it] = -1
			h = append(h, 0)
			r = row() // v <= U x
			r[iv(i, j)] = 1
			r[ix(i, j)] = -U
			h = append(h, 0)
			r = row() // t - v + U x <= U
			r[it] = 1
			r[iv(i, j)] = -1
			r[ix(i, j)] = U
			h = append(h, U)
		}
		if j+1 < J { // symmetry: size_{j+1} <= size_j
			r = row()
			r[is(j+1)] = 1
			r[is(j)] = -1
			h = append(h, 0)
		}
	}
	r = row() // t <= U
	r[it] = 1
	h = append(h, U)
	var A [][]float64
	var b []float64
	for i := 0; i < I; i++ { // (d) sum_j x_ij = 1
		a := make([]float64, nv)
		for j := 0; j < J; j++ {
			a[ix(i, j)] = 1
		}
		A = append(A, a)
		b = append(b, 1)
	}
	intVar := make([]bool, nv)
	for v := 0; v < nv; v++ {
		intVar[v] = true
	}
	for i := 0; i < I; i++ {
		for j := 0; j < J; j++ {
			intVar[iv(i, j)] = false
		}
	}
	intVar[it] = false
	cost := make([]float64, nv)
	cost[it] = -1

	bb := &bnb{G: G, h: h, A: A, b: b, c: cost, intVar: intVar, maxNodes: lim.MaxNodes, best: math.Inf(1)}
	// The heuristic's plan is the initial incumbent: the search then only
	// has to find better plans or prove that there are none.
	hplan, herr := Heuristic(p)
	if herr == nil && len(hplan.Groups) <= J {
		bb.best = -hplan.MinBT
	} else {
		herr = ErrInfeasible
	}
	if err := bb.solve(nil); err != nil {
		return Plan{}, err
	}
	if bb.bestX == nil {
		if herr == nil {
			hplan.Exact, hplan.Nodes = true, bb.nodes
			return hplan, nil
		}
		return Plan{}, fmt.Errorf("%w: no integer plan found", ErrInfeasible)
	}
	x := bb.bestX
	plan := Plan{Exact: true, Nodes: bb.nodes}
	for j := 0; j < J; j++ {
		var g Group
		g.Size = int(math.Round(x[is(j)]))
		models := map[int]bool{}
		for i := 0; i < I; i++ {
			if x[ix(i, j)] > 0.5 {
				g.ModelStreams = append(g.ModelStreams, i)
				g.Need += p.ModelStreams[i].Need
				models[p.ModelStreams[i].Model] = true
			}
		}
		if len(g.ModelStreams) == 0 {
			continue
		}
		for k := range models {
			g.Models = append(g.Models, k)
		}
		sort.Ints(g.Models)
		plan.Groups = append(plan.Groups, g)
	}
	// GPUs the optimum leaves unused cannot raise the minimum; hand them to
	// the groups with the lowest size/need below G-bar anyway.
	used := 0
	for _, g := range plan.Groups {
		used += g.Size
	}
	for ; used < p.Workers; used++ {
		best := -1
		for j, g := range plan.Groups {
			if g.Size < p.GroupLimit && (best < 0 || g.BT() < plan.Groups[best].BT()) {
				best = j
			}
		}
		if best < 0 {
			break
		}
		plan.Groups[best].Size++
	}
	mb, err := p.Check(plan)
	if err != nil {
		return Plan{}, fmt.Errorf("herd: exact solution failed its check: %w", err)
	}
	plan.MinBT = mb
	return plan, nil
}

// bound is one branching bound: x_v <= val (upper) or x_v >= val.
type bound struct {
	v     int
	val   float64
	upper bool
}

type bnb struct {
	G        [][]float64
	h        []float64
	A        [][]float64
	b        []float64
	c        []float64
	intVar   []bool
	maxNodes int
	nodes    int
	best     float64
	bestX    []float64
}

const intTol = 1e-6

func (s *bnb) solve(bounds []bound) error {
	s.nodes++
	if s.nodes > s.maxNodes {
		return fmt.Errorf("%w: more than %d branch-and-bound nodes", ErrTooLarge, s.maxNodes)
	}
	obj, x, err := s.lp(bounds)
	if err != nil {
		if errors.Is(err, errLPInfeasible) {
			return nil
		}
		return fmt.Errorf("herd: LP relaxation: %w", err)
	}
	if obj >= s.best-1e-9 {
		return nil // cannot beat the incumbent
	}
	bv, frac := -1, 0.0
	for v, isInt := range s.intVar {
		if !isInt {
			continue
		}
		f := x[v] - math.Floor(x[v])
		d := math.Min(f, 1-f)
		if d > intTol && d > frac {
			bv, frac = v, d
		}
	}
	if bv < 0 {
		s.best = obj
		s.bestX = x
		return nil
	}
	fl := math.Floor(x[bv])
	// explore the rounding closer to the LP value first
	up := bound{v: bv, val: fl + 1}
	down := bound{v: bv, val: fl, upper: true}
	first, second := down, up
	if x[bv]-fl > 0.5 {
		first, second = up, down
	}
	if err := s.solve(append(bounds[:len(bounds):len(bounds)], first)); err != nil {
		return err
	}
	return s.solve(append(bounds[:len(bounds):len(bounds)], second))
}

// lp solves the relaxation with the extra bounds in standard form: every
// inequality row gets its own slack column; rows with a negative right-hand
// side are negated so that b >= 0.
func (s *bnb) lp(bounds []bound) (float64, []float64, error) {
	nv := len(s.c)
	nIneq := len(s.G) + len(bounds)
	rows := nIneq + len(s.A)
	cols := nv + nIneq
	a := make([][]float64, rows)
	bb := make([]float64, rows)
	for r, g := range s.G {
		a[r] = make([]float64, cols)
		copy(a[r], g)
		a[r][nv+r] = 1
		bb[r] = s.h[r]
	}
	for k, bd := range bounds {
		r := len(s.G) + k
		a[r] = make([]float64, cols)
		if bd.upper {
			a[r][bd.v] = 1
			bb[r] = bd.val
		} else {
			a[r][bd.v] = -1
			bb[r] = -bd.val
		}
		a[r][nv+r] = 1
	}
	for k, arow := range s.A {
		r := nIneq + k
		a[r] = make([]float64, cols)
		copy(a[r], arow)
		bb[r] = s.b[k]
	}
	c := make([]float64, cols)
	copy(c, s.c)
	for r := 0; r < rows; r++ {
		if bb[r] < 0 {
			bb[r] = -bb[r]
			for v := range a[r] {
				a[r][v] = -a[r][v]
			}
		}
	}
	obj, x, err := solveLP(c, a, bb)
	if err != nil {
		return 0, nil, err
	}
	return obj, x[:nv], nil
}
