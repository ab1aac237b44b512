// Package farm is the discrete-event simulator of paper 001 (Sec. 2 and 7):
// n servers split into K classes, class k with service rate mu_k and
// accuracy a_k; queries arrive as a Poisson process of rate lambda*n and are
// dispatched on arrival by a policy to one server, where they wait FCFS
// (optionally in a finite buffer) for an exponential or deterministic
// service. Phases change the load and the accuracy target over time
// (Sec. 7.2).
//
// Two event engines, both exact and allocation-free in steady state:
//
//   - exponential service: the model is a CTMC, so the next event is drawn
//     as one race: time Exp(lambda n + sum_k mu_k b_k) (b_k busy class-k
//     servers), an arrival with probability lambda n / total, else a
//     departure from a uniformly chosen busy server of a class chosen in
//     proportion to mu_k b_k (memorylessness). No event heap is needed.
//   - deterministic service: within a class every service lasts 1/mu_k and
//     services start in time order, so each class's departures leave in
//     start order: one FIFO per class replaces the heap; the next event is
//     the minimum over the K FIFO heads and the next arrival.
//
// The package is pure and seeded: a run is a deterministic function of its
// Config, its seed and the (deterministic) dispatcher.
package farm

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/idn-net/idn/policy/sim"
)

// Dispatcher is the event interface of a dispatch policy (the policies of
// policy/accuracy implement it): Dispatch picks the server of an arriving
// query; Departed reports a departure and whether the server is now idle;
// Blocked reports that the query just dispatched to server was dropped.
type Dispatcher interface {
	Dispatch() int
	Departed(server int, idle bool)
	Blocked(server int)
}

// Retargeter is implemented by dispatchers that take a new accuracy target
// at a phase change.
type Retargeter interface {
	SetAStar(astar float64) error
}

// Service is the service-time distribution.
type Service uint8

const (
	// Exponential service times with mean 1/mu_k (paper 001 Sec. 2).
	Exponential Service = iota
	// Deterministic service times 1/mu_k (paper 001 Sec. 3.3, Fig. 8).
	Deterministic
)

// ParseService parses "exp" or "det".
func ParseService(s string) (Service, error) {
	switch s {
	case "exp", "exponential":
		return Exponential, nil
	case "det", "deterministic":
		return Deterministic, nil
	}
	return 0, fmt.Errorf("service %q: want exp or det: %w", s, ErrInvalid)
}

// String returns "exp" or "det".
func (s Service) String() string {
	if s == Deterministic {
		return "det"
	}
	return "exp"
}

// ErrInvalid marks an invalid Config.
var ErrInvalid = errors.New("invalid farm config")

// Phase is one period of constant load and accuracy target (Sec. 7.2).
type Phase struct {
	Duration float64 // length in time units (> 0)
	Lambda   float64 // normalised arrival rate (total rate lambda*n)
	AStar    float64 // accuracy target passed to a Retargeter at the phase start
}

// Config describes one run.
type Config struct {
	Mu     []float64 // service rate per class
	A      []float64 // accuracy per class
	Counts []int     // servers per class (n = sum); servers are numbered class by class
	// Lambda is the normalised arrival rate when Phases is empty.
	Lambda float64
	// Phases, if not empty, repeat cyclically from time 0 and override
	// Lambda; a Retargeter dispatcher gets each phase's AStar.
	Phases  []Phase
	Service Service
	// Buffer is the most queries a server holds (in service + waiting);
	// 0 means unbounded. An arrival dispatched to a full server is blocked.
	Buffer int
	// MaxDepartures stops the run after that many departures (the paper
	// runs to n*10^5); MaxTime stops it at that time. At least one > 0.
	MaxDepartures int64
	MaxTime       float64
	// WarmupDepartures departures are excluded from the response-time and
	// accuracy means (0: the paper's from-empty averages).
	WarmupDepartures int64
	// SampleEvery > 0 records the number in system and the accuracy of the
	// queries dispatched in each window of that length.
	SampleEvery float64
	Seed        uint64
}

// DefaultConfig is the paper 001 Sec. 7 system with n = 64 (16 per class),
// exponential service, lambda = 0.354 (half of lambda^max for a* = 76),
// n*10^3 departures.
func DefaultConfig() Config {
	return Config{
		Mu: []float64{2, 1, 0.9, 0.1}, A: []float64{70, 75, 80, 100}, Counts: []int{16, 16, 16, 16},
		Lambda: 0.3541666666666667, MaxDepartures: 64_000, Seed: 1,
	}
}

