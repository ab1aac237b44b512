package accuracy

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
)

// Policy is a dispatcher of paper 001 as a pure, event-driven state machine.
// The driver (a simulator or the scheduler actor) feeds it events and acts on
// its decisions:
//
//   - Dispatch: a query arrived; the policy returns the server (0..n-1) that
//     must take it. Servers are numbered class by class (Layout).
//   - Departed: a query left server; idle reports that the server has no
//     query left, which is the JIQ "token" of Sec. 3.2.
//   - Blocked: the query just dispatched to server was dropped (its finite
//     buffer was full).
//
// Policies start with every server idle. They never allocate per event.
// A blocked query stays counted in TAD's and TAD-OP's Delta (the paper's
// dispatcher routes without knowing of buffers); only R-JSQ(d), which
// tracks queue lengths, uses Blocked.
type Policy interface {
	Name() string
	Dispatch() int
	Departed(server int, idle bool)
	Blocked(server int)
}

// Retargeter is implemented by the policies that track the accuracy target
// online (TAD, TAD-OP): SetAStar changes a* between phases (Sec. 7.2); the
// accuracy difference keeps its value and is updated with the new a*
// from the next query on.
type Retargeter interface {
	SetAStar(astar float64) error
}

// Layout is the split of n servers into K classes: class k owns the servers
// Offset[k] .. Offset[k]+Count[k]-1.
type Layout struct {
	N      int
	Count  []int
	Offset []int
	Class  []uint8 // class of each server
}

// NewLayout splits n servers by the fractions alpha (largest remainder, so
// the counts sum to n); every class must get at least one server.
func NewLayout(n int, alpha []float64) (Layout, error) {
	k := len(alpha)
	if k == 0 || k > 255 {
		return Layout{}, fmt.Errorf("alpha: %d classes, need 1..255: %w", k, ErrInvalid)
	}
	if n < k {
		return Layout{}, fmt.Errorf("n = %d: fewer servers than the %d classes: %w", n, k, ErrInvalid)
	}
	l := Layout{N: n, Count: make([]int, k), Offset: make([]int, k), Class: make([]uint8, n)}
	type rem struct {
		i int
		r float64
	}
	rs := make([]rem, k)
	tot := 0
	for i, a := range alpha {
		x := a * float64(n)
		l.Count[i] = int(math.Floor(x))
		rs[i] = rem{i, x - math.Floor(x)}
		tot += l.Count[i]
	}
	sort.SliceStable(rs, func(x, y int) bool { return rs[x].r > rs[y].r })
	for j := 0; tot < n; j++ {
		l.Count[rs[j%k].i]++
		tot++
	}
	off := 0
	for i := range l.Count {
		if l.Count[i] == 0 {
			return Layout{}, fmt.Errorf("alpha[%d] = %v: class gets no server out of n = %d: %w", i, alpha[i], n, ErrInvalid)
		}
		l.Offset[i] = off
		for s := off; s < off+l.Count[i]; s++ {
			l.Class[s] = uint8(i)
		}
		off += l.Count[i]
	}
	return l, nil
}

// tokens is the dispatcher's idle-token store of Sec. 3.2: one LIFO stack of
// idle servers per class, packed in one array, and the per-class token
// counts TAD-OP needs (Sec. 5.4).
type tokens struct {
	off, cnt, size []int32
	stack          []int32
	class          []uint8
}

func newTokens(l Layout) tokens {
	k := len(l.Count)
	t := tokens{off: make([]int32, k), cnt: make([]int32, k), size: make([]int32, k), stack: make([]int32, l.N), class: l.Class}
	for i := 0; i < k; i++ {
		t.off[i], t.cnt[i], t.size[i] = int32(l.Offset[i]), int32(l.Count[i]), int32(l.Count[i])
	}
	for s := range t.stack {
		t.stack[s] = int32(s)
	}
	return t
}

func (t *tokens) pop(k int) int {
	t.cnt[k]--
	return int(t.stack[t.off[k]+t.cnt[k]])
}

func (t *tokens) push(server int) {
	k := t.class[server]
	t.stack[t.off[k]+t.cnt[k]] = int32(server)
	t.cnt[k]++
}

// serve returns an idle class-k server if there is one, else a uniformly
// random class-k server.
func (t *tokens) serve(k int, r *rand.Rand) int {
	if t.cnt[k] > 0 {
		return t.pop(k)
	}
	return int(t.off[k]) + r.IntN(int(t.size[k]))
}

