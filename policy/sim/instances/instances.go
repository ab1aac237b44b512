// Package instances simulates the edge inference serving system of paper 002
// (Tan et al., "Reinforcement learning based online request scheduling
// framework for workload-adaptive edge deep learning inference", TMC 2024):
// n model instances, each a FIFO single-server queue with a finite buffer of
// c requests (including the one in service) and a deterministic service time,
// fed by a probabilistic router whose distribution is fixed for each time slot
// of length tau (Sec. 3.1). Arrivals come from a Workload (a MAP such as the
// SPP of eq. (12), or the periodic non-Markovian process of Sec. 5.2.3).
//
// The simulator is pure and deterministic given its seed: no goroutines, no
// I/O, no wall clock.
//
// Because service is deterministic and FIFO, the completion time of a request
// is fixed when it is enqueued (max(now, tail) + s). The simulator exploits
// that: it needs no event heap, only a ring buffer per instance, and it
// retires completed requests lazily before each arrival and at each slot
// boundary. Completions are credited to the slot in which they happen, as
// eq. (2) requires.
package instances

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/idn-net/idn/policy/sim"
)

// Model describes one model instance type.
type Model struct {
	// Name is a label ("PNASNet-5-Large", "EfficientNet-B0").
	Name string
	// Service is the deterministic service time in seconds.
	Service float64
	// Accuracy is the validation accuracy g_i in [0, 1] of paper 002 eq. (2).
	Accuracy float64
	// Heavy marks the heavyweight model (for the HWSR metric).
	Heavy bool
}

// Heavyweight is the PNASNet-5-Large-like instance of paper 002 Sec. 5.1.1.
//
// Service time reading (the paper gives none): HW in Table 2 rejects 48.11%
// of the bursty-state requests while its four instances are saturated, so
// 4/s = (1-0.4811)*180 req/s, s = 42.8 ms; we take 43 ms. This also makes a
// one-slot misrouting at the start of a burst cost about 3% of the burst's
// requests, the bursty-state VR of RL-PO in Table 2.
func Heavyweight() Model {
	return Model{Name: "PNASNet-5-Large", Service: 0.043, Accuracy: 0.8278, Heavy: true}
}

// Lightweight is the EfficientNet-B0-like instance of paper 002 Sec. 5.1.1.
//
// Service time reading: LW in Table 2 has zero violations in the bursty state
// (45 req/s per instance with a 15-request buffer and the 300 ms P98 target),
// and SQ has zero violations with two instances of each model, which needs
// 2/s_L + 2/s_H > 180 req/s, so s_L < 15 ms; RL-PO sends ~87% of 180 req/s to
// the two lightweight instances, 78 req/s each, which needs s_L well under
// 12.8 ms. We take 10 ms (a plausible batch-1 EfficientNet-B0 latency on a
// T4).
func Lightweight() Model {
	return Model{Name: "EfficientNet-B0", Service: 0.010, Accuracy: 0.7769, Heavy: false}
}

// Config is the serving system of paper 002 Sec. 3.1 and 5.1.
type Config struct {
	// Instances lists the model instances (n = len(Instances)).
	Instances []Model
	// Capacity is the buffer capacity c of every instance, including the
	// request in service (Sec. 3.1.3).
	Capacity int
	// Deadline is the required time of the tail latency requirement in
	// seconds (P98 of 300 ms in Sec. 5.1.3).
	Deadline float64
	// Slot is the time slot duration tau in seconds.
	Slot float64
	// Alpha and Beta weigh rejections and goodput in the reward of paper 002
	// eq. (2).
	Alpha, Beta float64
	// EagerReject rejects a request on arrival when its (deterministic)
	// completion would miss the deadline: the HW-E baseline's proactive
	// rejection of requests that will inevitably miss it (Sec. 5.1.7).
	EagerReject bool
}

// DefaultConfig is the setting of paper 002 Sec. 5.1: two heavyweight and two
// lightweight instances (indices 0,1 heavy; 2,3 light), c = 15, 300 ms,
// tau = 1 s, alpha = beta = 1.
func DefaultConfig() Config {
	return Config{
		Instances: []Model{Heavyweight(), Heavyweight(), Lightweight(), Lightweight()},
		Capacity:  15,
		Deadline:  0.300,
		Slot:      1,
		Alpha:     1,
		Beta:      1,
	}
}

// MaxCapacity bounds Capacity (the ring buffers and observation padding).
const MaxCapacity = 64

// ErrConfig is wrapped by every Config validation error.
var ErrConfig = errors.New("invalid instances config")

