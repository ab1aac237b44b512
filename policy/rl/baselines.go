package rl

import (
	"fmt"
	"math"

	"github.com/idn-net/idn/policy/sim/instances"
)

// Scheduler chooses the routing distribution at every decision epoch (paper
// 002 Sec. 3.1.4: probabilistic routing with a distribution fixed for each
// time slot). A Scheduler may keep scratch space: use one per goroutine.
type Scheduler interface {
	// Name labels the approach in tables.
	Name() string
	// Interval is the decision period in seconds (tau, or 0.1 s for InFaaS).
	Interval(cfg instances.Config) float64
	// Act writes the distribution for the next period into y.
	Act(sys *instances.System, y []float64)
}

// Fixed routes with the same distribution in every slot. With uniform
// weights on an all-lightweight or all-heavyweight system it is the LW, HW
// and HW-E baselines of paper 002 Sec. 5.1.7 ("scheduled with fairness
// among the model instances").
type Fixed struct {
	// Label names the approach (LW, HW, HW-E).
	Label string
	// Weights is the routing distribution used in every slot.
	Weights []float64
}

// Name implements Scheduler.
func (f *Fixed) Name() string { return f.Label }

// Interval implements Scheduler.
func (f *Fixed) Interval(cfg instances.Config) float64 { return cfg.Slot }

// Act implements Scheduler.
func (f *Fixed) Act(_ *instances.System, y []float64) { copy(y, f.Weights) }

// Uniform returns equal weights over n instances.
func Uniform(n int) []float64 {
	w := make([]float64, n)
	for i := range w {
		w[i] = 1 / float64(n)
	}
	return w
}

// InFaaS is the InFaaS-like baseline of paper 002 Sec. 5.1.7: 0.1 s slots;
// in each slot the requests are spread evenly ("load balancing") over the
// instances that are not overloaded, so that no instance stays overloaded.
//
// Reading chosen (the paper gives no more detail): an instance is overloaded
// when a request sent to it now would miss the deadline, i.e. its backlog
// plus one service time exceeds it; when every instance is overloaded the
// requests are spread over all of them.
type InFaaS struct {
	// Period is the slot duration (0.1 s in the paper).
	Period float64
}

// Name implements Scheduler.
func (f *InFaaS) Name() string { return "InFaaS" }

// Interval implements Scheduler.
func (f *InFaaS) Interval(instances.Config) float64 { return f.Period }

// Act implements Scheduler.
func (f *InFaaS) Act(sys *instances.System, y []float64) {
	cfg := sys.Config()
	k := 0
	for i := range y {
		if sys.Backlog(i)+cfg.Instances[i].Service <= cfg.Deadline {
			y[i] = 1
			k++
		} else {
			y[i] = 0
		}
	}
	if k == 0 {
		for i := range y {
			y[i] = 1
		}
		k = len(y)
	}
	for i := range y {
		y[i] /= float64(k)
	}
}

// SA is the stationary-approximation baseline of paper 002 Sec. 5.1.7 and
// Appendix F: it observes the workload phase and, per phase, uses the
// routing distribution computed by StationaryApprox.
type SA struct {
	// PerPhase[h] is the distribution used in phase h.
	PerPhase [][]float64
}

// Name implements Scheduler.
func (s *SA) Name() string { return "SA" }

// Interval implements Scheduler.
func (s *SA) Interval(cfg instances.Config) float64 { return cfg.Slot }

// Act implements Scheduler.
func (s *SA) Act(sys *instances.System, y []float64) { copy(y, s.PerPhase[sys.Phase()]) }

// MD1WaitCDF is P(W <= t) for the waiting time W of an M/D/1 queue with
// arrival rate lambda and service time d (Erlang's formula, see Franx [69]
// cited by paper 002):
//
//	P(W <= t) = (1 - rho) sum_{k=0}^{floor(t/d)} (lambda (k d - t))^k / k! e^{-lambda (k d - t)},
//
// rho = lambda d < 1. The alternating sum loses precision when lambda*t is
// large (about 1e-16 e^{lambda t}); for lambda t <= 30 the error is below
// 1e-3.
func MD1WaitCDF(lambda, d, t float64) float64 {
	rho := lambda * d
	if rho >= 1 {
		return 0
	}
	if t < 0 {
		return 0
	}
	if lambda == 0 {
		return 1
	}
	s := 0.0
	K := int(math.Floor(t / d))
	for k := 0; k <= K; k++ {
		x := lambda * (float64(k)*d - t) // <= 0
		lg, _ := math.Lgamma(float64(k + 1))
		var term float64
		if k == 0 {
			term = math.Exp(-x)
		} else {
			mag := math.Exp(float64(k)*math.Log(-x) - lg - x)
			if k%2 == 1 {
				term = -mag
			} else {
				term = mag
			}
		}
		s += term
	}
	p := (1 - rho) * s
	return math.Min(1, math.Max(0, p))
}

