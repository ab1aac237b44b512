package infida

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/idn-net/idn/policy/idn"
)

// ErrInvalidConfig marks a configuration validation failure.
var ErrInvalidConfig = errors.New("infida: invalid config")

// Observation is what a policy learns at the end of slot t: the request
// batch r_t, the potential available capacities l_t (eq. 7/8) and, for
// load-aware heuristics, the requests each candidate served.
type Observation struct {
	// Slot is t (0-based).
	Slot int
	// R is r_t per request type.
	R []float64
	// L is l_t, aligned with in.Types[rho].Cands.
	L idn.Loads
	// Served[rho][k] is the number of type-rho requests served by candidate k.
	Served [][]float64
}

// Policy is a model-allocation policy driven slot by slot: a pure state
// machine (no goroutines, no I/O, randomness injected at construction).
type Policy interface {
	// Name identifies the policy in tables.
	Name() string
	// Allocation returns the integral allocation x_t used during the
	// current slot (0/1, indexed by Index(v, m), repository models at 1).
	// The slice is owned by the policy and valid until the next Update.
	Allocation() []float64
	// Update consumes the end-of-slot observation and prepares x_{t+1}.
	Update(obs *Observation)
}

// Config configures INFIDA (Algorithm 1 of paper 000).
type Config struct {
	// Eta is the learning rate eta (Algorithm 1, line 5). If 0, the
	// theory value of Appendix F (TheoryEta with Horizon) is used.
	Eta float64
	// Horizon is T, used only for the theory learning rate.
	Horizon int
	// RefreshInit and RefreshTarget are B_init and B_target (Sec. VI-B):
	// a new integral allocation is sampled when at least B(t) slots have
	// passed since the last sample, with B(t) stretched linearly from
	// B_init at t = 0 to B_target at t = Stretch. A fixed refresh period B
	// is RefreshInit = RefreshTarget = B.
	RefreshInit, RefreshTarget float64
	// Stretch is Delta-t in slots (0: B = RefreshTarget from the start).
	Stretch int
	// Residual chooses DepRound's handling of the residual variable.
	Residual ResidualMode
}

// DefaultConfig returns eta = 3e-3 (chosen by a pilot sweep, see the experiment notes: the theory
// value of Appendix F is orders of magnitude smaller), B = 1 and the
// budget-respecting residual rounding (GPU memory cannot be exceeded).
func DefaultConfig() Config {
	return Config{Eta: 3e-3, RefreshInit: 1, RefreshTarget: 1, Residual: ResidualBudget}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.Eta < 0 || math.IsNaN(c.Eta) || math.IsInf(c.Eta, 0):
		return fmt.Errorf("%w: eta: %v must be finite and >= 0", ErrInvalidConfig, c.Eta)
	case c.Eta == 0 && c.Horizon <= 0:
		return fmt.Errorf("%w: horizon: %d must be > 0 for the theory learning rate (eta = 0)", ErrInvalidConfig, c.Horizon)
	case !(c.RefreshInit >= 1) || math.IsInf(c.RefreshInit, 0):
		return fmt.Errorf("%w: refresh_init: %v must be >= 1", ErrInvalidConfig, c.RefreshInit)
	case !(c.RefreshTarget >= 1) || math.IsInf(c.RefreshTarget, 0):
		return fmt.Errorf("%w: refresh_target: %v must be >= 1", ErrInvalidConfig, c.RefreshTarget)
	case c.Stretch < 0:
		return fmt.Errorf("%w: stretch: %d must be >= 0", ErrInvalidConfig, c.Stretch)
	case c.Residual != ResidualRandom && c.Residual != ResidualBudget:
		return fmt.Errorf("%w: residual: unknown mode %d", ErrInvalidConfig, c.Residual)
	}
	return nil
}

// RefreshPeriod returns B(t) of Sec. VI-B: linear stretching from B_init
// to B_target over Stretch slots.
func (c Config) RefreshPeriod(t int) float64 {
	if c.Stretch <= 0 || t >= c.Stretch {
		return c.RefreshTarget
	}
	return c.RefreshInit + (c.RefreshTarget-c.RefreshInit)*float64(t)/float64(c.Stretch)
}

