package gpucluster

import (
	"errors"
	"fmt"
	"math"

	"github.com/idn-net/idn/policy/flex"
	"github.com/idn-net/idn/policy/herd"
	"github.com/idn-net/idn/policy/sim"
)

// Scheme names a serving scheme.
type Scheme string

// The schemes of paper 004 Sec. 7.
const (
	FLEX      Scheme = "flex"      // SHEPHERD: HERD groups + FLEX per group
	FLEXNP    Scheme = "flex-np"   // SHEPHERD-NP: FLEX without preemption
	Clockwork Scheme = "clockwork" // Clockwork-like: one global EDF scheduler
	Nexus     Scheme = "nexus"     // Nexus-like: periodic per-session plan
)

// ParseScheme validates a scheme name.
func ParseScheme(s string) (Scheme, error) {
	switch Scheme(s) {
	case FLEX, FLEXNP, Clockwork, Nexus:
		return Scheme(s), nil
	}
	return "", fmt.Errorf("gpucluster: unknown scheme %q (want flex, flex-np, clockwork or nexus)", s)
}

// Config configures one simulated cluster run.
type Config struct {
	Models  []flex.Model
	Workers int
	Scheme  Scheme
	// GroupLimit is HERD's G-bar for flex and flex-np; 0 puts all workers in
	// one group (G-bar = infinity). Clockwork always uses one group.
	GroupLimit int
	// MaxNeedPerModelStream caps a HERD model-stream's need in GPUs
	// (herd.Aggregate); 0 means G-bar/2 (at least 1).
	MaxNeedPerModelStream float64
	Lambda                float64
	MaxBatch              int
	// NexusPeriod is the Nexus re-planning period (ms); NexusPeakWindow the
	// sub-window (ms) whose largest rate within a period is the "peak" the
	// plan provisions for. The peaks are measured on the run's own arrivals
	// (an oracle, as the paper's adaptation "provision[s] for the peak
	// demand in every 60-second window of the workload").
	NexusPeriod     float64
	NexusPeakWindow float64
	// SchedCostBase and SchedCostPerGPU model the time (ms) one scheduler
	// instance spends per event: base + perGPU*G for a group of G GPUs.
	// Events of one scheduler are processed one at a time, so a scheduler
	// whose event rate exceeds 1/cost falls behind. 0 = free scheduling.
	// The model applies to flex, flex-np and clockwork (one scheduler per
	// group), not to nexus (static per-session plan, no central scheduler).
	// Queued arrivals that can no longer meet their deadline when the
	// scheduler reaches them are shed at no cost (counted as dropped).
	SchedCostBase   float64
	SchedCostPerGPU float64
}

// DefaultConfig returns 12 workers, FLEX, G-bar 12, lambda 3.03, batch 128,
// Nexus period 60 s with 1 s peak windows, free scheduling; Models is the
// Table 4 catalog.
func DefaultConfig() Config {
	return Config{Models: Table4(), Workers: 12, Scheme: FLEX, GroupLimit: 12, Lambda: 3.03, MaxBatch: 128,
		NexusPeriod: 60000, NexusPeakWindow: 1000}
}

// ErrConfig is wrapped by configuration errors.
var ErrConfig = errors.New("gpucluster: invalid config")

// Validate checks the configuration.
func (c Config) Validate() error {
	if len(c.Models) == 0 {
		return fmt.Errorf("%w: models: need at least one", ErrConfig)
	}
	for i, m := range c.Models {
		if err := m.Validate(); err != nil {
			return fmt.Errorf("%w: models[%d]: %w", ErrConfig, i, err)
		}
	}
	if c.Workers <= 0 {
		return fmt.Errorf("%w: workers = %d must be positive", ErrConfig, c.Workers)
	}
	if _, err := ParseScheme(string(c.Scheme)); err != nil {
		return fmt.Errorf("%w: scheme: %w", ErrConfig, err)
	}
	if c.GroupLimit < 0 {
		return fmt.Errorf("%w: group limit = %d must be >= 0", ErrConfig, c.GroupLimit)
	}
	if !(c.Lambda >= 1) {
		return fmt.Errorf("%w: lambda = %v must be >= 1", ErrConfig, c.Lambda)
	}
	if c.MaxBatch <= 0 {
		return fmt.Errorf("%w: max batch = %d must be positive", ErrConfig, c.MaxBatch)
	}
	if !(c.NexusPeriod > 0) || !(c.NexusPeakWindow > 0) || c.NexusPeakWindow > c.NexusPeriod {
		return fmt.Errorf("%w: nexus period = %v ms and peak window = %v ms must be positive, window <= period", ErrConfig, c.NexusPeriod, c.NexusPeakWindow)
	}
	if c.SchedCostBase < 0 || c.SchedCostPerGPU < 0 {
		return fmt.Errorf("%w: scheduler cost base = %v, per GPU = %v must be >= 0", ErrConfig, c.SchedCostBase, c.SchedCostPerGPU)
	}
	if c.MaxNeedPerModelStream < 0 {
		return fmt.Errorf("%w: max need per model-stream = %v must be >= 0", ErrConfig, c.MaxNeedPerModelStream)
	}
	return nil
}

