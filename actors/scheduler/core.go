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
// Core is the logic, free of actors; Actor is the protoactor shell.
package scheduler

import (
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
}

type execState struct {
	pid     *actor.PID
	node    string
	busy    bool
	batch   uint64
	loaded  map[string]bool // nil = unknown: assume every hosted model
	missing map[string]bool
}

func (e *execState) key() string { return e.pid.Address + "/" + e.pid.Id }

func (e *execState) canRun(model string) bool {
	if e.missing[model] {
		return false
	}
	return e.loaded == nil || e.loaded[model]
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
	self     *actor.PID
	router   *actor.PID
	stats    Stats
	out      []wire.Out
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
	for _, m := range cfg.Hosted {
		c.hosted[m] = true
	}
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
		c.cands = nil
		c.hosted = map[string]bool{}
		for _, n := range m.Models {
			c.hosted[n] = true
		}
		c.dispatch(now)
	case *view.MembersSnapshot, *view.MemberChanged, *view.LeaderChanged:
		c.view.Apply(m)
		c.syncExecutors(now)
		c.dispatch(now)
	}
	return c.out
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
	cands := c.candidates(r.Task)
	for _, i := range cands {
		m := &c.cfg.Catalog.Models[i]
		if m.Accuracy < r.MinAccuracy {
			break
		}
		w, k := c.wait(m.Name)
		if k == 0 || len(c.queues[m.Name]) >= c.cfg.MaxQueue {
			continue
		}
		if r.DeadlineUnixNano > 0 && now.Add(w).UnixNano() > r.DeadlineUnixNano {
			continue
		}
		c.enqueue(now, m.Name, r)
		return
	}
	repository := int(r.Hop) == len(r.Path)-1
	if !repository {
		c.stats.Forwarded++
		c.send(c.router, &router.ForwardOut{Req: r})
		return
	}
	// The repository always serves: best acceptable model with room, else any.
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

func (c *Core) enqueue(now time.Time, model string, r *messages.InferRequest) {
	c.stats.Enqueued++
	c.known[r.Id] = true
	c.queues[model] = append(c.queues[model], item{req: r, enqueued: now})
	c.dispatch(now)
}

func (c *Core) syncExecutors(now time.Time) {
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
				e.missing = map[string]bool{}
			}
			e.missing[b.model] = true
		}
		c.requeueBatch(d.BatchId, d.Error)
	}
	c.dispatch(now)
}

func (c *Core) tick(now time.Time) {
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
	c.dispatch(now)
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