// PolicyConfig configures the dispatch policies.
type PolicyConfig struct {
	System System
	AStar  float64 // benchmark accuracy a*
	N      int     // number of servers n
	// Lambda is the normalised arrival rate R-JIQ and R-JSQ(d) are told
	// (they solve eq. 3 at it); the other policies ignore it.
	Lambda float64
	// Gamma is R-JIQ's hyper-parameter of eq. (4). Negative means the value
	// of Lemma 2: gamma = (1/2)(1/2 - beta) with beta from
	// lambda/lambda^max = 1 - n^-beta, clipped at 0.
	Gamma float64
	// D is the number of servers R-JSQ(d) samples in the chosen class.
	D int
}

// DefaultConfig returns the paper's Sec. 7 system with a*=76, n=64, lambda
// at half of lambda^max (0.354...), gamma from Lemma 2, d=2.
func DefaultConfig() PolicyConfig {
	s := DefaultSystem()
	lm, _ := LambdaMax(s, 76)
	return PolicyConfig{System: s, AStar: 76, N: 64, Lambda: 0.5 * lm, Gamma: -1, D: 2}
}

// Validate checks the configuration.
func (c PolicyConfig) Validate() error {
	if err := c.System.Validate(); err != nil {
		return err
	}
	if err := checkAStar(c.AStar); err != nil {
		return err
	}
	if c.N < c.System.K() {
		return fmt.Errorf("n = %d: need at least one server per class (%d classes): %w", c.N, c.System.K(), ErrInvalid)
	}
	if math.IsNaN(c.Lambda) || c.Lambda < 0 || math.IsInf(c.Lambda, 0) {
		return fmt.Errorf("lambda = %v: must be non-negative and finite: %w", c.Lambda, ErrInvalid)
	}
	if math.IsNaN(c.Gamma) || math.IsInf(c.Gamma, 0) {
		return fmt.Errorf("gamma = %v: must be finite: %w", c.Gamma, ErrInvalid)
	}
	if c.D < 1 {
		return fmt.Errorf("d = %d: must be >= 1: %w", c.D, ErrInvalid)
	}
	if maxOf(c.System.A) < c.AStar {
		return fmt.Errorf("astar = %v exceeds every class accuracy (max a = %v): %w", c.AStar, maxOf(c.System.A), ErrInfeasible)
	}
	return nil
}

// PolicyNames lists the names New accepts.
var PolicyNames = []string{"rjiq", "tad", "tadop", "jfiq", "jiqma", "rjsqd"}

// New builds the named policy (one of PolicyNames) with randomness r.
func New(name string, c PolicyConfig, r *rand.Rand) (Policy, error) {
	switch strings.ToLower(name) {
	case "rjiq", "r-jiq":
		return NewRJIQ(c, r)
	case "tad":
		return NewTAD(c, r)
	case "tadop", "tad-op":
		return NewTADOP(c, r)
	case "jfiq":
		return NewJIQ(c, r, false)
	case "jiqma", "jiq-ma":
		return NewJIQ(c, r, true)
	case "rjsqd", "r-jsq", "rjsq":
		return NewRJSQ(c, r)
	}
	return nil, fmt.Errorf("policy %q: unknown, want one of %s: %w", name, strings.Join(PolicyNames, ","), ErrInvalid)
}

// order returns the class indices sorted by key descending (ties by index).
func order(key []float64) []int {
	o := make([]int, len(key))
	for i := range o {
		o[i] = i
	}
	sort.SliceStable(o, func(x, y int) bool { return key[o[x]] > key[o[y]] })
	return o
}

// ----------------------------------------------------------------- R-JIQ

// RJIQ is the R-JIQ policy of paper 001 Sec. 3.2: choose class i with
// probability p_R-JIQ,i(lambda) of eq. (4),
//
//	p_R-JIQ(lambda) = (1 - n^-gamma) p*(lambda) + n^-gamma p*(lambda^max),
//
// then an idle class-i server (token), else a uniformly random class-i server.
type RJIQ struct {
	tok   tokens
	cum   []float64
	r     *rand.Rand
	P     []float64 // p_R-JIQ(lambda)
	Gamma float64   // the gamma used
}