// Result summarises one run. Every offered request ends exactly once as
// good (finished by its deadline), late (finished after it: must stay 0 for
// these schemes) or dropped (explicitly, or still queued at the end).
type Result struct {
	Scheme      Scheme
	Workload    string
	Workers     int
	Groups      int
	Duration    float64 // ms of arrivals
	Offered     int
	Good        int
	Late        int
	Dropped     int
	Batches     int
	Preemptions int
	// Goodput is Good per second of Duration.
	Goodput float64
	// OfferedRate is Offered per second of Duration.
	OfferedRate float64
	// Utilization is the busy fraction of the workers over [0, Duration],
	// preempted work included.
	Utilization float64
	// DropRate is 1 - Good/Offered.
	DropRate float64
	// MeanBatch is the mean size of completed batches.
	MeanBatch float64
	// MeanLatency is the mean latency (ms) of good requests.
	MeanLatency float64
	// SchedLag is the largest delay (ms) an event waited for its scheduler.
	SchedLag float64
	// MinBT is HERD's planned minimum burst tolerance (flex, flex-np).
	MinBT float64
}

type evKind uint8

const (
	evArrival evKind = iota + 1
	evComplete
	evReplan
	evSchedFree
)

type event struct {
	kind  evKind
	group int32
	gpu   int32
	id    uint64
	req   flex.Request
}

type runningBatch struct {
	id     uint64
	start  float64
	finish float64
	good   int
	late   int
	n      int
	latSum float64
}

type pendingEvent struct {
	t float64
	e event
}

type group struct {
	s     flex.Scheduler
	gpus  []int // global worker index of each local GPU
	cost  float64
	busy  float64 // scheduler busy until
	wake  bool    // an evSchedFree is pending
	queue []pendingEvent
	qhead int
	run   []runningBatch
	nexus *flex.Nexus
}