// Validate checks every field.
func (c Config) Validate() error {
	if len(c.Instances) == 0 {
		return fmt.Errorf("%w: Instances is empty", ErrConfig)
	}
	for i, m := range c.Instances {
		if !(m.Service > 0) || math.IsInf(m.Service, 0) {
			return fmt.Errorf("%w: Instances[%d].Service = %v must be > 0 and finite", ErrConfig, i, m.Service)
		}
		if !(m.Accuracy >= 0 && m.Accuracy <= 1) {
			return fmt.Errorf("%w: Instances[%d].Accuracy = %v must be in [0,1]", ErrConfig, i, m.Accuracy)
		}
	}
	if c.Capacity < 1 || c.Capacity > MaxCapacity {
		return fmt.Errorf("%w: Capacity = %d must be in [1,%d]", ErrConfig, c.Capacity, MaxCapacity)
	}
	if !(c.Deadline > 0) {
		return fmt.Errorf("%w: Deadline = %v must be > 0", ErrConfig, c.Deadline)
	}
	if !(c.Slot > 0) || math.IsInf(c.Slot, 0) {
		return fmt.Errorf("%w: Slot = %v must be > 0 and finite", ErrConfig, c.Slot)
	}
	if !(c.Alpha > 0) || !(c.Beta > 0) {
		return fmt.Errorf("%w: Alpha = %v and Beta = %v must be > 0", ErrConfig, c.Alpha, c.Beta)
	}
	return nil
}

// PhaseMetrics counts the fate of the requests that arrived in one workload
// phase (paper 002 Sec. 5.1.8 reports them per workload state).
type PhaseMetrics struct {
	Arrivals  int64   // requests that arrived
	OnTime    int64   // completed within the deadline
	Goodput   float64 // sum of the accuracies of the on-time completions (expected correct)
	Delayed   int64   // completed after the deadline
	Rejected  int64   // rejected (buffer full, or proactive rejection)
	Heavy     int64   // scheduled to a heavyweight instance
	Completed int64   // OnTime + Delayed
	Time      float64 // seconds spent in this phase (sampled at slot boundaries, see Metrics)
}

// Add accumulates o into m.
func (m *PhaseMetrics) Add(o PhaseMetrics) {
	m.Arrivals += o.Arrivals
	m.OnTime += o.OnTime
	m.Goodput += o.Goodput
	m.Delayed += o.Delayed
	m.Rejected += o.Rejected
	m.Heavy += o.Heavy
	m.Completed += o.Completed
	m.Time += o.Time
}

// GoodputRatio is the proportion of arrivals correctly classified within the
// deadline (expected over the model accuracies), Sec. 5.1.8.
func (m PhaseMetrics) GoodputRatio() float64 { return ratio(m.Goodput, float64(m.Arrivals)) }

// ViolationRatio is (delayed + rejected) / arrivals, Sec. 5.1.8.
func (m PhaseMetrics) ViolationRatio() float64 {
	return ratio(float64(m.Delayed+m.Rejected), float64(m.Arrivals))
}

// RejectRatio is rejected / arrivals.
func (m PhaseMetrics) RejectRatio() float64 { return ratio(float64(m.Rejected), float64(m.Arrivals)) }

// DelayRatio is delayed / arrivals.
func (m PhaseMetrics) DelayRatio() float64 { return ratio(float64(m.Delayed), float64(m.Arrivals)) }

// HeavyRatio is the heavyweight model scheduling ratio (HWSR): requests sent
// to heavyweight instances / arrivals.
func (m PhaseMetrics) HeavyRatio() float64 { return ratio(float64(m.Heavy), float64(m.Arrivals)) }

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// Metrics holds per-phase counters (indexed by the phase a request arrived
// in) and their total.
type Metrics struct {
	// Phase[h] counts the requests that arrived in phase h.
	Phase []PhaseMetrics
	// Duration is the simulated time.
	Duration float64
}

// Total sums the phases.
func (m Metrics) Total() PhaseMetrics {
	var t PhaseMetrics
	for _, p := range m.Phase {
		t.Add(p)
	}
	return t
}

// SlotResult is what one slot produced: the reward of paper 002 eq. (2) and
// its terms.
type SlotResult struct {
	// Reward is r = -v - alpha*b + beta*sum_i g_i nu_i, paper 002 eq. (2).
	Reward float64
	// Delayed is v: completions in the slot that missed the deadline.
	Delayed int
	// Rejected is b: requests rejected in the slot.
	Rejected int
	// OnTime is sum_i nu_i.
	OnTime int
	// Arrivals in the slot.
	Arrivals int
	// Phase is the workload phase at the start of the slot.
	Phase int
}

