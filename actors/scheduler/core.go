// Package scheduler is the group scheduler of a vertex, run on its Raft
// leader only. For each request addressed to the vertex it decides to serve
// here — a hosted model meets the request's min_accuracy and its queue is
// not saturated (the estimated wait still meets the deadline) — or to
// forward it to the next vertex of the path; the repository always serves
// (with its best acceptable model, else its best model) unless its queues
// are full (overloaded). Queues are per-model FIFO; an idle executor of the
// group gets a batch of up to MaxBatch requests of the model whose head has
// waited longest. Later issues replace this policy with FLEX, TAD-OP or PPO.
//
// With Config.Infida set the scheduler follows instead the serving rule of
// paper 000 Sec. III-E (the live counterpart of eq. 12 and idn.TypeServe):
// a request is served by the cheapest hosted model with capacity left in
// the current slot (Meter.Remaining) unless the allocator reports a cheaper
// alternative upstream (UpstreamCosts), in which case it is forwarded; the
// repository ignores capacities. Arrivals and admissions are recorded in the
// Meter (the measurements r_t and l_t of Sec. III-D), and the allocator is
// told which hosted models have exhausted their capacity (Exhausted).
//
// Core is the logic, free of actors; Actor is the protoactor shell.
package scheduler

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/idn-net/idn/actors/router"
	"github.com/idn-net/idn/actors/view"
	"github.com/idn-net/idn/actors/wire"
	"github.com/idn-net/idn/gpu"
	"github.com/idn-net/idn/messages"
	"github.com/idn-net/idn/policy/idn"
)

// HostedChanged sets x^v, the models hosted at the vertex (from the replicated state).
type HostedChanged struct {
	// Models are catalog model names.
	Models []string
}

// Tick expires queued requests and lost batches; the actor schedules it itself.
type Tick struct {
	// Gen identifies the actor incarnation that scheduled it: a tick of a
	// stopped scheduler reaching its successor (same process id) is dropped.
	Gen uint64
}

// Meter counts the per-slot measurements of paper 000 Sec. III-D at this vertex.
// Implementations must be safe for concurrent use (the allocator reads it).
type Meter interface {
	// Arrive records one request of type (task, entry vertex) entering the network here (hop 0).
	Arrive(now time.Time, task, entry string)
	// Serve records one request of type (task, entry) admitted here for model.
	Serve(now time.Time, task, entry, model string)
	// Remaining is the capacity L_m^v left for model in the slot containing now (+Inf: unlimited).
	Remaining(now time.Time, model string) float64
}

// Infida switches the scheduler to the serving rule of paper 000 Sec. III-E (nil: today's rule).
type Infida struct {
	// Meter records arrivals and admissions and bounds each model's load per slot.
	Meter Meter
	// LocalCost[model] = d_m^v + alpha*100*(1-a_m) (ms): gamma of paper 000 eq. 6 minus the
	// path RTT up to here. A hosted model without an entry costs +Inf (ranked last).
	LocalCost map[string]float64
	// Allocator receives Exhausted notices (may be nil).
	Allocator *actor.PID
}

// UpstreamCosts (from the allocator, local): Best[task] = cost, relative to this vertex
// (RTT from here + d + alpha*inacc), of the cheapest alternative upstream; absent = none known.
// Each message replaces the previous one.
type UpstreamCosts struct {
	// Best maps a task name to the cheapest upstream cost (ms).
	Best map[string]float64
}

// Exhausted (to Config.Infida.Allocator) lists hosted models with no capacity left in the current slot;
// sent whenever that set changes (including back to empty at a new slot).
type Exhausted struct {
	// Models are the exhausted model names, sorted.
	Models []string
}

// ErrInvalidConfig marks an invalid Config.
var ErrInvalidConfig = errors.New("scheduler: invalid config")