// Run simulates wl on the cluster and returns the metrics.
func Run(cfg Config, wl *Workload) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	if wl == nil || len(wl.Streams) == 0 {
		return Result{}, fmt.Errorf("%w: workload has no streams", ErrConfig)
	}
	for i, s := range wl.Streams {
		if s.Model < 0 || s.Model >= len(cfg.Models) {
			return Result{}, fmt.Errorf("%w: stream %d model %d out of range", ErrConfig, i, s.Model)
		}
	}
	res := Result{Scheme: cfg.Scheme, Workload: wl.Name, Workers: cfg.Workers, Duration: wl.Duration, MinBT: math.NaN()}
	groups, routeOf, sessionOf, err := build(cfg, wl, &res)
	if err != nil {
		return Result{}, err
	}
	res.Groups = len(groups)

	var h sim.Heap[event]
	var replanTimes []float64
	var peaks [][]float64
	if cfg.Scheme == Nexus {
		peaks = nexusPeaks(cfg, wl, sessionOf, len(groups[0].nexus.Plan().Planned))
		for k := range peaks {
			replanTimes = append(replanTimes, float64(k)*cfg.NexusPeriod)
		}
		for k, t := range replanTimes {
			h.Push(t, event{kind: evReplan, id: uint64(k)})
		}
	}
	src := wl.New()
	var nextID uint64
	pushNext := func() {
		a, ok := src.Next()
		if !ok {
			return
		}
		s := wl.Streams[a.Stream]
		nextID++
		st := a.Stream
		if sessionOf != nil {
			st = int32(sessionOf[a.Stream])
		}
		h.Push(a.T, event{kind: evArrival, group: int32(routeOf[a.Stream]), req: flex.Request{
			ID: nextID, Stream: st, Model: int32(s.Model), Arrival: a.T, Deadline: a.T + s.SLO}})
		res.Offered++
	}
	pushNext()
	busyTime := 0.0
	clip := func(a, b float64) float64 {
		a = math.Max(a, 0)
		b = math.Min(b, wl.Duration)
		if b > a {
			return b - a
		}
		return 0
	}
	good, late, dropped, batches, preempts := 0, 0, 0, 0, 0
	latSum, batchSum := 0.0, 0
	apply := func(g *group, gi int32, now float64) {
		for _, d := range g.s.Decisions() {
			switch d.Kind {
			case flex.Start:
				rb := runningBatch{id: d.BatchID, start: d.At, finish: d.Finish, n: len(d.Batch)}
				for _, r := range d.Batch {
					if d.Finish <= r.Deadline+1e-9 {
						rb.good++
						rb.latSum += d.Finish - r.Arrival
					} else {
						rb.late++
					}
				}
				g.run[d.GPU] = rb
				h.Push(d.Finish, event{kind: evComplete, group: gi, gpu: int32(d.GPU), id: d.BatchID})
			case flex.Preempt:
				rb := &g.run[d.GPU]
				if rb.id == d.BatchID {
					busyTime += clip(rb.start, d.At)
					rb.id = 0
				}
				preempts++
			case flex.Drop:
				dropped += len(d.Batch)
			}
		}
	}
	process := func(g *group, e event, t float64) {
		switch e.kind {
		case evArrival:
			g.s.Arrive(e.req, t)
		case evComplete:
			rb := &g.run[e.gpu]
			if rb.id == e.id {
				busyTime += clip(rb.start, rb.finish)
				good += rb.good
				late += rb.late
				latSum += rb.latSum
				batches++
				batchSum += rb.n
				rb.id = 0
			}
			g.s.Complete(int(e.gpu), e.id, t)
		}
		apply(g, e.group, t)
	}
	for {
		t, e, ok := h.Pop()
		if !ok {
			break
		}
		if e.kind == evReplan {
			g := groups[0]
			plan, err := flex.PlanNexus(cfg.Models, nexusSessions(wl, sessionOf, len(peaks[e.id])), peaks[e.id], cfg.Workers, cfg.MaxBatch)
			if err != nil {
				return Result{}, err
			}
			if err := g.nexus.SetPlan(plan, t); err != nil {
				return Result{}, err
			}
			apply(g, 0, t)
			continue
		}
		if e.kind == evSchedFree {
			g := groups[e.group]
			g.wake = false
			var pe pendingEvent
			live := false
			for g.qhead < len(g.queue) && !live {
				pe = g.queue[g.qhead]
				g.queue[g.qhead] = pendingEvent{}
				g.qhead++
				// load shedding: an arrival that can no longer meet its
				// deadline is discarded at no scheduler cost
				if pe.e.kind == evArrival && t+cfg.Models[pe.e.req.Model].Latency(1) > pe.e.req.Deadline {
					dropped++
					continue
				}
				live = true
			}
			if g.qhead == len(g.queue) {
				g.queue, g.qhead = g.queue[:0], 0
			}
			if !live {
				continue
			}
			res.SchedLag = math.Max(res.SchedLag, t-pe.t)
			g.busy = t + g.cost
			process(g, pe.e, t)
			if g.qhead < len(g.queue) {
				g.wake = true
				h.Push(g.busy, event{kind: evSchedFree, group: e.group})
			}
			continue
		}
		g := groups[e.group]
		if e.kind == evArrival && e.req.ID == nextID {
			pushNext()
		}
		if g.cost > 0 && (g.busy > t || g.qhead < len(g.queue)) {
			// the scheduler is busy: wait in its FIFO
			g.queue = append(g.queue, pendingEvent{t: t, e: e})
			if !g.wake {
				g.wake = true
				h.Push(g.busy, event{kind: evSchedFree, group: e.group})
			}
			continue
		}
		if g.cost > 0 {
			g.busy = t + g.cost
		}
		process(g, e, t)
	}
	for gi, g := range groups {
		g.s.Tick(math.Inf(1))
		apply(g, int32(gi), math.Inf(1))
	}
	res.Good, res.Late, res.Dropped, res.Batches, res.Preemptions = good, late, dropped, batches, preempts
	if res.Good+res.Late+res.Dropped != res.Offered {
		return res, fmt.Errorf("gpucluster: accounting: good %d + late %d + dropped %d != offered %d", good, late, dropped, res.Offered)
	}
	sec := wl.Duration / 1000
	res.Goodput = float64(good) / sec
	res.OfferedRate = float64(res.Offered) / sec
	res.Utilization = busyTime / (float64(cfg.Workers) * wl.Duration)
	if res.Offered > 0 {
		res.DropRate = 1 - float64(good)/float64(res.Offered)
	}
	if batches > 0 {
		res.MeanBatch = float64(batchSum) / float64(batches)
	}
	if good > 0 {
		res.MeanLatency = latSum / float64(good)
	}
	return res, nil
}

