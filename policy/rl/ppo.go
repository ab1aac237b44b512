package rl

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/idn-net/idn/policy/sim"
	"github.com/idn-net/idn/policy/sim/instances"
)

// Config holds the policy-optimisation settings. DefaultConfig gives the
// values of paper 002 Sec. 5.1.4-5.1.5.
type Config struct {
	// Hidden are the hidden layer widths of both the actor and the critic
	// (two tanh layers of 90 and 60 units; no parameter sharing).
	Hidden []int
	// Sigma is the exploration noise of paper 002 eq. (8) during training (0.698).
	Sigma float64
	// Gamma is the discount factor (0.99).
	Gamma float64
	// Lambda is the GAE parameter of paper 002 eq. (11) (0.95).
	Lambda float64
	// ClipEps is the PPO clipping threshold epsilon of paper 002 eq. (7)/(10) (0.2).
	ClipEps float64
	// LR is the Adam learning rate (2.5e-4) for both networks.
	LR float64
	// AdamBeta1, AdamBeta2, AdamEps are Adam's moment decay rates and
	// stabiliser (the paper does not give them; these are Kingma & Ba's
	// defaults, also PyTorch's).
	AdamBeta1, AdamBeta2, AdamEps float64
	// Rollout is T, the number of slots per policy update period (5e4).
	Rollout int
	// Minibatch is the mini-batch size (1e4).
	Minibatch int
	// Epochs is the number of passes over each rollout (5).
	Epochs int
	// NormalizeAdv standardises the advantages of each rollout to zero mean
	// and unit variance (an implementation detail of common PPO code; the
	// paper does not say).
	NormalizeAdv bool
	// MaxGradNorm clips each network's gradient to this global L2 norm
	// before the Adam step; 0 disables clipping (the paper does not say).
	MaxGradNorm float64
	// RewardScale multiplies the rewards of paper 002 eq. (2) before GAE and the critic
	// loss; 0 means automatic: (1-gamma)/(mean arrivals per slot), which puts
	// the discounted returns at about the goodput ratio, of order 1.
	RewardScale float64
	// FullObs adds the one-hot MAP phase to the observation (RL-FO).
	FullObs bool
	// ArrivalBaseline c subtracts c times the number of arrivals in a slot
	// from the reward used for learning: r' = r - c*arrivals. Arrivals are
	// exogenous (no action changes them), so sum_t gamma^t c*arrivals_t does
	// not depend on the policy and the optimal policy is unchanged; the
	// term removes the reward swings caused by the arrival rate itself (a
	// burst multiplies the reward of eq. (2) by 18 whatever the action),
	// which otherwise dominate the advantage variance. 0 disables it (the
	// paper's plain eq. (2)). Not in the paper.
	ArrivalBaseline float64
}

// DefaultConfig returns the settings of paper 002 Sec. 5.1.4-5.1.5.
func DefaultConfig() Config {
	return Config{
		Hidden:       []int{90, 60},
		Sigma:        0.698,
		Gamma:        0.99,
		Lambda:       0.95,
		ClipEps:      0.2,
		LR:           2.5e-4,
		AdamBeta1:    0.9,
		AdamBeta2:    0.999,
		AdamEps:      1e-8,
		Rollout:      50000,
		Minibatch:    10000,
		Epochs:       5,
		NormalizeAdv: true,
	}
}

// ErrConfig is wrapped by every Config validation error.
var ErrConfig = errors.New("invalid rl config")