// TheoryEta returns the learning rate of paper 000 Appendix F,
// eta = (1/sigma) sqrt(2 theta D_max / T), with sigma = R L_max Delta_C /
// s_min (Lemma E.3), theta = 1/(s_max |V| |M|) (Lemma E.2) and D_max of
// Lemma E.5. L_max, s_min, s_max range over non-repository (v, m) pairs.
func TheoryEta(in *idn.Instance, horizon int) float64 {
	sigma, theta, dmax := TheoryConstants(in)
	return math.Sqrt(2*theta*dmax/float64(horizon)) / sigma
}

// TheoryConstants returns sigma (Lemma E.3), theta (Lemma E.2) and D_max
// (Lemma E.5) of paper 000 for the instance.
func TheoryConstants(in *idn.Instance) (sigma, theta, dmax float64) {
	lmax, smin, smax := 0.0, math.Inf(1), 0.0
	for i := range in.Size {
		if in.Omega[i] {
			continue
		}
		lmax = math.Max(lmax, in.Cap[i])
		smin = math.Min(smin, in.Size[i])
		smax = math.Max(smax, in.Size[i])
	}
	deltaC := 0.0
	for _, t := range in.Types {
		repo := t.Cands[len(t.Cands)-1].Cost
		deltaC = math.Max(deltaC, repo-t.Cands[0].Cost)
	}
	sigma = float64(len(in.Types)) * lmax * deltaC / smin
	theta = 1 / (smax * float64(in.NV) * float64(in.NM))
	for v := 0; v < in.NV; v++ {
		free, b := freeBudget(in, v)
		if len(free) == 0 {
			continue
		}
		norm := 0.0
		for _, m := range free {
			norm += in.Size[in.Index(v, m)]
		}
		mb := math.Min(b, norm)
		if mb > 0 {
			dmax += mb * math.Log(norm/mb)
		}
	}
	return sigma, theta, dmax
}

// freeBudget returns the non-repository models of vertex v and the budget
// left after the repository models (which are always hosted).
func freeBudget(in *idn.Instance, v int) ([]int, float64) {
	b := in.Budget[v]
	var free []int
	for m := 0; m < in.NM; m++ {
		i := in.Index(v, m)
		if in.Omega[i] {
			b -= in.Size[i]
			continue
		}
		free = append(free, m)
	}
	return free, math.Max(0, b)
}

// VertexState is the INFIDA state of one vertex v: the fractional state
// y^v on the capped weighted simplex Y^v (eq. 17) over its non-repository
// models, and its integral allocation x^v. It is the unit a distributed
// allocator actor owns.
type VertexState struct {
	// V is the vertex index.
	V int
	// Models lists the non-repository model indices this state covers.
	Models []int
	// Sizes are s_m^v aligned with Models.
	Sizes []float64
	// Budget is b^v minus the sizes of the repository models.
	Budget float64
	// Y and X are y^v and x^v aligned with Models.
	Y, X []float64

	tmp   []float64
	gv    []float64
	heap  []int32
	round Rounder
}

// NewVertexState returns the state of vertex v initialised per Lemma E.5 of
// paper 000: y_1 = argmin Phi^v over Y^v, i.e. y_m = min{b, ||s||_1}/||s||_1
// for every model (all ones in the corner case ||s||_1 <= b of eq. 17).
// X is all zero until the first Sample.
func NewVertexState(in *idn.Instance, v int) *VertexState {
	free, b := freeBudget(in, v)
	st := &VertexState{V: v, Models: free, Budget: b}
	st.Sizes = make([]float64, len(free))
	norm := 0.0
	for i, m := range free {
		st.Sizes[i] = in.Size[in.Index(v, m)]
		norm += st.Sizes[i]
	}
	st.Y = make([]float64, len(free))
	st.X = make([]float64, len(free))
	st.tmp = make([]float64, len(free))
	st.gv = make([]float64, len(free))
	y1 := 0.0
	if norm > 0 {
		y1 = math.Min(b, norm) / norm
	}
	for i := range st.Y {
		st.Y[i] = math.Max(y1, tiny)
	}
	return st
}