type queue struct {
	arr  [MaxCapacity]float64 // arrival times, FIFO ring
	fin  [MaxCapacity]float64 // completion times
	ph   [MaxCapacity]uint8   // arrival phase
	head int
	n    int
	tail float64 // completion time of the last enqueued request
}

// System is one simulated serving system. It is not safe for concurrent use;
// run one System per goroutine.
type System struct {
	cfg   Config
	w     Workload
	r     *rand.Rand
	q     []queue
	now   float64
	nextT float64 // time of the pending arrival, or -1 if none sampled
	nextP int
	m     Metrics
	slot  SlotResult
	cum   []float64 // routing CDF of the current action
}

// New builds a System; seed fixes the whole realisation.
func New(cfg Config, w Workload, seed uint64) (*System, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if w == nil {
		return nil, fmt.Errorf("%w: workload is nil", ErrConfig)
	}
	if w.Phases() > 255 {
		return nil, fmt.Errorf("%w: workload has %d phases, at most 255 supported", ErrConfig, w.Phases())
	}
	s := &System{cfg: cfg, w: w, q: make([]queue, len(cfg.Instances)), cum: make([]float64, len(cfg.Instances))}
	s.Reset(seed)
	return s, nil
}

// Reset empties the system and starts a new workload realisation.
func (s *System) Reset(seed uint64) {
	s.r = sim.NewRand(seed)
	for i := range s.q {
		s.q[i] = queue{}
	}
	s.now = 0
	s.nextT = -1
	s.w.Reset(s.r)
	s.m = Metrics{Phase: make([]PhaseMetrics, s.w.Phases())}
}

// Config returns the configuration.
func (s *System) Config() Config { return s.cfg }

// Workload returns the arrival process.
func (s *System) Workload() Workload { return s.w }

// N is the number of instances.
func (s *System) N() int { return len(s.q) }

// Now is the simulated time.
func (s *System) Now() float64 { return s.now }

// Phase is the current (hidden) workload phase.
func (s *System) Phase() int {
	if s.nextT >= 0 {
		// an arrival is pending: the phase process has been sampled up to
		// it, and the phase of that arrival is the phase at now.
		return s.nextP
	}
	return s.w.Phase()
}

// Metrics returns a copy of the accumulated metrics.
func (s *System) Metrics() Metrics {
	out := Metrics{Phase: append([]PhaseMetrics(nil), s.m.Phase...), Duration: s.now}
	return out
}

// ResetMetrics zeroes the counters (for example after a warm-up) without
// touching the system state.
func (s *System) ResetMetrics() {
	for i := range s.m.Phase {
		s.m.Phase[i] = PhaseMetrics{}
	}
}

// QueueLen returns the number of requests at instance i (in service and
// waiting).
func (s *System) QueueLen(i int) int { return s.q[i].n }

// InSystem is the number of requests in all buffers.
func (s *System) InSystem() int {
	n := 0
	for i := range s.q {
		n += s.q[i].n
	}
	return n
}

// Backlog returns the unfinished work at instance i at the current time:
// the time until its last request completes.
func (s *System) Backlog(i int) float64 {
	q := &s.q[i]
	if q.n == 0 {
		return 0
	}
	return q.tail - s.now
}

// Step runs one slot of duration Config.Slot with the routing distribution
// action (length n, non-negative, summing to 1 up to rounding), and returns
// the slot's reward, paper 002 eq. (2).
func (s *System) Step(action []float64) SlotResult {
	return s.StepFor(action, s.cfg.Slot)
}

// StepFor is Step with an explicit duration (the InFaaS-like baseline uses
// 0.1 s slots).
func (s *System) StepFor(action []float64, dur float64) SlotResult {
	n := len(s.q)
	acc := 0.0
	for i := 0; i < n; i++ {
		a := action[i]
		if !(a > 0) {
			a = 0
		}
		acc += a
		s.cum[i] = acc
	}
	if !(acc > 0) { // degenerate action: route uniformly
		for i := 0; i < n; i++ {
			s.cum[i] = float64(i+1) / float64(n)
		}
		acc = 1
	}
	s.slot = SlotResult{Phase: s.Phase()}
	end := s.now + dur
	for {
		if s.nextT < 0 {
			t, ok, ph := s.w.Next(s.r, s.now, end)
			if !ok {
				break
			}
			s.nextT, s.nextP = t, ph
		}
		if s.nextT >= end {
			break
		}
		t := s.nextT
		s.nextT = -1
		s.now = t
		s.arrive(t, s.nextP, acc)
	}
	// The pending arrival (if any) lies beyond end: keep it. MAP sampling
	// is memoryless, so keeping or resampling are both exact; keeping it
	// keeps Phase() consistent.
	s.now = end
	for i := range s.q {
		s.retire(i, end)
	}
	if s.nextT < 0 {
		s.m.Phase[s.w.Phase()].Time += dur
	} else {
		s.m.Phase[s.nextP].Time += dur
	}
	s.m.Duration = s.now
	r := s.slot
	r.Reward = -float64(r.Delayed) - s.cfg.Alpha*float64(r.Rejected) + s.slot.Reward
	return r
}