// Validate checks every field.
func (c Config) Validate() error {
	if len(c.Hidden) == 0 {
		return fmt.Errorf("%w: Hidden is empty", ErrConfig)
	}
	for i, h := range c.Hidden {
		if h < 1 {
			return fmt.Errorf("%w: Hidden[%d] = %d must be >= 1", ErrConfig, i, h)
		}
	}
	if !(c.Sigma > 0) {
		return fmt.Errorf("%w: Sigma = %v must be > 0", ErrConfig, c.Sigma)
	}
	if !(c.Gamma > 0 && c.Gamma < 1) {
		return fmt.Errorf("%w: Gamma = %v must be in (0,1)", ErrConfig, c.Gamma)
	}
	if !(c.Lambda >= 0 && c.Lambda <= 1) {
		return fmt.Errorf("%w: Lambda = %v must be in [0,1]", ErrConfig, c.Lambda)
	}
	if !(c.ClipEps > 0 && c.ClipEps < 1) {
		return fmt.Errorf("%w: ClipEps = %v must be in (0,1)", ErrConfig, c.ClipEps)
	}
	if !(c.LR > 0) {
		return fmt.Errorf("%w: LR = %v must be > 0", ErrConfig, c.LR)
	}
	if !(c.AdamBeta1 >= 0 && c.AdamBeta1 < 1) || !(c.AdamBeta2 >= 0 && c.AdamBeta2 < 1) || !(c.AdamEps > 0) {
		return fmt.Errorf("%w: Adam parameters beta1 = %v, beta2 = %v, eps = %v out of range", ErrConfig, c.AdamBeta1, c.AdamBeta2, c.AdamEps)
	}
	if c.Rollout < 1 {
		return fmt.Errorf("%w: Rollout = %d must be >= 1", ErrConfig, c.Rollout)
	}
	if c.Minibatch < 1 || c.Minibatch > c.Rollout {
		return fmt.Errorf("%w: Minibatch = %d must be in [1, Rollout = %d]", ErrConfig, c.Minibatch, c.Rollout)
	}
	if c.Epochs < 1 {
		return fmt.Errorf("%w: Epochs = %d must be >= 1", ErrConfig, c.Epochs)
	}
	if c.MaxGradNorm < 0 {
		return fmt.Errorf("%w: MaxGradNorm = %v must be >= 0", ErrConfig, c.MaxGradNorm)
	}
	if c.ArrivalBaseline < 0 {
		return fmt.Errorf("%w: ArrivalBaseline = %v must be >= 0", ErrConfig, c.ArrivalBaseline)
	}
	if c.RewardScale < 0 {
		return fmt.Errorf("%w: RewardScale = %v must be >= 0", ErrConfig, c.RewardScale)
	}
	return nil
}

// Agent is the actor (policy network f(o, theta) of paper 002 eq. (8)) and
// the critic (value network V_phi of paper 002 eq. (11)) with their Adam states.
type Agent struct {
	// Cfg is the training configuration.
	Cfg Config
	// Actor computes f(o, theta) (n outputs); Critic computes V_phi(o).
	Actor  *MLP
	Critic *MLP
	// AdamA and AdamC are the optimiser states of the two networks.
	AdamA *Adam
	AdamC *Adam
	// Steps counts the training slots collected so far; Updates the policy
	// updates done.
	Steps   int64
	Updates int64
	// RewardScale is the resolved reward multiplier (see Config.RewardScale).
	RewardScale float64
	// criticInit records that the critic's output bias was set from the
	// first rollout's mean return.
	CriticInit bool
}

// NewAgent builds the networks for observations of size obs and n
// instances, initialised from seed.
func NewAgent(cfg Config, obs, n int, meanArrivalsPerSlot float64, seed uint64) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if obs < 1 || n < 2 {
		return nil, fmt.Errorf("%w: observation size %d and instances %d must be >= 1 and >= 2", ErrConfig, obs, n)
	}
	sa := append(append([]int{obs}, cfg.Hidden...), n)
	sc := append(append([]int{obs}, cfg.Hidden...), 1)
	a, err := NewMLP(sa)
	if err != nil {
		return nil, err
	}
	c, err := NewMLP(sc)
	if err != nil {
		return nil, err
	}
	r := sim.NewRand(seed)
	a.Init(r, 0.01)
	c.Init(r, 1)
	ag := &Agent{Cfg: cfg, Actor: a, Critic: c, AdamA: NewAdam(len(a.P)), AdamC: NewAdam(len(c.P))}
	ag.RewardScale = cfg.RewardScale
	if ag.RewardScale == 0 {
		if !(meanArrivalsPerSlot > 0) {
			return nil, fmt.Errorf("%w: mean arrivals per slot = %v must be > 0 for the automatic reward scale", ErrConfig, meanArrivalsPerSlot)
		}
		ag.RewardScale = (1 - cfg.Gamma) / meanArrivalsPerSlot
	}
	return ag, nil
}

// Batch is a rollout: T slots of observations, actions (as log y), old
// log-densities, rewards, values, and, after GAE, advantages and returns.
type Batch struct {
	Dim, N int       // observation size, number of instances
	T      int       // number of slots
	Obs    []float64 // T*Dim
	LogY   []float64 // T*N
	LogP   []float64 // T
	Rew    []float64 // T, scaled
	Val    []float64 // T+1 (Val[T] = bootstrap value of the final observation)
	Adv    []float64 // T
	Ret    []float64 // T
	Phase  []uint8   // T, hidden phase at the start of each slot (diagnostics only)
	Heavy  []float64 // T, probability mass routed to heavyweight instances (diagnostics)
	RawRew []float64 // T, unscaled reward of paper 002 eq. (2)
}