// Step performs one mirror-ascent iteration (Algorithm 1 lines 3-6): the
// dual gradient step with the weighted negative entropy map and the
// Bregman projection of Algorithm 2. g is the vertex's subgradient indexed
// by model (length in.NM), e.g. a slice of the flat vector of Subgradient.
func (st *VertexState) Step(g []float64, eta float64) {
	for i, m := range st.Models {
		st.gv[i] = g[m]
	}
	MirrorStep(st.Y, st.gv, st.Sizes, eta, st.tmp)
	st.heap = Project(st.tmp, st.Sizes, st.Budget, st.Y, st.heap)
}

// Sample draws x^v = DepRound(y^v) (Algorithm 1 line 7). score ranks
// models (by position in Models) for the budget-filling of ResidualBudget.
func (st *VertexState) Sample(rng *rand.Rand, mode ResidualMode, score func(i int) float64) {
	st.round.DepRound(rng, st.Y, st.Sizes, st.Budget, mode, score, st.X)
}

// Infida is INFIDA (Algorithm 1 of paper 000) run for all vertices, with
// the centralised subgradient of eq. 18. It implements Policy.
type Infida struct {
	in    *idn.Instance
	cfg   Config
	eta   float64
	rng   *rand.Rand
	vs    []*VertexState
	x     []float64
	yflat []float64
	g     []float64
	t     int
	last  int // slot of the last sample
}

// New returns INFIDA for the instance with x_1 = DepRound(y_1).
func New(in *idn.Instance, cfg Config, rng *rand.Rand) (*Infida, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Infida{in: in, cfg: cfg, eta: cfg.Eta, rng: rng}
	if p.eta == 0 {
		p.eta = TheoryEta(in, cfg.Horizon)
	}
	p.x = in.OmegaAlloc()
	p.yflat = in.OmegaAlloc()
	p.g = make([]float64, in.NV*in.NM)
	for v := 0; v < in.NV; v++ {
		st := NewVertexState(in, v)
		if len(st.Models) > 0 {
			p.vs = append(p.vs, st)
		}
	}
	p.sync(true)
	return p, nil
}

// Name returns "INFIDA".
func (p *Infida) Name() string { return "INFIDA" }

// Eta returns the learning rate in use.
func (p *Infida) Eta() float64 { return p.eta }

// Allocation returns x_t.
func (p *Infida) Allocation() []float64 { return p.x }

// Fractional returns y_t (flat, repository entries at 1). Valid until the
// next Update.
func (p *Infida) Fractional() []float64 { return p.yflat }

// Vertices returns the per-vertex states (for inspection and tests).
func (p *Infida) Vertices() []*VertexState { return p.vs }

// Update computes the subgradient eq. 18 at y_t, takes the mirror-ascent
// step with projection at every vertex and, when the refresh period has
// elapsed, samples x_{t+1} with DepRound.
func (p *Infida) Update(obs *Observation) {
	Subgradient(p.in, obs.R, obs.L, p.yflat, p.g, nil)
	for _, st := range p.vs {
		base := p.in.Index(st.V, 0)
		st.Step(p.g[base:base+p.in.NM], p.eta)
	}
	p.t++
	sample := float64(p.t-p.last) >= p.cfg.RefreshPeriod(p.t)
	if sample {
		p.last = p.t
	}
	p.sync(sample)
}

// sync copies y (and, if sample, a fresh DepRound x) into the flat vectors.
func (p *Infida) sync(sample bool) {
	for _, st := range p.vs {
		base := p.in.Index(st.V, 0)
		if sample {
			g := p.g[base : base+p.in.NM]
			st.Sample(p.rng, p.cfg.Residual, func(i int) float64 { return g[st.Models[i]] + st.Y[i]*1e-12 })
		}
		for i, m := range st.Models {
			p.yflat[base+m] = st.Y[i]
			if sample {
				p.x[base+m] = st.X[i]
			}
		}
	}
}
