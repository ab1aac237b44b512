package instances

import (
	"fmt"
	"math/rand/v2"

	"github.com/idn-net/idn/policy/sim"
)

// SingleQueue is the SQ baseline of paper 002 Sec. 5.1.7: one FIFO queue in
// front of all the model instances; a free instance takes the head of the
// queue. An arrival that finds idle instances goes straight to one of them,
// a heavyweight one if any is idle (the paper: "if there are two idle model
// instances, respectively, of PNASNet and EfficientNet, then the upcoming
// arrival will be served by the model instance of PNASNet").
//
// Reading chosen: the system holds at most n*c requests (in service plus
// waiting), the same total buffer as the probabilistic framework; beyond it
// arrivals are rejected.
type SingleQueue struct {
	cfg  Config
	w    Workload
	r    *rand.Rand
	now  float64
	busy []float64 // completion time of the request in service, or -1 if idle
	barr []float64 // its arrival time
	bph  []uint8
	// central FIFO ring
	qa   []float64
	qp   []uint8
	head int
	n    int
	m    Metrics
}

// NewSingleQueue builds the SQ baseline's system.
func NewSingleQueue(cfg Config, w Workload, seed uint64) (*SingleQueue, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if w == nil {
		return nil, fmt.Errorf("%w: workload is nil", ErrConfig)
	}
	n := len(cfg.Instances)
	s := &SingleQueue{cfg: cfg, w: w, busy: make([]float64, n), barr: make([]float64, n), bph: make([]uint8, n),
		qa: make([]float64, n*cfg.Capacity), qp: make([]uint8, n*cfg.Capacity)}
	s.r = sim.NewRand(seed)
	for i := range s.busy {
		s.busy[i] = -1
	}
	w.Reset(s.r)
	s.m = Metrics{Phase: make([]PhaseMetrics, w.Phases())}
	return s, nil
}

// Metrics returns a copy of the accumulated metrics.
func (s *SingleQueue) Metrics() Metrics {
	return Metrics{Phase: append([]PhaseMetrics(nil), s.m.Phase...), Duration: s.now}
}

// ResetMetrics zeroes the counters.
func (s *SingleQueue) ResetMetrics() {
	for i := range s.m.Phase {
		s.m.Phase[i] = PhaseMetrics{}
	}
}

// InSystem is the number of requests in service or waiting.
func (s *SingleQueue) InSystem() int {
	k := s.n
	for _, b := range s.busy {
		if b >= 0 {
			k++
		}
	}
	return k
}

// Run simulates dur seconds.
func (s *SingleQueue) Run(dur float64) {
	end := s.now + dur
	for {
		t, ok, ph := s.w.Next(s.r, s.now, end)
		if !ok {
			break
		}
		s.complete(t)
		s.now = t
		s.arrive(t, ph)
	}
	s.complete(end)
	s.now = end
	s.m.Duration = end
}

// complete processes service completions up to and including time t, in
// time order, pulling waiting requests into freed instances.
func (s *SingleQueue) complete(t float64) {
	for {
		k := -1
		for i, b := range s.busy {
			if b >= 0 && b <= t && (k < 0 || b < s.busy[k]) {
				k = i
			}
		}
		if k < 0 {
			return
		}
		fin := s.busy[k]
		mdl := &s.cfg.Instances[k]
		pm := &s.m.Phase[s.bph[k]]
		pm.Completed++
		if fin-s.barr[k] > s.cfg.Deadline+1e-12 {
			pm.Delayed++
		} else {
			pm.OnTime++
			pm.Goodput += mdl.Accuracy
		}
		s.busy[k] = -1
		if s.n > 0 {
			a, p := s.qa[s.head], s.qp[s.head]
			s.head++
			if s.head == len(s.qa) {
				s.head = 0
			}
			s.n--
			s.start(k, fin, a, p)
		}
	}
}

func (s *SingleQueue) start(k int, t, arr float64, ph uint8) {
	s.busy[k] = t + s.cfg.Instances[k].Service
	s.barr[k] = arr
	s.bph[k] = ph
	if s.cfg.Instances[k].Heavy {
		s.m.Phase[ph].Heavy++
	}
}

func (s *SingleQueue) arrive(t float64, phase int) {
	pm := &s.m.Phase[phase]
	pm.Arrivals++
	idle := -1
	for i, b := range s.busy {
		if b < 0 && (idle < 0 || (s.cfg.Instances[i].Heavy && !s.cfg.Instances[idle].Heavy)) {
			idle = i
		}
	}
	if idle >= 0 {
		s.start(idle, t, t, uint8(phase))
		return
	}
	if s.n+len(s.busy) >= len(s.qa) {
		pm.Rejected++
		return
	}
	k := s.head + s.n
	if k >= len(s.qa) {
		k -= len(s.qa)
	}
	s.qa[k], s.qp[k] = t, uint8(phase)
	s.n++
}