// Config configures a scheduler.
type Config struct {
	// Node and Vertex name the leader node and its vertex.
	Node, Vertex string
	// SelfAddr is the address of this node's actor system.
	SelfAddr string
	// Graph and Catalog are the topology and the model catalog.
	Graph   *idn.Graph
	Catalog *idn.Catalog
	// GPU is the GPU kind of the vertex (speed entries of the catalog).
	GPU string
	// LatencyScale multiplies profiled latencies in estimates (as the executors do).
	LatencyScale float64
	// Hosted is the initial x^v.
	Hosted []string
	// MaxBatch bounds a batch (default 8).
	MaxBatch int
	// MaxQueue bounds each model's queue (default 256).
	MaxQueue int
	// BatchGrace is added to a batch's expected latency before it is presumed lost (default 2s).
	BatchGrace time.Duration
	// TickEvery is the tick period (default 25ms).
	TickEvery time.Duration
	// Logger receives diagnostics; nil = discard.
	Logger *slog.Logger
	// Infida, when set, selects the INFIDA serving rule (paper 000 Sec. III-E).
	Infida *Infida
}

// Validate checks the configuration; errors wrap ErrInvalidConfig and name the field.
func (c Config) Validate() error {
	if c.Infida == nil {
		return nil
	}
	if c.Infida.Meter == nil {
		return fmt.Errorf("%w: infida.meter: nil", ErrInvalidConfig)
	}
	for m, v := range c.Infida.LocalCost {
		if math.IsNaN(v) {
			return fmt.Errorf("%w: infida.local_cost[%q]: NaN", ErrInvalidConfig, m)
		}
	}
	return nil
}

// unlimited is the Meter used when Infida.Meter is nil: it records nothing.
type unlimited struct{}

func (unlimited) Arrive(time.Time, string, string)        {}
func (unlimited) Serve(time.Time, string, string, string) {}
func (unlimited) Remaining(time.Time, string) float64     { return math.Inf(1) }

type execState struct {
	pid   *actor.PID
	node  string
	busy  bool
	batch uint64
	// loaded is the executor's last reported model set (informational:
	// models load and unload asynchronously as x^v changes, so a report
	// goes stale; dispatch relies on missing instead).
	loaded map[string]bool
	// missing marks models the executor refused as not loaded, with when;
	// a mark expires after missingRetry so a model loaded since is used.
	missing map[string]time.Time
}

// missingRetry is how long a model an executor refused as not loaded is
// kept off that executor before it is tried again.
const missingRetry = 250 * time.Millisecond

func (e *execState) key() string { return e.pid.Address + "/" + e.pid.Id }

func (e *execState) canRun(model string) bool {
	_, miss := e.missing[model]
	return !miss
}

type item struct {
	req      *messages.InferRequest
	enqueued time.Time
}

type batch struct {
	exec   *execState
	model  string
	items  []item
	sentAt time.Time
	expect time.Duration
}

// Stats are the scheduler's counters.
type Stats struct {
	// Enqueued counts requests accepted for service here.
	Enqueued uint64
	// Forwarded counts requests sent on to the next vertex.
	Forwarded uint64
	// Overloaded counts requests refused at the repository.
	Overloaded uint64
	// Expired counts requests that missed their deadline in the queue.
	Expired uint64
	// Batches counts dispatched batches.
	Batches uint64
	// Requeued counts requests put back after a failed or lost batch.
	Requeued uint64
	// Duplicates counts re-sent requests already queued or running here (acked, not queued again).
	Duplicates uint64
	// Redecided counts queued requests decided again because their model stopped being hosted.
	Redecided uint64
	// Exhausted counts Exhausted notices sent to the allocator.
	Exhausted uint64
}

// Core is the scheduler's logic.
type Core struct {
	cfg      Config
	view     view.View
	hosted   map[string]bool
	queues   map[string][]item
	execs    map[string]*execState
	execList []*execState
	inflight map[uint64]*batch
	known    map[string]bool  // ids queued or in flight: duplicates (retried forwards) are only acked
	cands    map[string][]int // task -> hosted models, best accuracy first (reset when x^v changes)
	nextB    uint64
	// INFIDA mode (cfg.Infida != nil).
	meter     Meter
	localCost map[string]float64
	icands    map[string][]int     // task -> hosted models, cheapest LocalCost first (reset when x^v changes)
	upstream  map[string]float64   // UpstreamCosts.Best
	exhausted []string             // last set sent in Exhausted
	arrived   map[string]time.Time // hop-0 ids counted by Meter.Arrive -> forget after
	hostedL   []string             // sorted x^v
	self      *actor.PID
	router    *actor.PID
	stats     Stats
	out       []wire.Out
}