// N returns the number of servers.
func (c Config) N() int {
	n := 0
	for _, x := range c.Counts {
		n += x
	}
	return n
}

// Validate checks the configuration.
func (c Config) Validate() error {
	k := len(c.Mu)
	if k == 0 || k > 255 {
		return fmt.Errorf("mu: %d classes, need 1..255: %w", k, ErrInvalid)
	}
	if len(c.A) != k || len(c.Counts) != k {
		return fmt.Errorf("a (%d), counts (%d): need one per class (%d): %w", len(c.A), len(c.Counts), k, ErrInvalid)
	}
	for i := 0; i < k; i++ {
		if !(c.Mu[i] > 0) || math.IsInf(c.Mu[i], 0) {
			return fmt.Errorf("mu[%d] = %v: must be positive and finite: %w", i, c.Mu[i], ErrInvalid)
		}
		if c.Counts[i] < 1 {
			return fmt.Errorf("counts[%d] = %d: every class needs a server: %w", i, c.Counts[i], ErrInvalid)
		}
	}
	if len(c.Phases) == 0 && (!(c.Lambda > 0) || math.IsInf(c.Lambda, 0)) {
		return fmt.Errorf("lambda = %v: must be positive and finite: %w", c.Lambda, ErrInvalid)
	}
	for i, p := range c.Phases {
		if !(p.Duration > 0) || math.IsInf(p.Duration, 0) {
			return fmt.Errorf("phases[%d].duration = %v: must be positive and finite: %w", i, p.Duration, ErrInvalid)
		}
		if !(p.Lambda >= 0) || math.IsInf(p.Lambda, 0) {
			return fmt.Errorf("phases[%d].lambda = %v: must be non-negative and finite: %w", i, p.Lambda, ErrInvalid)
		}
	}
	if c.Buffer < 0 {
		return fmt.Errorf("buffer = %d: must be >= 0 (0 = unbounded): %w", c.Buffer, ErrInvalid)
	}
	if c.MaxDepartures <= 0 && !(c.MaxTime > 0) {
		return fmt.Errorf("max departures = %d, max time = %v: need a stop condition: %w", c.MaxDepartures, c.MaxTime, ErrInvalid)
	}
	if c.WarmupDepartures < 0 {
		return fmt.Errorf("warmup departures = %d: must be >= 0: %w", c.WarmupDepartures, ErrInvalid)
	}
	if c.SampleEvery < 0 || math.IsNaN(c.SampleEvery) {
		return fmt.Errorf("sample every = %v: must be >= 0: %w", c.SampleEvery, ErrInvalid)
	}
	return nil
}

// Sample is one point of the time series.
type Sample struct {
	T        float64 // sample time (end of the window)
	InSystem int     // queries in the system at T
	Acc      float64 // mean accuracy of the queries dispatched in the window (NaN if none)
	Phase    int     // phase index at T
}

// Result holds the metrics of a run.
type Result struct {
	Arrivals, Blocked, Departures int64
	Events                        int64   // arrivals + departures (+ phase changes)
	Time                          float64 // simulated time at the end
	MeanResponse                  float64 // mean response time of the counted departures
	MeanAccuracy                  float64 // mean accuracy of the counted departures (served queries)
	// DispatchedAccuracy is the mean accuracy of every accepted query at
	// dispatch (class accuracy of the server it joined). Unlike
	// MeanAccuracy it is not censored by the queries still in the system
	// at the end of the run (slow, accurate classes are under-represented
	// among a finite run's departures, both at the start from empty and at
	// the end); both estimate the same steady-state accuracy.
	DispatchedAccuracy float64
	BlockingProb       float64 // Blocked / Arrivals
	MeanInSystem       float64 // time-average number of queries in system
	ClassShare         []float64
	Samples            []Sample
}

// fifo is a growable ring of float64 (arrival times at one server).
type fifo struct {
	buf  []float64
	head int32
	n    int32
}