// NewBatch allocates a batch of T slots.
func NewBatch(T, dim, n int) *Batch {
	return &Batch{Dim: dim, N: n, T: T,
		Obs: make([]float64, T*dim), LogY: make([]float64, T*n), LogP: make([]float64, T),
		Rew: make([]float64, T), Val: make([]float64, T+1), Adv: make([]float64, T), Ret: make([]float64, T),
		Phase: make([]uint8, T), Heavy: make([]float64, T), RawRew: make([]float64, T)}
}

// Rollout runs sys for b.T slots with the stochastic policy (sigma =
// Cfg.Sigma), filling b (Algorithm 1, lines 2-4), then computes the GAE
// advantages and returns. r draws the exploration noise. The agent is only
// read, so several Rollouts on distinct systems and batches may run
// concurrently.
func (a *Agent) Rollout(sys *instances.System, r *rand.Rand, b *Batch) {
	wa, wc := a.Actor.NewWork(), a.Critic.NewWork()
	n := b.N
	y := make([]float64, n)
	heavy := make([]bool, n)
	for i, m := range sys.Config().Instances {
		heavy[i] = m.Heavy
	}
	for t := 0; t < b.T; t++ {
		o := b.Obs[t*b.Dim : (t+1)*b.Dim]
		sys.Observe(o, a.Cfg.FullObs)
		f := a.Actor.Forward(o, wa)
		ly := b.LogY[t*n : (t+1)*n]
		SampleAction(r, f, a.Cfg.Sigma, y, ly)
		b.LogP[t] = LogDensity(f, ly, a.Cfg.Sigma, nil)
		b.Val[t] = a.Critic.Forward(o, wc)[0]
		b.Phase[t] = uint8(sys.Phase())
		h := 0.0
		for i := range y {
			if heavy[i] {
				h += y[i]
			}
		}
		b.Heavy[t] = h
		res := sys.Step(y)
		b.RawRew[t] = res.Reward
		b.Rew[t] = (res.Reward - a.Cfg.ArrivalBaseline*float64(res.Arrivals)) * a.RewardScale
	}
	last := make([]float64, b.Dim)
	sys.Observe(last, a.Cfg.FullObs)
	b.Val[b.T] = a.Critic.Forward(last, wc)[0]
	GAE(b.Rew, b.Val, a.Cfg.Gamma, a.Cfg.Lambda, b.Adv, b.Ret)
}

// GAE computes the generalised advantage estimates of paper 002 eq. (11)
// (Schulman et al. [57]) over one trajectory segment:
//
//	delta_k = r_k + gamma V(o_{k+1}) - V(o_k)
//	A_t     = sum_{k=t}^{T-1} (gamma lambda)^{k-t} delta_k
//
// and the critic targets ret_t = A_t + V(o_t). val has len(rew)+1 entries,
// the last being the bootstrap value of the final observation. (The
// extracted eq. (11) omits gamma in front of V(o^(k+1)); we follow GAE as
// defined in [57], which the paper cites.)
func GAE(rew, val []float64, gamma, lambda float64, adv, ret []float64) {
	T := len(rew)
	acc := 0.0
	for t := T - 1; t >= 0; t-- {
		d := rew[t] + gamma*val[t+1] - val[t]
		acc = d + gamma*lambda*acc
		adv[t] = acc
		ret[t] = acc + val[t]
	}
}

// Merge concatenates batches (for example one per rollout worker) into one,
// keeping each one's advantages and returns.
func Merge(bs []*Batch) *Batch {
	T := 0
	for _, b := range bs {
		T += b.T
	}
	out := NewBatch(T, bs[0].Dim, bs[0].N)
	o := 0
	for _, b := range bs {
		copy(out.Obs[o*b.Dim:], b.Obs)
		copy(out.LogY[o*b.N:], b.LogY)
		copy(out.LogP[o:], b.LogP)
		copy(out.Rew[o:], b.Rew)
		copy(out.Val[o:], b.Val[:b.T])
		copy(out.Adv[o:], b.Adv)
		copy(out.Ret[o:], b.Ret)
		copy(out.Phase[o:], b.Phase)
		copy(out.Heavy[o:], b.Heavy)
		copy(out.RawRew[o:], b.RawRew)
		o += b.T
	}
	return out
}