// NewCore returns a scheduler core.
func NewCore(cfg Config) *Core {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 8
	}
	if cfg.MaxQueue <= 0 {
		cfg.MaxQueue = 256
	}
	if cfg.BatchGrace <= 0 {
		cfg.BatchGrace = 2 * time.Second
	}
	if cfg.TickEvery <= 0 {
		cfg.TickEvery = 25 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Core{cfg: cfg, hosted: map[string]bool{}, queues: map[string][]item{}, execs: map[string]*execState{},
		inflight: map[uint64]*batch{}, known: map[string]bool{},
		self: actor.NewPID(cfg.SelfAddr, view.SchedulerID), router: actor.NewPID(cfg.SelfAddr, view.RouterID)}
	if inf := cfg.Infida; inf != nil {
		c.meter = inf.Meter
		if c.meter == nil {
			c.meter = unlimited{}
		}
		c.localCost = make(map[string]float64, len(inf.LocalCost))
		for m, v := range inf.LocalCost {
			c.localCost[m] = v
		}
		c.upstream = map[string]float64{}
		c.arrived = map[string]time.Time{}
	}
	c.setHosted(cfg.Hosted)
	return c
}

// Stats returns the counters.
func (c *Core) Stats() Stats { return c.stats }

// Queued returns the number of queued requests.
func (c *Core) Queued() int {
	n := 0
	for _, q := range c.queues {
		n += len(q)
	}
	return n
}

// Handle processes one message at now and returns the messages to send.
func (c *Core) Handle(now time.Time, msg any) []wire.Out {
	c.out = c.out[:0]
	switch m := msg.(type) {
	case *messages.InferRequest:
		c.request(now, m)
	case *messages.BatchDone:
		c.batchDone(now, m)
	case *Tick:
		c.tick(now)
	case *HostedChanged:
		c.setHosted(m.Models)
		for _, e := range c.execList {
			e.missing = nil // the executors reload for the new x^v
		}
	case *UpstreamCosts:
		if c.cfg.Infida != nil {
			c.upstream = make(map[string]float64, len(m.Best))
			for t, v := range m.Best {
				if !math.IsNaN(v) {
					c.upstream[t] = v
				}
			}
		}
		return c.out
	case *view.MembersSnapshot, *view.MemberChanged, *view.LeaderChanged:
		c.view.Apply(m)
		c.syncExecutors()
	default:
		return c.out
	}
	c.redecideOrphans(now)
	c.dispatch(now)
	c.checkExhausted(now)
	return c.out
}

func (c *Core) setHosted(models []string) {
	c.cands, c.icands = nil, nil
	c.hosted = make(map[string]bool, len(models))
	for _, n := range models {
		c.hosted[n] = true
	}
	c.hostedL = c.hostedL[:0]
	for n := range c.hosted {
		c.hostedL = append(c.hostedL, n)
	}
	sort.Strings(c.hostedL)
}

// Handover hands every queued request back to the local router for
// redelivery to the vertex's next leader (leadership lost, node still up).
func (c *Core) Handover() []wire.Out {
	c.out = c.out[:0]
	models := make([]string, 0, len(c.queues))
	for m := range c.queues {
		models = append(models, m)
	}
	sort.Strings(models)
	for _, m := range models {
		for _, it := range c.queues[m] {
			c.send(c.router, &router.Redeliver{Req: it.req})
		}
	}
	c.queues = map[string][]item{}
	c.known = map[string]bool{}
	return c.out
}

// Drain replies unreachable to every queued request (leadership lost or stop).
func (c *Core) Drain() []wire.Out {
	c.out = c.out[:0]
	models := make([]string, 0, len(c.queues))
	for m := range c.queues {
		models = append(models, m)
	}
	sort.Strings(models)
	for _, m := range models {
		for _, it := range c.queues[m] {
			c.reply(it.req, messages.ErrorKind_ERROR_KIND_UNREACHABLE, "vertex %q scheduler on %q stopped (leadership change)", c.cfg.Vertex, c.cfg.Node)
		}
	}
	c.queues = map[string][]item{}
	c.known = map[string]bool{}
	return c.out
}

func (c *Core) send(to *actor.PID, msg any) { c.out = append(c.out, wire.Out{To: to, Msg: msg}) }