// build creates the scheduler groups and the stream -> group routing.
func build(cfg Config, wl *Workload, res *Result) ([]*group, []int, []int, error) {
	routeOf := make([]int, len(wl.Streams))
	mk := func(n int, first int) *group {
		g := &group{gpus: make([]int, n), run: make([]runningBatch, n), cost: cfg.SchedCostBase + cfg.SchedCostPerGPU*float64(n)}
		for i := range g.gpus {
			g.gpus[i] = first + i
		}
		return g
	}
	switch cfg.Scheme {
	case Clockwork:
		g := mk(cfg.Workers, 0)
		fc := flex.Config{Models: cfg.Models, GPUs: cfg.Workers, Lambda: cfg.Lambda, MaxBatch: cfg.MaxBatch}
		s, err := flex.NewClockwork(fc)
		if err != nil {
			return nil, nil, nil, err
		}
		g.s = s
		return []*group{g}, routeOf, nil, nil
	case Nexus:
		sessionOf, sessions := nexusSessionMap(wl)
		g := mk(cfg.Workers, 0)
		nc := flex.NexusConfig{Models: cfg.Models, Sessions: sessions, GPUs: cfg.Workers, MaxBatch: cfg.MaxBatch}
		s, err := flex.NewNexus(nc)
		if err != nil {
			return nil, nil, nil, err
		}
		g.s, g.nexus = s, s
		// Nexus dispatches per session from its frontends with a static
		// plan: no central online scheduler, so no scheduler-cost model.
		g.cost = 0
		// size the plan vector so Run knows the session count
		_ = s.SetPlan(flex.NexusPlan{Planned: make([]float64, len(sessions))}, 0)
		return []*group{g}, routeOf, sessionOf, nil
	}
	// flex / flex-np: HERD groups
	plan, msOf, err := PlanGroups(cfg, wl)
	if err != nil {
		return nil, nil, nil, err
	}
	res.MinBT = plan.MinBT
	var groups []*group
	first := 0
	for _, pg := range plan.Groups {
		if pg.Size == 0 {
			continue
		}
		g := mk(pg.Size, first)
		first += pg.Size
		fc := flex.Config{Models: cfg.Models, GPUs: pg.Size, Lambda: cfg.Lambda, MaxBatch: cfg.MaxBatch, Preemption: cfg.Scheme == FLEX}
		s, err := flex.NewFlex(fc)
		if err != nil {
			return nil, nil, nil, err
		}
		g.s = s
		for _, i := range pg.ModelStreams {
			for _, st := range msOf[i] {
				routeOf[st] = len(groups)
			}
		}
		groups = append(groups, g)
	}
	return groups, routeOf, nil, nil
}

