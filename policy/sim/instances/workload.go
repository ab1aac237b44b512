package instances

import (
	"fmt"
	"math/rand/v2"

	"github.com/idn-net/idn/policy/sim"
)

// Workload is an arrival process with a hidden state ("phase") that the
// simulator samples event by event. It is stateful; Reset starts a new,
// independent realisation.
//
// Next must be memoryless at the horizon: when no arrival happens before
// horizon it returns (horizon, false, _) and the process continues from
// horizon as if it had been sampled from there. MAPs and piecewise-constant
// Poisson processes satisfy this exactly, which is what lets the simulator
// observe the phase at slot boundaries without look-ahead.
type Workload interface {
	// Reset draws the initial state at time 0.
	Reset(r *rand.Rand)
	// Next returns the time of the next arrival after t if it happens before
	// horizon (arrived = true, phase = the phase the arrival happened in),
	// otherwise (horizon, false, current phase).
	Next(r *rand.Rand, t, horizon float64) (tn float64, arrived bool, phase int)
	// Phase is the current hidden state.
	Phase() int
	// Phases is the number of hidden states.
	Phases() int
	// PhaseRate is the arrival rate while in phase i (used for labels and by
	// the SA baseline).
	PhaseRate(i int) float64
	// MeanRate is the long-run arrival rate.
	MeanRate() float64
}

// MAPWorkload samples a Markovian arrival process (D0, D1) exactly, one CTMC
// event at a time (paper 002 Sec. 3.1.2). The initial phase is drawn from the
// stationary distribution (Sec. 5.1.2).
type MAPWorkload struct {
	m     *sim.MAP
	exit  []float64
	pi    []float64
	phase int
}

// NewMAPWorkload wraps a validated MAP.
func NewMAPWorkload(m *sim.MAP) *MAPWorkload {
	n := m.Phases()
	w := &MAPWorkload{m: m, exit: make([]float64, n), pi: m.Stationary()}
	for i := 0; i < n; i++ {
		w.exit[i] = -m.D0[i][i]
	}
	return w
}

// SPPWorkload is the switched Poisson process of paper 002 eq. (12) (with the
// D0[1][0] = 0.002 reading documented at sim.SPP): phase 0 is the bursty
// state (180 req/s), phase 1 the normal state (10 req/s).
func SPPWorkload() *MAPWorkload { return NewMAPWorkload(sim.SPP()) }

// Reset implements Workload.
func (w *MAPWorkload) Reset(r *rand.Rand) {
	u := r.Float64()
	w.phase = len(w.pi) - 1
	for i, p := range w.pi {
		u -= p
		if u < 0 {
			w.phase = i
			break
		}
	}
}

// Next implements Workload.
func (w *MAPWorkload) Next(r *rand.Rand, t, horizon float64) (float64, bool, int) {
	for {
		i := w.phase
		t += r.ExpFloat64() / w.exit[i]
		if t >= horizon {
			return horizon, false, i
		}
		u := r.Float64() * w.exit[i]
		d0, d1 := w.m.D0[i], w.m.D1[i]
		moved := false
		for j := range d0 {
			if j == i {
				continue
			}
			if u < d0[j] {
				w.phase = j
				moved = true
				break
			}
			u -= d0[j]
		}
		if moved {
			continue
		}
		for j := range d1 {
			if u < d1[j] || j == len(d1)-1 {
				w.phase = j
				break
			}
			u -= d1[j]
		}
		return t, true, i
	}
}

// Phase implements Workload.
func (w *MAPWorkload) Phase() int { return w.phase }

// Phases implements Workload.
func (w *MAPWorkload) Phases() int { return len(w.exit) }

// PhaseRate implements Workload: the total arrival rate of row i of D1.
func (w *MAPWorkload) PhaseRate(i int) float64 {
	s := 0.0
	for _, x := range w.m.D1[i] {
		s += x
	}
	return s
}

// MeanRate implements Workload: pi D1 1.
func (w *MAPWorkload) MeanRate() float64 { return w.m.Rate() }

// Stationary is the stationary phase distribution.
func (w *MAPWorkload) Stationary() []float64 { return append([]float64(nil), w.pi...) }

// PeriodicWorkload is the non-Markovian workload of paper 002 Sec. 5.2.3: a
// Poisson process whose rate is Low for a fixed LowFor seconds and then High
// for HighFor seconds, periodically. Phase 0 is the high-rate (bursty) state
// and phase 1 the low-rate (normal) state, matching the SPP's numbering. The
// offset into the period at time 0 is drawn uniformly (a stationary start).
type PeriodicWorkload struct {
	// High and Low are the arrival rates (req/s) of the bursty and normal
	// parts of the period.
	High, Low float64
	// HighFor and LowFor are their durations in seconds.
	HighFor, LowFor float64

	offset     float64 // position in the period at time 0
	phase      int
	nextSwitch float64
}

// NonMarkovian returns the periodic workload of paper 002 Sec. 5.2.3 with
// the SPP's rates (180 and 10 req/s) and its mean sojourn times as fixed
// durations (1/0.036 s bursty, 1/0.002 s normal).
func NonMarkovian() *PeriodicWorkload {
	return &PeriodicWorkload{High: 180, Low: 10, HighFor: 1 / 0.036, LowFor: 1 / 0.002}
}

// Validate checks the rates and durations.
func (w *PeriodicWorkload) Validate() error {
	if !(w.High > 0) || !(w.Low > 0) {
		return fmt.Errorf("%w: periodic workload rates High = %v, Low = %v must be > 0", ErrConfig, w.High, w.Low)
	}
	if !(w.HighFor > 0) || !(w.LowFor > 0) {
		return fmt.Errorf("%w: periodic workload durations HighFor = %v, LowFor = %v must be > 0", ErrConfig, w.HighFor, w.LowFor)
	}
	return nil
}

// Reset implements Workload.
func (w *PeriodicWorkload) Reset(r *rand.Rand) {
	period := w.HighFor + w.LowFor
	w.offset = r.Float64() * period
	// The period starts with the low (normal) part, then the high part.
	if w.offset < w.LowFor {
		w.phase = 1
		w.nextSwitch = w.LowFor - w.offset
	} else {
		w.phase = 0
		w.nextSwitch = period - w.offset
	}
}

// Next implements Workload.
func (w *PeriodicWorkload) Next(r *rand.Rand, t, horizon float64) (float64, bool, int) {
	for {
		rate := w.Low
		if w.phase == 0 {
			rate = w.High
		}
		tn := t + r.ExpFloat64()/rate
		if tn < w.nextSwitch && tn < horizon {
			return tn, true, w.phase
		}
		if w.nextSwitch <= horizon && w.nextSwitch <= tn {
			t = w.nextSwitch
			if w.phase == 0 {
				w.phase = 1
				w.nextSwitch += w.LowFor
			} else {
				w.phase = 0
				w.nextSwitch += w.HighFor
			}
			continue
		}
		return horizon, false, w.phase
	}
}

// Phase implements Workload.
func (w *PeriodicWorkload) Phase() int { return w.phase }

// Phases implements Workload.
func (w *PeriodicWorkload) Phases() int { return 2 }

// PhaseRate implements Workload.
func (w *PeriodicWorkload) PhaseRate(i int) float64 {
	if i == 0 {
		return w.High
	}
	return w.Low
}

// MeanRate implements Workload.
func (w *PeriodicWorkload) MeanRate() float64 {
	return (w.High*w.HighFor + w.Low*w.LowFor) / (w.HighFor + w.LowFor)
}