// NormalizeAdvantages standardises b.Adv in place (zero mean, unit variance).
func NormalizeAdvantages(b *Batch) {
	mean := 0.0
	for _, x := range b.Adv {
		mean += x
	}
	mean /= float64(len(b.Adv))
	v := 0.0
	for _, x := range b.Adv {
		v += (x - mean) * (x - mean)
	}
	sd := math.Sqrt(v/float64(len(b.Adv))) + 1e-8
	for i := range b.Adv {
		b.Adv[i] = (b.Adv[i] - mean) / sd
	}
}

// GradStats summarises one gradient evaluation (sums over the samples; divide
// by the count for means).
type GradStats struct {
	Samples    int     // samples evaluated
	PolicyLoss float64 // sum of -min(rho A, clip(rho) A)
	ValueLoss  float64 // sum of (V - ret)^2
	ApproxKL   float64 // sum of (log pi_old - log pi_new)
	ClipFrac   float64 // number of samples whose ratio left [1-eps, 1+eps]
}

// Add accumulates o.
func (s *GradStats) Add(o GradStats) {
	s.Samples += o.Samples
	s.PolicyLoss += o.PolicyLoss
	s.ValueLoss += o.ValueLoss
	s.ApproxKL += o.ApproxKL
	s.ClipFrac += o.ClipFrac
}

// Scratch is the per-goroutine workspace of Gradient.
type Scratch struct {
	wa, wc *Work
	dF     []float64
	dV     [1]float64
}

// NewScratch allocates a workspace for a.
func (a *Agent) NewScratch() *Scratch {
	return &Scratch{wa: a.Actor.NewWork(), wc: a.Critic.NewWork(), dF: make([]float64, a.Actor.Out())}
}

// Gradient accumulates into gA and gC the gradients of the PPO losses over
// the samples idx of b, each divided by denom (the mini-batch size):
//
//	actor:  L_A = -(1/denom) sum_t min(rho_t A_t, C_eps(rho_t) A_t),
//	        rho_t = pi_theta(a_t|o_t)/pi_old(a_t|o_t), paper 002 eq. (10) negated,
//	critic: L_C = (1/denom) sum_t (V_phi(o_t) - ret_t)^2, Algorithm 1 line 7
//	        (ret_t = V_phi*(o_t) + A_t with the unnormalised A_t).
//
// It only reads the agent's parameters: disjoint index sets can be evaluated
// concurrently into distinct gradient buffers and summed.
func (a *Agent) Gradient(b *Batch, idx []int, denom float64, gA, gC []float64, s *Scratch) GradStats {
	var st GradStats
	eps := a.Cfg.ClipEps
	n := b.N
	for _, t := range idx {
		o := b.Obs[t*b.Dim : (t+1)*b.Dim]
		f := a.Actor.Forward(o, s.wa)
		lp := LogDensity(f, b.LogY[t*n:(t+1)*n], a.Cfg.Sigma, s.dF)
		diff := lp - b.LogP[t]
		ratio := math.Exp(diff)
		A := b.Adv[t]
		surr1 := ratio * A
		cr := math.Min(math.Max(ratio, 1-eps), 1+eps)
		surr2 := cr * A
		st.ApproxKL += -diff
		if ratio < 1-eps || ratio > 1+eps {
			st.ClipFrac++
		}
		if surr1 <= surr2 {
			st.PolicyLoss -= surr1
			// d(-ratio*A)/dlp = -ratio*A
			g := -ratio * A / denom
			for i := range s.dF {
				s.dF[i] *= g
			}
			a.Actor.Backward(s.dF, s.wa, gA)
		} else {
			st.PolicyLoss -= surr2 // constant in theta: no gradient
		}
		v := a.Critic.Forward(o, s.wc)[0]
		e := v - b.Ret[t]
		st.ValueLoss += e * e
		s.dV[0] = 2 * e / denom
		a.Critic.Backward(s.dV[:], s.wc, gC)
		st.Samples++
	}
	return st
}

// Loss evaluates the two losses of Gradient (without gradients); used by the
// gradient checks.
func (a *Agent) Loss(b *Batch, idx []int, denom float64) (actor, critic float64) {
	s := a.NewScratch()
	eps := a.Cfg.ClipEps
	n := b.N
	for _, t := range idx {
		o := b.Obs[t*b.Dim : (t+1)*b.Dim]
		f := a.Actor.Forward(o, s.wa)
		lp := LogDensity(f, b.LogY[t*n:(t+1)*n], a.Cfg.Sigma, nil)
		ratio := math.Exp(lp - b.LogP[t])
		A := b.Adv[t]
		cr := math.Min(math.Max(ratio, 1-eps), 1+eps)
		actor -= math.Min(ratio*A, cr*A) / denom
		v := a.Critic.Forward(o, s.wc)[0]
		critic += (v - b.Ret[t]) * (v - b.Ret[t]) / denom
	}
	return actor, critic
}