func (c *Core) reply(r *messages.InferRequest, kind messages.ErrorKind, format string, args ...any) {
	if to := wire.PID(r.GetReplyTo()); to != nil {
		c.send(to, wire.ErrorReply(r, kind, format, args...))
	}
}

func (c *Core) profile(model string) gpu.Profile {
	i, ok := c.cfg.Catalog.ModelIndex(model)
	if !ok {
		return gpu.Profile{}
	}
	return ProfileOf(c.cfg.Catalog, i, c.cfg.GPU)
}

// ProfileOf derives the alpha, beta profile of catalog model m on a GPU kind
// from the catalog's Speed (alpha_ms/beta_ms, or 1000/fps per request).
func ProfileOf(cat *idn.Catalog, m int, gpuKind string) gpu.Profile {
	s, err := cat.Speed(m, gpuKind)
	if err != nil {
		return gpu.Profile{}
	}
	one, two := s.BatchLatencyMs(1), s.BatchLatencyMs(2)
	if math.IsInf(one, 0) || math.IsInf(two, 0) {
		return gpu.Profile{}
	}
	alpha := two - one
	return gpu.Profile{AlphaMs: alpha, BetaMs: one - alpha}
}

// candidates returns the hosted models of task, best accuracy first. The
// slice is cached until x^v changes and must not be modified.
func (c *Core) candidates(task string) []int {
	if out, ok := c.cands[task]; ok {
		return out
	}
	if c.cands == nil {
		c.cands = map[string][]int{}
	}
	out := c.computeCandidates(task)
	if _, known := c.cfg.Catalog.TaskIndex(task); known { // never cache names from the wire
		c.cands[task] = out
	}
	return out
}

func (c *Core) computeCandidates(task string) []int {
	var out []int
	for _, i := range c.cfg.Catalog.ModelsFor(task) {
		if c.hosted[c.cfg.Catalog.Models[i].Name] {
			out = append(out, i)
		}
	}
	sort.SliceStable(out, func(a, b int) bool {
		return c.cfg.Catalog.Models[out[a]].Accuracy > c.cfg.Catalog.Models[out[b]].Accuracy
	})
	return out
}

func (c *Core) runners(model string) int {
	n := 0
	for _, e := range c.execList {
		if e.canRun(model) {
			n++
		}
	}
	return n
}

// wait estimates the time a new request of model waits and is served.
func (c *Core) wait(model string) (time.Duration, int) {
	k := c.runners(model)
	if k == 0 {
		return time.Duration(math.MaxInt64), 0
	}
	p := c.profile(model)
	scale := c.cfg.LatencyScale
	full := time.Duration(float64(p.BatchLatency(c.cfg.MaxBatch)) * scale)
	q := len(c.queues[model]) + 1
	batches := (q + c.cfg.MaxBatch - 1) / c.cfg.MaxBatch
	return time.Duration(int64(full) * int64(batches) / int64(k)), k
}

func (c *Core) request(now time.Time, r *messages.InferRequest) {
	if err := wire.ValidateRequest(r); err != nil {
		if r != nil && wire.ValidRef(r.ReplyTo) && r.Id != "" {
			c.reply(r, messages.ErrorKind_ERROR_KIND_INTERNAL, "malformed request at scheduler: %v", err)
		}
		return
	}
	if to := wire.PID(r.AckTo); to != nil {
		c.send(to, &messages.ForwardAck{ForwardId: r.ForwardId, Vertex: c.cfg.Vertex, Node: c.cfg.Node, Scheduler: wire.Ref(c.self)})
	}
	if r.Path[r.Hop] != c.cfg.Vertex {
		c.reply(r, messages.ErrorKind_ERROR_KIND_INTERNAL, "request for vertex %q reached the scheduler of %q", r.Path[r.Hop], c.cfg.Vertex)
		return
	}
	if c.known[r.Id] {
		c.stats.Duplicates++
		return
	}
	if wire.Expired(r, now) {
		c.stats.Expired++
		c.reply(r, messages.ErrorKind_ERROR_KIND_DEADLINE_EXCEEDED, "deadline exceeded on arrival at vertex %q", c.cfg.Vertex)
		return
	}
	if c.cfg.Infida != nil && r.Hop == 0 {
		if _, seen := c.arrived[r.Id]; !seen {
			// Remember the id until its deadline (a retried forward is counted once).
			forget := now.Add(arrivedKeep)
			if r.DeadlineUnixNano > 0 {
				forget = time.Unix(0, r.DeadlineUnixNano).Add(time.Second)
			}
			c.arrived[r.Id] = forget
			c.meter.Arrive(now, r.Task, r.Path[0])
		}
	}
	c.decide(now, r)
}