// RJIQProbabilities returns p_R-JIQ(lambda) of paper 001 eq. (4) and the
// gamma used (see PolicyConfig.Gamma).
func RJIQProbabilities(c PolicyConfig) (p []float64, gamma float64, err error) {
	lm, err := LambdaMax(c.System, c.AStar)
	if err != nil {
		return nil, 0, err
	}
	if !(c.Lambda > 0) {
		return nil, 0, fmt.Errorf("lambda = %v: R-JIQ needs the arrival rate (> 0): %w", c.Lambda, ErrInvalid)
	}
	at, err := SolveLP(c.System, c.AStar, c.Lambda)
	if err != nil {
		return nil, 0, err
	}
	atMax, err := SolveLP(c.System, c.AStar, lm)
	if err != nil {
		return nil, 0, err
	}
	gamma = c.Gamma
	if gamma < 0 {
		gamma = LemmaGamma(c.Lambda/lm, c.N)
	}
	w := math.Pow(float64(c.N), -gamma)
	p = make([]float64, c.System.K())
	for i := range p {
		p[i] = (1-w)*at.P[i] + w*atMax.P[i]
	}
	return p, gamma, nil
}

// LemmaGamma is gamma = (1/2)(1/2 - beta) of paper 001 Lemma 2 with beta
// solving rho = 1 - n^-beta, clipped to >= 0.
func LemmaGamma(rho float64, n int) float64 {
	if n <= 1 || rho <= 0 || rho >= 1 {
		return 0
	}
	beta := -math.Log(1-rho) / math.Log(float64(n))
	return math.Max(0, 0.5*(0.5-beta))
}

// NewRJIQ builds R-JIQ; it needs c.Lambda > 0 (the known arrival rate).
func NewRJIQ(c PolicyConfig, r *rand.Rand) (*RJIQ, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	l, err := NewLayout(c.N, c.System.Alpha)
	if err != nil {
		return nil, err
	}
	p, g, err := RJIQProbabilities(c)
	if err != nil {
		return nil, err
	}
	return &RJIQ{tok: newTokens(l), cum: cumulative(p), r: r, P: p, Gamma: g}, nil
}

func cumulative(p []float64) []float64 {
	cum := make([]float64, len(p))
	s := 0.0
	for i, x := range p {
		s += x
		cum[i] = s
	}
	for i := range cum {
		cum[i] /= s
	}
	cum[len(cum)-1] = 1
	return cum
}

func sample(cum []float64, u float64) int {
	for i, c := range cum {
		if u < c {
			return i
		}
	}
	return len(cum) - 1
}

// Name returns "rjiq".
func (p *RJIQ) Name() string { return "rjiq" }

// Dispatch implements Policy.
func (p *RJIQ) Dispatch() int { return p.tok.serve(sample(p.cum, p.r.Float64()), p.r) }

// Departed implements Policy.
func (p *RJIQ) Departed(server int, idle bool) {
	if idle {
		p.tok.push(server)
	}
}

// Blocked implements Policy.
func (p *RJIQ) Blocked(int) {}

// ----------------------------------------------------------------- TAD

// TAD is the Track-the-Accuracy-Difference policy of paper 001 Sec. 4: with
// I = {i : Delta + a_i - a* >= 0}, join an idle server of the fastest class
// in I; if no class in I has an idle server, a uniformly random class of I
// and a uniformly random server in it. Then Delta += a_i - a*.
type TAD struct {
	tok   tokens
	r     *rand.Rand
	a     []float64
	fast  []int // classes by mu descending
	set   []int // scratch for I
	astar float64
	Delta float64 // the accuracy difference Delta_a*
}

// NewTAD builds TAD (it does not use c.Lambda).
func NewTAD(c PolicyConfig, r *rand.Rand) (*TAD, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	l, err := NewLayout(c.N, c.System.Alpha)
	if err != nil {
		return nil, err
	}
	return &TAD{tok: newTokens(l), r: r, a: c.System.A, fast: order(c.System.Mu), set: make([]int, 0, c.System.K()), astar: c.AStar}, nil
}

// Name returns "tad".
func (p *TAD) Name() string { return "tad" }

// SetAStar implements Retargeter.
func (p *TAD) SetAStar(astar float64) error {
	if err := checkAStar(astar); err != nil {
		return err
	}
	if maxOf(p.a) < astar {
		return fmt.Errorf("astar = %v exceeds every class accuracy: %w", astar, ErrInfeasible)
	}
	p.astar = astar
	return nil
}

// Dispatch implements Policy.
func (p *TAD) Dispatch() int {
	const eps = 1e-9
	p.set = p.set[:0]
	for _, k := range p.fast {
		if p.Delta+p.a[k]-p.astar >= -eps {
			if p.tok.cnt[k] > 0 {
				p.Delta += p.a[k] - p.astar
				return p.tok.pop(k)
			}
			p.set = append(p.set, k)
		}
	}
	k := p.set[p.r.IntN(len(p.set))]
	p.Delta += p.a[k] - p.astar
	return int(p.tok.off[k]) + p.r.IntN(int(p.tok.size[k]))
}