// StationaryApprox computes the SA baseline's per-phase routing (paper 002
// Sec. 5.1.7, Appendix F): in each phase h with arrival rate lambda_h, send a
// fraction p to the heavyweight instances and 1-p to the lightweight ones
// (evenly within each group), treat every instance as an M/D/1 queue, and
// take the largest p (maximising heavyweight utilisation) such that the
// fraction of requests whose sojourn exceeds the deadline,
// p P(W_H > D - s_H) + (1-p) P(W_L > D - s_L), is at most target (0.02 for
// a P98 requirement). The finite buffers are ignored (the approximation).
// If no p is feasible, the p minimising the violation fraction on a grid is
// used.
func StationaryApprox(cfg instances.Config, w instances.Workload, target float64) (*SA, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !(target > 0 && target < 1) {
		return nil, fmt.Errorf("%w: SA target violation ratio = %v must be in (0,1)", ErrConfig, target)
	}
	var hv, lt []int
	for i, m := range cfg.Instances {
		if m.Heavy {
			hv = append(hv, i)
		} else {
			lt = append(lt, i)
		}
	}
	if len(hv) == 0 || len(lt) == 0 {
		return nil, fmt.Errorf("%w: SA needs heavyweight and lightweight instances (got %d and %d)", ErrConfig, len(hv), len(lt))
	}
	sH, sL := cfg.Instances[hv[0]].Service, cfg.Instances[lt[0]].Service
	viol := func(lambda, p float64) float64 {
		lh := p * lambda / float64(len(hv))
		ll := (1 - p) * lambda / float64(len(lt))
		vh := 1 - MD1WaitCDF(lh, sH, cfg.Deadline-sH)
		vl := 1 - MD1WaitCDF(ll, sL, cfg.Deadline-sL)
		if lh*sH >= 1 {
			vh = 1
		}
		if ll*sL >= 1 {
			vl = 1
		}
		return p*vh + (1-p)*vl
	}
	sa := &SA{}
	const grid = 10000
	for h := 0; h < w.Phases(); h++ {
		lambda := w.PhaseRate(h)
		best := -1.0
		minP, minV := 0.0, math.Inf(1)
		for g := 0; g <= grid; g++ {
			p := float64(g) / grid
			v := viol(lambda, p)
			if v <= target {
				best = p
			}
			if v < minV {
				minP, minV = p, v
			}
		}
		if best < 0 {
			best = minP
		}
		y := make([]float64, len(cfg.Instances))
		for _, i := range hv {
			y[i] = best / float64(len(hv))
		}
		for _, i := range lt {
			y[i] = (1 - best) / float64(len(lt))
		}
		sa.PerPhase = append(sa.PerPhase, y)
	}
	return sa, nil
}

// Policy is a trained agent acting deterministically (sigma = 0, paper 002
// Sec. 5.1.6): RL-PO, or RL-FO when the agent observes the phase.
type Policy struct {
	// Label names the approach (RL-PO, RL-FO).
	Label string
	// Agent is the trained actor (the critic is unused here).
	Agent *Agent
	obs   []float64
	logY  []float64
	work  *Work
}

// NewPolicy wraps an agent for evaluation.
func NewPolicy(label string, a *Agent) *Policy {
	return &Policy{Label: label, Agent: a, obs: make([]float64, a.Actor.In()), logY: make([]float64, a.Actor.Out()), work: a.Actor.NewWork()}
}

// Name implements Scheduler.
func (p *Policy) Name() string { return p.Label }

// Interval implements Scheduler.
func (p *Policy) Interval(cfg instances.Config) float64 { return cfg.Slot }

// Act implements Scheduler.
func (p *Policy) Act(sys *instances.System, y []float64) {
	sys.Observe(p.obs, p.Agent.Cfg.FullObs)
	p.Agent.Act(p.obs, p.work, y, p.logY)
}

// Run simulates sys under sched for the given simulated duration (seconds)
// and returns the metrics.
func Run(sys *instances.System, sched Scheduler, duration float64) instances.Metrics {
	dt := sched.Interval(sys.Config())
	y := make([]float64, sys.N())
	steps := int(math.Round(duration / dt))
	for k := 0; k < steps; k++ {
		sched.Act(sys, y)
		sys.StepFor(y, dt)
	}
	return sys.Metrics()
}