// arrivedKeep is how long the id of a hop-0 request without a deadline is
// remembered to count it once in Meter.Arrive.
const arrivedKeep = time.Minute

// decide serves r here (enqueue), forwards it to the next vertex, or, at the
// repository with nothing usable, refuses it. r is valid, addressed to this
// vertex, not queued and not expired.
func (c *Core) decide(now time.Time, r *messages.InferRequest) {
	repository := int(r.Hop) == len(r.Path)-1
	var model string
	if c.cfg.Infida != nil {
		model = c.pickInfida(now, r, repository)
	} else {
		model = c.pickAccurate(now, r)
	}
	if model != "" {
		c.enqueue(now, model, r)
		return
	}
	if !repository {
		c.stats.Forwarded++
		c.send(c.router, &router.ForwardOut{Req: r})
		return
	}
	// The repository always serves: best acceptable model with room, else any.
	cands := c.candidates(r.Task)
	best, bestWait := "", time.Duration(math.MaxInt64)
	for pass := 0; pass < 2 && best == ""; pass++ {
		for _, i := range cands {
			m := &c.cfg.Catalog.Models[i]
			if pass == 0 && m.Accuracy < r.MinAccuracy {
				continue
			}
			w, k := c.wait(m.Name)
			if k == 0 || len(c.queues[m.Name]) >= c.cfg.MaxQueue {
				continue
			}
			if w < bestWait {
				best, bestWait = m.Name, w
			}
		}
	}
	if best == "" {
		if len(cands) == 0 {
			c.reply(r, messages.ErrorKind_ERROR_KIND_UNREACHABLE, "repository vertex %q hosts no model of task %q on a live executor", c.cfg.Vertex, r.Task)
			return
		}
		c.stats.Overloaded++
		c.reply(r, messages.ErrorKind_ERROR_KIND_OVERLOADED, "repository vertex %q: every queue of task %q is full", c.cfg.Vertex, r.Task)
		return
	}
	c.enqueue(now, best, r)
}

// usable reports whether a new request r can be queued for model: a live
// executor can run it, its queue has room and the estimated wait meets r's deadline.
func (c *Core) usable(now time.Time, r *messages.InferRequest, model string) bool {
	w, k := c.wait(model)
	if k == 0 || len(c.queues[model]) >= c.cfg.MaxQueue {
		return false
	}
	return r.DeadlineUnixNano <= 0 || now.Add(w).UnixNano() <= r.DeadlineUnixNano
}

// pickAccurate is the default rule: the most accurate usable hosted model
// meeting r's min_accuracy ("" = none).
func (c *Core) pickAccurate(now time.Time, r *messages.InferRequest) string {
	for _, i := range c.candidates(r.Task) {
		m := &c.cfg.Catalog.Models[i]
		if m.Accuracy < r.MinAccuracy {
			break
		}
		if c.usable(now, r, m.Name) {
			return m.Name
		}
	}
	return ""
}

// pickInfida is the serving rule of paper 000 Sec. III-E at this vertex:
// the cheapest usable hosted model with capacity left in the slot (the
// repository ignores capacities, as idn.TypeServe), unless a strictly
// cheaper alternative is known upstream ("" = forward, or at the
// repository: nothing usable).
func (c *Core) pickInfida(now time.Time, r *messages.InferRequest, repository bool) string {
	for _, i := range c.infidaCandidates(r.Task) {
		m := &c.cfg.Catalog.Models[i]
		if m.Accuracy < r.MinAccuracy {
			continue
		}
		if !repository && !(c.meter.Remaining(now, m.Name) > 0) {
			continue
		}
		if !c.usable(now, r, m.Name) {
			continue
		}
		if !repository {
			if up, ok := c.upstream[r.Task]; ok && up < c.cost(m.Name) {
				return ""
			}
		}
		return m.Name
	}
	return ""
}

// cost returns LocalCost[model] (+Inf when absent).
func (c *Core) cost(model string) float64 {
	if v, ok := c.localCost[model]; ok {
		return v
	}
	return math.Inf(1)
}