// retire completes the requests of instance i that finish at or before t.
// s.slot.Reward accumulates the beta*g_i*nu_i term.
func (s *System) retire(i int, t float64) {
	q := &s.q[i]
	mdl := &s.cfg.Instances[i]
	for q.n > 0 && q.fin[q.head] <= t {
		k := q.head
		pm := &s.m.Phase[q.ph[k]]
		pm.Completed++
		if q.fin[k]-q.arr[k] > s.cfg.Deadline+1e-12 {
			pm.Delayed++
			s.slot.Delayed++
		} else {
			pm.OnTime++
			pm.Goodput += mdl.Accuracy
			s.slot.OnTime++
			s.slot.Reward += s.cfg.Beta * mdl.Accuracy
		}
		q.head++
		if q.head == MaxCapacity {
			q.head = 0
		}
		q.n--
	}
}

func (s *System) arrive(t float64, phase int, total float64) {
	n := len(s.q)
	u := s.r.Float64() * total
	dst := n - 1
	for i := 0; i < n-1; i++ {
		if u < s.cum[i] {
			dst = i
			break
		}
	}
	pm := &s.m.Phase[phase]
	pm.Arrivals++
	s.slot.Arrivals++
	mdl := &s.cfg.Instances[dst]
	if mdl.Heavy {
		pm.Heavy++
	}
	s.retire(dst, t)
	q := &s.q[dst]
	if q.n >= s.cfg.Capacity {
		pm.Rejected++
		s.slot.Rejected++
		return
	}
	start := t
	if q.n > 0 && q.tail > t {
		start = q.tail
	}
	fin := start + mdl.Service
	if s.cfg.EagerReject && fin-t > s.cfg.Deadline+1e-12 {
		pm.Rejected++
		s.slot.Rejected++
		return
	}
	k := q.head + q.n
	if k >= MaxCapacity {
		k -= MaxCapacity
	}
	q.arr[k], q.fin[k], q.ph[k] = t, fin, uint8(phase)
	q.n++
	q.tail = fin
}

// ObsSize is the length of the observation vector for n instances of buffer
// capacity c: per instance, the one-hot queue length (c+1 entries), the
// normalised elapsed service time (1) and the ages padded to c+1 entries
// (paper 002 Sec. 5.1.4; with c = 15 the ages are padded to 16). With
// fullObs, a one-hot of the workload phase is appended (RL-FO).
func ObsSize(n, c, phases int, fullObs bool) int {
	k := n * (2*(c+1) + 1)
	if fullObs {
		k += phases
	}
	return k
}

// Observe writes the observation o^(t) of paper 002 Sec. 3.2 and 5.1.4 into
// dst (length ObsSize) and returns the number of non-zero entries written.
// Per instance i: one-hot of the queue length l in {0..c}; the elapsed
// service time of the request in service divided by the service time (in
// [0,1]); the ages of the l requests, oldest first, divided by c*s_i (the
// largest age a request can reach at an instance whose FIFO buffer holds c
// requests of deterministic service s_i), clipped to 1, zero-padded to c+1.
// With fullObs the one-hot MAP phase follows.
func (s *System) Observe(dst []float64, fullObs bool) {
	c := s.cfg.Capacity
	per := 2*(c+1) + 1
	t := s.now
	for i := range s.q {
		base := dst[i*per : (i+1)*per]
		clear(base)
		q := &s.q[i]
		svc := s.cfg.Instances[i].Service
		base[q.n] = 1
		if q.n > 0 {
			startHead := q.fin[q.head] - svc
			el := (t - startHead) / svc
			if el < 0 {
				el = 0
			} else if el > 1 {
				el = 1
			}
			base[c+1] = el
			norm := 1 / (float64(c) * svc)
			k := q.head
			for j := 0; j < q.n; j++ {
				a := (t - q.arr[k]) * norm
				if a > 1 {
					a = 1
				}
				base[c+2+j] = a
				k++
				if k == MaxCapacity {
					k = 0
				}
			}
		}
	}
	if fullObs {
		ph := dst[len(s.q)*per:]
		clear(ph)
		ph[s.Phase()] = 1
	}
}