// Departed implements Policy.
func (p *TAD) Departed(server int, idle bool) {
	if idle {
		p.tok.push(server)
	}
}

// Blocked implements Policy.
func (p *TAD) Blocked(int) {}

// ----------------------------------------------------------------- TAD-OP

// opTuple is a routing tuple prepared for TAD-OP's routability test.
type opTuple struct {
	kind     TupleKind
	pos, neg int // singleton/shuffle: the class with q > 0 and (shuffle) q < 0
	lo, hi   int // proper pair: the class with a < a* and with a > a*
	zero     bool
}

// TADOP is TAD-OP, paper 001 Algorithm 2: walk S*_opt (eq. 11) in cost order
// and use the first routable tuple (Sec. 5.4: each class with q_k > 0 has an
// idle server, each class with q_k < 0 has a busy one, counted with the
// per-class token counts). A singleton or shuffle pair sends the query to
// its class with q_k > 0; a proper pair sends it to its class below a* when
// Delta > 0, else to its class above a*. Without a routable tuple: the most
// accurate class with an idle server; with no idle server at all a uniformly
// random class. Then Delta += a_i - a*.
//
// Reading of the garbled Algorithm 2 text: the branch "choose i with
// q(i) > 0" applies to singletons and to tuples whose routing vector is NOT
// non-negative (shuffle pairs); proper pairs (two positive entries, where
// that rule would be ambiguous) use the sign of Delta, as Sec. 5.4's
// "Intuition" paragraph describes. A tuple entry with q_k = 0 (a class with
// a_k = a* in a pair) meets neither routability condition, so that pair is
// never routable; its singleton {k} has the same cost and is used instead.
type TADOP struct {
	tok    tokens
	r      *rand.Rand
	sys    System
	acc    []int // classes by a descending
	tuples []Tuple
	op     []opTuple
	astar  float64
	Delta  float64 // the accuracy difference Delta_a*
}

// NewTADOP builds TAD-OP (it does not use c.Lambda).
func NewTADOP(c PolicyConfig, r *rand.Rand) (*TADOP, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	l, err := NewLayout(c.N, c.System.Alpha)
	if err != nil {
		return nil, err
	}
	k := c.System.K()
	p := &TADOP{tok: newTokens(l), r: r, sys: c.System, acc: order(c.System.A),
		tuples: make([]Tuple, 0, k*(k+1)/2), op: make([]opTuple, 0, k*(k+1)/2)}
	if err := p.SetAStar(c.AStar); err != nil {
		return nil, err
	}
	return p, nil
}

// Name returns "tadop".
func (p *TADOP) Name() string { return "tadop" }

// Tuples returns the ordered S*_opt the policy walks.
func (p *TADOP) Tuples() []Tuple { return p.tuples }

// SetAStar implements Retargeter: it recomputes S*_opt for the new a*
// (Sec. 7.2), reusing its storage.
func (p *TADOP) SetAStar(astar float64) error {
	if err := checkAStar(astar); err != nil {
		return err
	}
	if maxOf(p.sys.A) < astar {
		return fmt.Errorf("astar = %v exceeds every class accuracy: %w", astar, ErrInfeasible)
	}
	p.astar = astar
	p.tuples = appendTuples(p.tuples, p.sys, astar)
	p.op = p.op[:0]
	for _, t := range p.tuples {
		o := opTuple{kind: t.Kind, pos: t.I, neg: -1, lo: -1, hi: -1}
		switch t.Kind {
		case Shuffle:
			o.pos, o.neg = t.I, t.J
			if t.Q[t.I] < 0 {
				o.pos, o.neg = t.J, t.I
			}
		case Proper:
			o.lo, o.hi = t.I, t.J
			if p.sys.A[t.I] > p.sys.A[t.J] {
				o.lo, o.hi = t.J, t.I
			}
			o.zero = t.Q[t.I] == 0 || t.Q[t.J] == 0
		}
		p.op = append(p.op, o)
	}
	return nil
}