// infidaCandidates returns the hosted models of task, cheapest LocalCost
// first (ties: name). Cached like candidates; must not be modified.
func (c *Core) infidaCandidates(task string) []int {
	if out, ok := c.icands[task]; ok {
		return out
	}
	if c.icands == nil {
		c.icands = map[string][]int{}
	}
	out := c.computeCandidates(task)
	models := c.cfg.Catalog.Models
	sort.SliceStable(out, func(a, b int) bool {
		ca, cb := c.cost(models[out[a]].Name), c.cost(models[out[b]].Name)
		if ca != cb {
			return ca < cb
		}
		return models[out[a]].Name < models[out[b]].Name
	})
	if _, known := c.cfg.Catalog.TaskIndex(task); known {
		c.icands[task] = out
	}
	return out
}

// enqueue admits r for model here (recorded in the Meter in INFIDA mode).
func (c *Core) enqueue(now time.Time, model string, r *messages.InferRequest) {
	c.stats.Enqueued++
	c.known[r.Id] = true
	c.queues[model] = append(c.queues[model], item{req: r, enqueued: now})
	if c.cfg.Infida != nil {
		c.meter.Serve(now, r.Task, r.Path[0], model)
	}
}

// redecideOrphans decides again every queued request of a model no longer
// hosted (x^v changed, or its batch failed afterwards): served by another
// hosted model, forwarded, or refused at the repository; never dropped.
func (c *Core) redecideOrphans(now time.Time) {
	var orphans []string
	for m, q := range c.queues {
		if !c.hosted[m] && len(q) > 0 {
			orphans = append(orphans, m)
		}
	}
	if len(orphans) == 0 {
		return
	}
	sort.Strings(orphans)
	for _, m := range orphans {
		q := c.queues[m]
		delete(c.queues, m)
		for _, it := range q {
			delete(c.known, it.req.Id)
			c.stats.Redecided++
			if wire.Expired(it.req, now) {
				c.stats.Expired++
				c.reply(it.req, messages.ErrorKind_ERROR_KIND_DEADLINE_EXCEEDED, "deadline exceeded queued for model %q at vertex %q", m, c.cfg.Vertex)
				continue
			}
			c.decide(now, it.req)
		}
	}
}