// PlanGroups runs HERD on the workload's mean stream rates (herd.Exact when
// there are at most 4 model-streams and groups, herd.Heuristic otherwise):
// n_i = rate_i / T_i (herd.Throughput), streams aggregated per model into
// model-streams of need <= MaxNeedPerModelStream (default G-bar/2), one
// affinity set, unlimited memory (the paper: "large enough to fit all 13
// DNN models", "all the models in a single affinity-set"). It returns the
// plan and, per model-stream, its stream indices. With GroupLimit 0 all
// workers form one group.
func PlanGroups(cfg Config, wl *Workload) (herd.Plan, [][]int, error) {
	limit := cfg.GroupLimit
	if limit == 0 {
		limit = cfg.Workers
	}
	var loads []herd.StreamLoad
	for i, s := range wl.Streams {
		need := s.Rate / herd.Throughput(cfg.Models[s.Model], s.SLO, cfg.MaxBatch)
		if need <= 0 {
			need = 1e-9
		}
		loads = append(loads, herd.StreamLoad{ID: i, Model: s.Model, Need: need})
	}
	maxNeed := cfg.MaxNeedPerModelStream
	if maxNeed == 0 {
		maxNeed = math.Max(1, float64(limit)/2)
	}
	if cfg.GroupLimit == 0 {
		maxNeed = -1 // one group anyway
	}
	ms := herd.Aggregate(loads, maxNeed)
	p := &herd.Problem{ModelStreams: ms, ModelMem: make([]float64, len(cfg.Models)), AffinitySet: make([]int, len(cfg.Models)), Workers: cfg.Workers, GroupLimit: limit}
	// exact branch-and-bound for small instances, the heuristic otherwise
	plan, err := herd.Exact(p, herd.ExactLimits{MaxModelStreams: 4, MaxGroups: 4, MaxNodes: 20000})
	if err != nil {
		plan, err = herd.Heuristic(p)
	}
	if err != nil {
		return herd.Plan{}, nil, err
	}
	msOf := make([][]int, len(ms))
	for i := range ms {
		msOf[i] = ms[i].Streams
	}
	return plan, msOf, nil
}

// nexusSessionMap maps streams to Nexus sessions (model, SLO).
func nexusSessionMap(wl *Workload) ([]int, []flex.Session) {
	type key struct {
		m   int
		slo float64
	}
	idx := map[key]int{}
	var sessions []flex.Session
	of := make([]int, len(wl.Streams))
	for i, s := range wl.Streams {
		k := key{s.Model, s.SLO}
		j, ok := idx[k]
		if !ok {
			j = len(sessions)
			idx[k] = j
			sessions = append(sessions, flex.Session{Model: s.Model, SLO: s.SLO})
		}
		of[i] = j
	}
	return of, sessions
}

func nexusSessions(wl *Workload, _ []int, _ int) []flex.Session {
	_, s := nexusSessionMap(wl)
	return s
}

// nexusPeaks returns, per planning period, each session's peak rate
// (req/ms) over the period's peak windows.
func nexusPeaks(cfg Config, wl *Workload, sessionOf []int, nsess int) [][]float64 {
	periods := int(math.Ceil(wl.Duration / cfg.NexusPeriod))
	if periods < 1 {
		periods = 1
	}
	wins := int(math.Ceil(cfg.NexusPeriod / cfg.NexusPeakWindow))
	counts := make([][][]float64, periods)
	for p := range counts {
		counts[p] = make([][]float64, wins)
		for w := range counts[p] {
			counts[p][w] = make([]float64, nsess)
		}
	}
	src := wl.New()
	for {
		a, ok := src.Next()
		if !ok {
			break
		}
		p := int(a.T / cfg.NexusPeriod)
		if p >= periods {
			p = periods - 1
		}
		w := int((a.T - float64(p)*cfg.NexusPeriod) / cfg.NexusPeakWindow)
		if w >= wins {
			w = wins - 1
		}
		counts[p][w][sessionOf[a.Stream]]++
	}
	out := make([][]float64, periods)
	for p := range out {
		out[p] = make([]float64, nsess)
		// the last period may be partial: only its covered windows count
		span := math.Min(cfg.NexusPeriod, wl.Duration-float64(p)*cfg.NexusPeriod)
		nw := int(math.Ceil(span / cfg.NexusPeakWindow))
		for w := 0; w < nw && w < wins; w++ {
			wlen := math.Min(cfg.NexusPeakWindow, span-float64(w)*cfg.NexusPeakWindow)
			for s := range out[p] {
				out[p][s] = math.Max(out[p][s], counts[p][w][s]/wlen)
			}
		}
	}
	return out
}