func (f *fifo) push(x float64) {
	if int(f.n) == len(f.buf) {
		nb := make([]float64, max(4, 2*len(f.buf)))
		for i := int32(0); i < f.n; i++ {
			nb[i] = f.buf[(f.head+i)&int32(len(f.buf)-1)]
		}
		f.buf, f.head = nb, 0
	}
	f.buf[(f.head+f.n)&int32(len(f.buf)-1)] = x
	f.n++
}

func (f *fifo) pop() float64 {
	x := f.buf[f.head]
	f.head = (f.head + 1) & int32(len(f.buf)-1)
	f.n--
	return x
}

// depRing is the per-class FIFO of (departure time, server) for
// deterministic service; capacity = class size (one job in service per server).
type depRing struct {
	t    []float64
	s    []int32
	head int
	n    int
}

// Sim is one simulation; create with New, run with Run.
type Sim struct {
	cfg      Config
	d        Dispatcher
	r        *rand.Rand
	k        int
	n        int
	class    []uint8
	off      []int
	q        []fifo
	busy     []int32 // per class: busy servers at busyList[off[k] : off[k]+nbusy[k]]
	busyList []int32
	pos      []int32 // position of a busy server in busyList
	dep      []depRing
	inv      []float64 // 1/mu
}

// New prepares a run of d under cfg; d must start with every server idle.
func New(cfg Config, d Dispatcher) (*Sim, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d == nil {
		return nil, fmt.Errorf("dispatcher: nil: %w", ErrInvalid)
	}
	k := len(cfg.Mu)
	s := &Sim{cfg: cfg, d: d, r: sim.NewRand(cfg.Seed), k: k, n: cfg.N()}
	s.class = make([]uint8, s.n)
	s.off = make([]int, k)
	s.q = make([]fifo, s.n)
	// initial 4-slot rings from one slab: neighbouring servers' queues
	// share cache lines; a ring that outgrows it gets its own array.
	slab := make([]float64, 4*s.n)
	for i := range s.q {
		s.q[i].buf = slab[4*i : 4*i+4 : 4*i+4]
	}
	s.busy = make([]int32, k)
	s.busyList = make([]int32, s.n)
	s.pos = make([]int32, s.n)
	s.inv = make([]float64, k)
	o := 0
	for c := 0; c < k; c++ {
		s.off[c] = o
		for i := 0; i < cfg.Counts[c]; i++ {
			s.class[o+i] = uint8(c)
		}
		o += cfg.Counts[c]
		s.inv[c] = 1 / cfg.Mu[c]
	}
	if cfg.Service == Deterministic {
		s.dep = make([]depRing, k)
		for c := 0; c < k; c++ {
			s.dep[c] = depRing{t: make([]float64, cfg.Counts[c]), s: make([]int32, cfg.Counts[c])}
		}
	}
	return s, nil
}

// Run simulates until the stop condition and returns the metrics.
func Run(cfg Config, d Dispatcher) (Result, error) {
	s, err := New(cfg, d)
	if err != nil {
		return Result{}, err
	}
	return s.Run()
}

type stats struct {
	res             Result
	sumResp, sumAcc float64
	counted         int64
	classDep        []int64
	area            float64
	inSys           int
	winAcc          float64
	sumDispAcc      float64
	winN            int64
	nextSample      float64
	phase           int
	phaseEnd        float64
	lambdaN         float64
}

// Run simulates until the stop condition and returns the metrics.
func (s *Sim) Run() (Result, error) {
	cfg := s.cfg
	st := stats{classDep: make([]int64, s.k), phaseEnd: math.Inf(1), nextSample: math.Inf(1)}
	if cfg.SampleEvery > 0 {
		st.nextSample = cfg.SampleEvery
		est := 1024
		if cfg.MaxTime > 0 {
			est = int(math.Min(cfg.MaxTime/cfg.SampleEvery+1, 1<<20))
		}
		st.res.Samples = make([]Sample, 0, est)
	}
	if len(cfg.Phases) > 0 {
		if err := s.enterPhase(&st, 0, 0); err != nil {
			return Result{}, err
		}
	} else {
		st.lambdaN = cfg.Lambda * float64(s.n)
	}
	var now float64
	var err error
	if cfg.Service == Deterministic {
		now, err = s.runDet(&st)
	} else {
		now, err = s.runExp(&st)
	}
	if err != nil {
		return Result{}, err
	}
	res := st.res
	res.Time = now
	if st.counted > 0 {
		res.MeanResponse = st.sumResp / float64(st.counted)
		res.MeanAccuracy = st.sumAcc / float64(st.counted)
	}
	if acc := res.Arrivals - res.Blocked; acc > 0 {
		res.DispatchedAccuracy = st.sumDispAcc / float64(acc)
	}
	if res.Arrivals > 0 {
		res.BlockingProb = float64(res.Blocked) / float64(res.Arrivals)
	}
	if now > 0 {
		res.MeanInSystem = st.area / now
	}
	res.ClassShare = make([]float64, s.k)
	if res.Departures > 0 {
		for c := range res.ClassShare {
			res.ClassShare[c] = float64(st.classDep[c]) / float64(res.Departures)
		}
	}
	return res, nil
}