// checkExhausted sends Exhausted to the allocator when the set of hosted
// models with no capacity left in the current slot changes.
func (c *Core) checkExhausted(now time.Time) {
	if c.cfg.Infida == nil {
		return
	}
	var set []string
	for _, m := range c.hostedL {
		if !(c.meter.Remaining(now, m) > 0) {
			set = append(set, m)
		}
	}
	if equalStrings(set, c.exhausted) {
		return
	}
	c.exhausted = set
	if to := c.cfg.Infida.Allocator; to != nil {
		c.stats.Exhausted++
		c.send(to, &Exhausted{Models: append([]string{}, set...)})
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (c *Core) syncExecutors() {
	want := map[string]bool{}
	for _, m := range c.view.Live(c.cfg.Vertex) {
		for i := 0; i < m.GPUs; i++ {
			pid := actor.NewPID(m.RemoteAddr, view.ExecutorID(i))
			k := pid.Address + "/" + pid.Id
			want[k] = true
			if _, ok := c.execs[k]; !ok {
				c.execs[k] = &execState{pid: pid, node: m.Name}
			}
		}
	}
	for k, e := range c.execs {
		if !want[k] {
			if e.busy {
				c.requeueBatch(e.batch, "executor left")
			}
			delete(c.execs, k)
		}
	}
	c.execList = c.execList[:0]
	for _, e := range c.execs {
		c.execList = append(c.execList, e)
	}
	sort.Slice(c.execList, func(i, j int) bool { return c.execList[i].key() < c.execList[j].key() })
}

func (c *Core) requeueBatch(id uint64, why string) {
	b, ok := c.inflight[id]
	if !ok {
		return
	}
	delete(c.inflight, id)
	b.exec.busy = false
	c.stats.Requeued += uint64(len(b.items))
	c.cfg.Logger.Debug("scheduler: requeue batch", "batch", id, "model", b.model, "n", len(b.items), "why", why)
	q := c.queues[b.model]
	nq := make([]item, 0, len(q)+len(b.items))
	nq = append(nq, b.items...)
	c.queues[b.model] = append(nq, q...)
}

func (c *Core) batchDone(now time.Time, d *messages.BatchDone) {
	b, ok := c.inflight[d.GetBatchId()]
	if !ok {
		return
	}
	e := b.exec
	if d.Loaded != nil || d.Ok {
		e.loaded = map[string]bool{}
		for _, m := range d.Loaded {
			e.loaded[m] = true
			delete(e.missing, m) // loaded after all: missing is not sticky
		}
	}
	if d.Ok {
		delete(c.inflight, d.BatchId)
		for _, it := range b.items {
			delete(c.known, it.req.Id)
		}
		e.busy = false
	} else {
		if strings.Contains(d.Error, gpu.ErrNotLoaded.Error()) {
			if e.missing == nil {
				e.missing = map[string]time.Time{}
			}
			e.missing[b.model] = now
		}
		c.requeueBatch(d.BatchId, d.Error)
	}
}

func (c *Core) tick(now time.Time) {
	for _, e := range c.execList {
		for m, at := range e.missing {
			if now.Sub(at) >= missingRetry {
				delete(e.missing, m)
			}
		}
	}
	for model, q := range c.queues {
		keep := q[:0]
		for _, it := range q {
			if wire.Expired(it.req, now) {
				delete(c.known, it.req.Id)
				c.stats.Expired++
				c.reply(it.req, messages.ErrorKind_ERROR_KIND_DEADLINE_EXCEEDED, "deadline exceeded queued for model %q at vertex %q", model, c.cfg.Vertex)
				continue
			}
			keep = append(keep, it)
		}
		if len(keep) == 0 {
			delete(c.queues, model)
		} else {
			c.queues[model] = keep
		}
	}
	var lost []uint64
	for id, b := range c.inflight {
		if now.Sub(b.sentAt) > b.expect+c.cfg.BatchGrace {
			lost = append(lost, id)
		}
	}
	sort.Slice(lost, func(i, j int) bool { return lost[i] < lost[j] })
	for _, id := range lost {
		c.requeueBatch(id, "batch timed out")
	}
	for id, forget := range c.arrived {
		if now.After(forget) {
			delete(c.arrived, id)
		}
	}
}

// dispatch gives every idle executor a batch of the model whose head waited longest.
func (c *Core) dispatch(now time.Time) {
	for _, e := range c.execList {
		if e.busy {
			continue
		}
		best := ""
		var bestAt time.Time
		for model, q := range c.queues {
			if len(q) == 0 || !e.canRun(model) {
				continue
			}
			if best == "" || q[0].enqueued.Before(bestAt) || q[0].enqueued.Equal(bestAt) && model < best {
				best, bestAt = model, q[0].enqueued
			}
		}
		if best == "" {
			continue
		}
		q := c.queues[best]
		var items []item
		i := 0
		for ; i < len(q) && len(items) < c.cfg.MaxBatch; i++ {
			if wire.Expired(q[i].req, now) {
				delete(c.known, q[i].req.Id)
				c.stats.Expired++
				c.reply(q[i].req, messages.ErrorKind_ERROR_KIND_DEADLINE_EXCEEDED, "deadline exceeded queued for model %q at vertex %q", best, c.cfg.Vertex)
				continue
			}
			items = append(items, q[i])
		}
		if i == len(q) {
			delete(c.queues, best)
		} else {
			c.queues[best] = q[i:]
		}
		if len(items) == 0 {
			continue
		}
		c.nextB++
		id := c.nextB
		rb := &messages.RunBatch{BatchId: id, Model: best, Vertex: c.cfg.Vertex, DoneTo: wire.Ref(c.self), Items: make([]*messages.BatchItem, len(items))}
		for j, it := range items {
			rb.Items[j] = &messages.BatchItem{Request: it.req, EnqueuedUnixNano: it.enqueued.UnixNano()}
		}
		p := c.profile(best)
		c.inflight[id] = &batch{exec: e, model: best, items: items, sentAt: now,
			expect: time.Duration(float64(p.BatchLatency(len(items))) * c.cfg.LatencyScale)}
		e.busy, e.batch = true, id
		c.stats.Batches++
		c.send(e.pid, rb)
	}
}