// GradFunc evaluates the gradients of the mini-batch idx (see Gradient) into
// zeroed gA and gC. The trainer may supply a parallel implementation.
type GradFunc func(b *Batch, idx []int, gA, gC []float64) GradStats

// UpdateStats summarises one policy update.
type UpdateStats struct {
	GradStats
	Steps int // mini-batch steps taken
}

// Update trains the actor and the critic on b (Algorithm 1, lines 5-8):
// Epochs passes, each over a random permutation split into mini-batches of
// Cfg.Minibatch samples (a trailing partial mini-batch is dropped), one Adam
// step per mini-batch. grad computes each mini-batch's gradients; nil means
// the serial Gradient. r shuffles the samples.
func (a *Agent) Update(b *Batch, r *rand.Rand, grad GradFunc) UpdateStats {
	if grad == nil {
		s := a.NewScratch()
		grad = func(b *Batch, idx []int, gA, gC []float64) GradStats {
			return a.Gradient(b, idx, float64(len(idx)), gA, gC, s)
		}
	}
	if a.Cfg.NormalizeAdv {
		NormalizeAdvantages(b)
	}
	if !a.CriticInit {
		// Start the critic's output at the mean return so that it does not
		// spend its first updates only learning the level.
		m := 0.0
		for _, x := range b.Ret {
			m += x
		}
		c := a.Critic
		c.P[c.bOff[len(c.bOff)-1]] = m / float64(len(b.Ret))
		a.CriticInit = true
	}
	gA := make([]float64, len(a.Actor.P))
	gC := make([]float64, len(a.Critic.P))
	perm := make([]int, b.T)
	mb := a.Cfg.Minibatch
	if mb > b.T {
		mb = b.T
	}
	var us UpdateStats
	for ep := 0; ep < a.Cfg.Epochs; ep++ {
		for i := range perm {
			perm[i] = i
		}
		r.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		for s := 0; s+mb <= b.T; s += mb {
			clear(gA)
			clear(gC)
			st := grad(b, perm[s:s+mb], gA, gC)
			us.GradStats.Add(st)
			if a.Cfg.MaxGradNorm > 0 {
				ClipNorm(gA, a.Cfg.MaxGradNorm)
				ClipNorm(gC, a.Cfg.MaxGradNorm)
			}
			a.AdamA.Step(a.Actor.P, gA, a.Cfg)
			a.AdamC.Step(a.Critic.P, gC, a.Cfg)
			us.Steps++
		}
	}
	a.Updates++
	return us
}

// ClipNorm scales g so that its L2 norm is at most max; it returns the norm
// before clipping.
func ClipNorm(g []float64, max float64) float64 {
	s := 0.0
	for _, x := range g {
		s += x * x
	}
	nrm := math.Sqrt(s)
	if nrm > max {
		f := max / nrm
		for i := range g {
			g[i] *= f
		}
	}
	return nrm
}

// Adam is the optimiser of Kingma and Ba [68] (paper 002 Sec. 5.1.5), for
// gradient descent on a loss.
type Adam struct {
	// M and V are the first and second moment estimates.
	M, V []float64
	// T is the number of steps taken.
	T int64
}

// NewAdam allocates the moment vectors for n parameters.
func NewAdam(n int) *Adam { return &Adam{M: make([]float64, n), V: make([]float64, n)} }

// Step applies one Adam update p -= lr * mhat/(sqrt(vhat)+eps) for gradient
// g, with the bias-corrected moments.
func (o *Adam) Step(p, g []float64, c Config) {
	o.T++
	b1, b2 := c.AdamBeta1, c.AdamBeta2
	c1 := 1 - math.Pow(b1, float64(o.T))
	c2 := 1 - math.Pow(b2, float64(o.T))
	lr := c.LR * math.Sqrt(c2) / c1
	for i := range p {
		o.M[i] = b1*o.M[i] + (1-b1)*g[i]
		o.V[i] = b2*o.V[i] + (1-b2)*g[i]*g[i]
		p[i] -= lr * o.M[i] / (math.Sqrt(o.V[i]) + c.AdamEps*math.Sqrt(c2))
	}
}

// Act writes the deterministic action softmax(f(o)) (sigma = 0, Sec. 5.1.6)
// for observation o into y. w is scratch space from a.Actor.NewWork().
func (a *Agent) Act(o []float64, w *Work, y, logY []float64) {
	f := a.Actor.Forward(o, w)
	SampleAction(nil, f, 0, y, logY)
}