func (s *Sim) enterPhase(st *stats, idx int, now float64) error {
	p := s.cfg.Phases[idx]
	st.phase = idx
	st.phaseEnd = now + p.Duration
	st.lambdaN = p.Lambda * float64(s.n)
	if rt, ok := s.d.(Retargeter); ok {
		if err := rt.SetAStar(p.AStar); err != nil {
			return fmt.Errorf("phases[%d].astar = %v: %w", idx, p.AStar, err)
		}
	}
	return nil
}

// sampleUpTo records samples for every sample instant <= t (the state is
// constant between events).
func (s *Sim) sampleUpTo(st *stats, t float64) {
	for st.nextSample <= t {
		acc := math.NaN()
		if st.winN > 0 {
			acc = st.winAcc / float64(st.winN)
		}
		st.res.Samples = append(st.res.Samples, Sample{T: st.nextSample, InSystem: st.inSys, Acc: acc, Phase: st.phase})
		st.winAcc, st.winN = 0, 0
		st.nextSample += s.cfg.SampleEvery
	}
}

func (s *Sim) done(st *stats, now float64) bool {
	return (s.cfg.MaxDepartures > 0 && st.res.Departures >= s.cfg.MaxDepartures) ||
		(s.cfg.MaxTime > 0 && now >= s.cfg.MaxTime)
}

// arrive dispatches one arrival at time now. It returns the server that
// started service (or -1) so the det engine can schedule its departure.
func (s *Sim) arrive(st *stats, now float64) int {
	st.res.Arrivals++
	srv := s.d.Dispatch()
	q := &s.q[srv]
	if s.cfg.Buffer > 0 && int(q.n) >= s.cfg.Buffer {
		st.res.Blocked++
		s.d.Blocked(srv)
		return -1
	}
	c := s.class[srv]
	st.winAcc += s.cfg.A[c]
	st.sumDispAcc += s.cfg.A[c]
	st.winN++
	q.push(now)
	st.inSys++
	if q.n == 1 {
		// becomes busy
		b := s.busy[c]
		s.busyList[s.off[c]+int(b)] = int32(srv)
		s.pos[srv] = b
		s.busy[c] = b + 1
		return srv
	}
	return -1
}

// depart removes the head query of srv at time now; it returns true if the
// server stays busy (a new service starts).
func (s *Sim) depart(st *stats, srv int, now float64) bool {
	q := &s.q[srv]
	t0 := q.pop()
	st.inSys--
	c := s.class[srv]
	st.res.Departures++
	st.classDep[c]++
	if st.res.Departures > s.cfg.WarmupDepartures {
		st.sumResp += now - t0
		st.sumAcc += s.cfg.A[c]
		st.counted++
	}
	idle := q.n == 0
	if idle {
		// swap-remove from the busy list
		b := s.busy[c] - 1
		p := s.pos[srv]
		last := s.busyList[s.off[c]+int(b)]
		s.busyList[s.off[c]+int(p)] = last
		s.pos[last] = p
		s.busy[c] = b
	}
	s.d.Departed(srv, idle)
	return !idle
}