// Dispatch implements Policy.
func (p *TADOP) Dispatch() int {
	cnt := p.tok.cnt
	k := -1
	for i := range p.op {
		o := &p.op[i]
		switch o.kind {
		case Singleton:
			if cnt[o.pos] > 0 {
				k = o.pos
			}
		case Shuffle:
			if cnt[o.pos] > 0 && cnt[o.neg] < p.tok.size[o.neg] {
				k = o.pos
			}
		case Proper:
			if !o.zero && cnt[o.lo] > 0 && cnt[o.hi] > 0 {
				if p.Delta > 0 {
					k = o.lo
				} else {
					k = o.hi
				}
			}
		}
		if k >= 0 {
			break
		}
	}
	if k < 0 {
		for _, c := range p.acc {
			if cnt[c] > 0 {
				k = c
				break
			}
		}
	}
	var s int
	if k < 0 {
		k = p.r.IntN(len(cnt))
		s = int(p.tok.off[k]) + p.r.IntN(int(p.tok.size[k]))
	} else {
		s = p.tok.pop(k)
	}
	p.Delta += p.sys.A[k] - p.astar
	return s
}

// Departed implements Policy.
func (p *TADOP) Departed(server int, idle bool) {
	if idle {
		p.tok.push(server)
	}
}

// Blocked implements Policy.
func (p *TADOP) Blocked(int) {}

// ----------------------------------------------------------------- JIQ baselines

// JIQ is the Join-the-Idle-Queue baseline of paper 001 Fig. 1: an idle
// server of the fastest class (JFIQ, Sec. 5.5 / [28]) or of the most
// accurate class (JIQ most-accurate-first); with no idle server anywhere a
// uniformly random server of the whole system.
type JIQ struct {
	tok  tokens
	r    *rand.Rand
	pref []int
	name string
	n    int
}

// NewJIQ builds JFIQ (mostAccurate false) or JIQ-most-accurate-first.
func NewJIQ(c PolicyConfig, r *rand.Rand, mostAccurate bool) (*JIQ, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	l, err := NewLayout(c.N, c.System.Alpha)
	if err != nil {
		return nil, err
	}
	p := &JIQ{tok: newTokens(l), r: r, pref: order(c.System.Mu), name: "jfiq", n: c.N}
	if mostAccurate {
		p.pref, p.name = order(c.System.A), "jiqma"
	}
	return p, nil
}

// Name returns "jfiq" or "jiqma".
func (p *JIQ) Name() string { return p.name }

// Dispatch implements Policy.
func (p *JIQ) Dispatch() int {
	for _, k := range p.pref {
		if p.tok.cnt[k] > 0 {
			return p.tok.pop(k)
		}
	}
	return p.r.IntN(p.n)
}

// Departed implements Policy.
func (p *JIQ) Departed(server int, idle bool) {
	if idle {
		p.tok.push(server)
	}
}

// Blocked implements Policy.
func (p *JIQ) Blocked(int) {}

// ----------------------------------------------------------------- R-JSQ(d)

// RJSQ is R-JSQ(d), the randomized JSQ-d variant of paper 001 Sec. 3.2:
// class i with probability p_R-JIQ,i(lambda) (eq. 4), then the shortest of d
// uniformly sampled class-i servers (ties to the first sampled). It tracks
// queue lengths from its own dispatches and the departures.
type RJSQ struct {
	q   []int32
	l   Layout
	cum []float64
	d   int
	r   *rand.Rand
}

// NewRJSQ builds R-JSQ(d); like R-JIQ it needs c.Lambda > 0.
func NewRJSQ(c PolicyConfig, r *rand.Rand) (*RJSQ, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	l, err := NewLayout(c.N, c.System.Alpha)
	if err != nil {
		return nil, err
	}
	p, _, err := RJIQProbabilities(c)
	if err != nil {
		return nil, err
	}
	return &RJSQ{q: make([]int32, c.N), l: l, cum: cumulative(p), d: c.D, r: r}, nil
}

// Name returns "rjsqd".
func (p *RJSQ) Name() string { return "rjsqd" }

// Dispatch implements Policy.
func (p *RJSQ) Dispatch() int {
	k := sample(p.cum, p.r.Float64())
	off, size := p.l.Offset[k], p.l.Count[k]
	best := off + p.r.IntN(size)
	for i := 1; i < p.d; i++ {
		s := off + p.r.IntN(size)
		if p.q[s] < p.q[best] {
			best = s
		}
	}
	p.q[best]++
	return best
}

// Departed implements Policy.
func (p *RJSQ) Departed(server int, _ bool) { p.q[server]-- }

// Blocked implements Policy.
func (p *RJSQ) Blocked(server int) { p.q[server]-- }