func (s *Sim) runExp(st *stats) (float64, error) {
	r := s.r
	now := 0.0
	mu := s.cfg.Mu
	for !s.done(st, now) {
		dep := 0.0
		for c := 0; c < s.k; c++ {
			dep += mu[c] * float64(s.busy[c])
		}
		total := st.lambdaN + dep
		var t float64
		if total > 0 {
			t = now + r.ExpFloat64()/total
		} else {
			t = math.Inf(1)
		}
		if s.cfg.MaxTime > 0 && t > s.cfg.MaxTime && s.cfg.MaxTime <= st.phaseEnd {
			s.advance(st, now, s.cfg.MaxTime)
			return s.cfg.MaxTime, nil
		}
		if t > st.phaseEnd {
			// memoryless: jump to the phase boundary and redraw
			s.advance(st, now, st.phaseEnd)
			now = st.phaseEnd
			st.res.Events++
			if err := s.enterPhase(st, (st.phase+1)%len(s.cfg.Phases), now); err != nil {
				return now, err
			}
			continue
		}
		if s.cfg.MaxTime > 0 && t > s.cfg.MaxTime {
			s.advance(st, now, s.cfg.MaxTime)
			return s.cfg.MaxTime, nil
		}
		if math.IsInf(t, 1) {
			return now, fmt.Errorf("lambda = 0 and no query in system: the run cannot end: %w", ErrInvalid)
		}
		s.advance(st, now, t)
		now = t
		st.res.Events++
		u := r.Float64() * total
		if u < st.lambdaN {
			s.arrive(st, now)
			continue
		}
		u -= st.lambdaN
		c := 0
		for ; c < s.k-1; c++ {
			x := mu[c] * float64(s.busy[c])
			if u < x {
				break
			}
			u -= x
		}
		for s.busy[c] == 0 { // rounding at the last class boundary
			c = (c + s.k - 1) % s.k
		}
		srv := int(s.busyList[s.off[c]+r.IntN(int(s.busy[c]))])
		s.depart(st, srv, now)
	}
	return now, nil
}

// advance accumulates the time integral and samples over (from, to].
func (s *Sim) advance(st *stats, from, to float64) {
	st.area += float64(st.inSys) * (to - from)
	if to >= st.nextSample {
		s.sampleUpTo(st, to)
	}
}

func (s *Sim) runDet(st *stats) (float64, error) {
	r := s.r
	now := 0.0
	nextArr := math.Inf(1)
	if st.lambdaN > 0 {
		nextArr = r.ExpFloat64() / st.lambdaN
	}
	start := func(srv int, t float64) {
		c := s.class[srv]
		d := &s.dep[c]
		i := d.head + d.n
		if i >= len(d.t) {
			i -= len(d.t)
		}
		d.t[i], d.s[i] = t+s.inv[c], int32(srv)
		d.n++
	}
	for !s.done(st, now) {
		t, dc := nextArr, -1
		for c := 0; c < s.k; c++ {
			d := &s.dep[c]
			if d.n > 0 && d.t[d.head] < t {
				t, dc = d.t[d.head], c
			}
		}
		if s.cfg.MaxTime > 0 && t > s.cfg.MaxTime && s.cfg.MaxTime <= st.phaseEnd {
			s.advance(st, now, s.cfg.MaxTime)
			return s.cfg.MaxTime, nil
		}
		if t > st.phaseEnd {
			s.advance(st, now, st.phaseEnd)
			now = st.phaseEnd
			st.res.Events++
			if err := s.enterPhase(st, (st.phase+1)%len(s.cfg.Phases), now); err != nil {
				return now, err
			}
			nextArr = math.Inf(1)
			if st.lambdaN > 0 {
				nextArr = now + r.ExpFloat64()/st.lambdaN
			}
			continue
		}
		if s.cfg.MaxTime > 0 && t > s.cfg.MaxTime {
			s.advance(st, now, s.cfg.MaxTime)
			return s.cfg.MaxTime, nil
		}
		if math.IsInf(t, 1) {
			return now, fmt.Errorf("lambda = 0 and no query in system: the run cannot end: %w", ErrInvalid)
		}
		s.advance(st, now, t)
		now = t
		st.res.Events++
		if dc < 0 {
			if srv := s.arrive(st, now); srv >= 0 {
				start(srv, now)
			}
			nextArr = now + r.ExpFloat64()/st.lambdaN
			continue
		}
		d := &s.dep[dc]
		srv := int(d.s[d.head])
		d.head++
		if d.head == len(d.t) {
			d.head = 0
		}
		d.n--
		if s.depart(st, srv, now) {
			start(srv, now)
		}
	}
	return now, nil
}
