// Package router is the router actor every node runs. As the entry node it
// fixes the request type rho = (task, path from its vertex to the task's
// repository); as a member of a vertex it relays forwards addressed to its
// vertex to the vertex scheduler on the group leader; for the scheduler it
// forwards requests to the next vertex on the path, delayed by the edge RTT
// when RTTs are emulated (loopback). Every forward to another node is
// acknowledged; without an ack it is retried on another live member of the
// target vertex, and a vertex with no live member is routed around (the
// repository cannot be: then the request fails as unreachable).
//
// Core holds the logic, free of actors: Handle maps a message to the
// messages to send. Actor is the protoactor shell.
package router

import (
	"fmt"
	"log/slog"
	"math"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/idn-net/idn/actors/view"
	"github.com/idn-net/idn/actors/wire"
	"github.com/idn-net/idn/messages"
	"github.com/idn-net/idn/policy/idn"
)

// Submit is sent by the node (locally) for a request that enters here; the
// router fixes its path. Req.ReplyTo must be set.
type Submit struct {
	// Req is the new request; Path and Hop are filled in by the router.
	Req *messages.InferRequest
}

// ForwardOut asks the router to forward Req (handled at vertex Req.Path[Req.Hop])
// to the next vertex of its path. Sent locally by the vertex scheduler.
type ForwardOut struct {
	// Req is the request as received by the scheduler.
	Req *messages.InferRequest
}

// Tick drives ack timeouts and relay retries; the actor schedules it itself.
type Tick struct{}

// Redeliver hands back a request queued at this node's vertex scheduler when
// it stops leading: the router delivers it again to the vertex (its new
// leader's scheduler, once known).
type Redeliver struct {
	// Req is addressed to this node's vertex (Req.Path[Req.Hop]).
	Req *messages.InferRequest
}

// Hosted tells the router x^v of its own vertex (from the replicated state).
// With it the router forwards a request straight to the next vertex when no
// hosted model of the task meets the request's min_accuracy, without a
// round trip through the vertex scheduler (which would forward it anyway).
type Hosted struct {
	// Models are catalog model names.
	Models []string
}

// deliverNow is a forward whose emulated RTT has elapsed.
type deliverNow struct{ req *messages.InferRequest }

// Config configures a router.
type Config struct {
	// Node and Vertex name this node and its vertex.
	Node, Vertex string
	// SelfAddr is the address of this node's actor system.
	SelfAddr string
	// Graph is the IDN topology.
	Graph *idn.Graph
	// Catalog is the model catalog (tasks).
	Catalog *idn.Catalog
	// AckTimeout is how long a forward waits for its ack before a retry (default 500ms).
	AckTimeout time.Duration
	// EmulateRTT delays forwards by the edge RTT.
	EmulateRTT bool
	// TickEvery is the tick period (default 25ms).
	TickEvery time.Duration
	// Logger receives diagnostics; nil = discard.
	Logger *slog.Logger
}

type pending struct {
	req     *messages.InferRequest
	target  string // member name
	sentAt  time.Time
	tried   map[string]bool
	attempt int
}

// Stats are counters a router keeps (read through the actor's Stats message).
type Stats struct {
	// Forwards counts forwards sent to other nodes (including retries).
	Forwards uint64
	// Retries counts forwards re-sent after an ack timeout or a member failure.
	Retries uint64
	// Skipped counts vertices routed around for lack of live members.
	Skipped uint64
	// Malformed counts rejected wire messages.
	Malformed uint64
	// Shortcuts counts requests forwarded without asking the own vertex's
	// scheduler (no hosted model meets their min_accuracy).
	Shortcuts uint64
	// ControlRelayed and ControlDropped count INFIDA control envelopes
	// relayed to the vertex leader's allocator, or dropped without a leader.
	ControlRelayed, ControlDropped uint64
}

// Core is the router's logic.
type Core struct {
	cfg     Config
	view    view.View
	paths   map[string][]string
	pend    map[uint64]*pending
	relay   []*messages.InferRequest
	nextFID uint64
	rr      uint64
	self    *actor.PID
	stats   Stats
	out     []wire.Out
	// bestAcc is the best accuracy hosted here per task; nil = x^v unknown.
	bestAcc map[string]float64
}

// NewCore returns a router core.
func NewCore(cfg Config) *Core {
	if cfg.AckTimeout <= 0 {
		cfg.AckTimeout = 500 * time.Millisecond
	}
	if cfg.TickEvery <= 0 {
		cfg.TickEvery = 25 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Core{cfg: cfg, paths: map[string][]string{}, pend: map[uint64]*pending{},
		self: actor.NewPID(cfg.SelfAddr, view.RouterID)}
}

// Stats returns the counters.
func (c *Core) Stats() Stats { return c.stats }

// Pending returns the number of unacknowledged forwards and queued relays.
func (c *Core) Pending() int { return len(c.pend) + len(c.relay) }

// Path returns the routing path of task from this node's vertex (cached).
func (c *Core) Path(task string) ([]string, error) {
	if p, ok := c.paths[task]; ok {
		return p, nil
	}
	if _, ok := c.cfg.Catalog.TaskIndex(task); !ok {
		return nil, fmt.Errorf("task %q: %w", task, idn.ErrUnknownTask)
	}
	p, err := c.cfg.Graph.Path(c.cfg.Vertex, task)
	if err != nil {
		return nil, err
	}
	c.paths[task] = p
	return p, nil
}

// Handle processes one message at time now and returns the messages to send.
// The returned slice is reused by the next call.
func (c *Core) Handle(now time.Time, msg any) []wire.Out {
	c.out = c.out[:0]
	switch m := msg.(type) {
	case *Submit:
		c.submit(now, m.Req)
	case *messages.InferRequest:
		c.incoming(now, m)
	case *ForwardOut:
		c.forwardOut(now, m.Req)
	case *deliverNow:
		c.deliver(now, m.req, nil)
	case *Redeliver:
		if m.Req != nil && wire.ValidateRequest(m.Req) == nil {
			c.deliver(now, m.Req, map[string]bool{c.cfg.Node: true})
		}
	case *messages.ControlEnvelope:
		// INFIDA control traffic for this vertex (paper 000 Sec. IV-B):
		// senders address any live member; the router relays it to the
		// allocator of the vertex's leader. Without a known leader it is
		// dropped: the allocators' slot timeout absorbs the loss.
		if l := c.view.Leader(); l.RemoteAddr != "" && m != nil {
			c.stats.ControlRelayed++
			c.send(actor.NewPID(l.RemoteAddr, view.AllocatorID), m)
		} else {
			c.stats.ControlDropped++
		}
	case *messages.ForwardAck:
		delete(c.pend, m.GetForwardId())
	case *Tick:
		c.tick(now)
	case *view.MemberChanged:
		c.view.Apply(m)
		if !m.Member.Alive {
			c.retryTarget(now, m.Member.Name)
		}
	case *view.MembersSnapshot:
		c.view.Apply(m)
		for _, p := range c.sortedPending() {
			if !c.view.IsAlive(p.target) {
				c.retryTarget(now, p.target)
			}
		}
	case *view.LeaderChanged:
		c.view.Apply(m)
		c.flushRelay(now)
	case *Hosted:
		c.bestAcc = map[string]float64{}
		for _, name := range m.Models {
			if i, ok := c.cfg.Catalog.ModelIndex(name); ok {
				md := c.cfg.Catalog.Models[i]
				if a, seen := c.bestAcc[md.Task]; !seen || md.Accuracy > a {
					c.bestAcc[md.Task] = md.Accuracy
				}
			}
		}
	}
	return c.out
}

func (c *Core) send(to *actor.PID, msg any) {
	c.out = append(c.out, wire.Out{To: to, Msg: msg})
}

func (c *Core) reply(r *messages.InferRequest, kind messages.ErrorKind, format string, args ...any) {
	if to := wire.PID(r.GetReplyTo()); to != nil {
		c.send(to, wire.ErrorReply(r, kind, format, args...))
	}
}

func (c *Core) submit(now time.Time, r *messages.InferRequest) {
	if r == nil || !wire.ValidRef(r.ReplyTo) {
		c.stats.Malformed++
		return
	}
	path, err := c.Path(r.Task)
	if err != nil {
		c.reply(r, messages.ErrorKind_ERROR_KIND_BAD_REQUEST, "task: %v", err)
		return
	}
	r.Path = path
	r.Hop = 0
	if err := wire.ValidateRequest(r); err != nil {
		c.reply(r, messages.ErrorKind_ERROR_KIND_BAD_REQUEST, "%v", err)
		return
	}
	c.deliver(now, r, nil)
}

// incoming handles a forward addressed to this node's vertex.
func (c *Core) incoming(now time.Time, r *messages.InferRequest) {
	if err := wire.ValidateRequest(r); err != nil {
		c.stats.Malformed++
		c.cfg.Logger.Debug("router: dropping malformed forward", "err", err)
		if r != nil && wire.ValidRef(r.ReplyTo) && r.Id != "" {
			c.reply(r, messages.ErrorKind_ERROR_KIND_INTERNAL, "malformed forward: %v", err)
		}
		return
	}
	if r.Path[r.Hop] != c.cfg.Vertex {
		c.stats.Malformed++
		c.reply(r, messages.ErrorKind_ERROR_KIND_INTERNAL, "forward for vertex %q reached node %q of vertex %q", r.Path[r.Hop], c.cfg.Node, c.cfg.Vertex)
		return
	}
	if c.cannotServe(r) {
		// Accept (ack) and forward on ourselves.
		if to := wire.PID(r.AckTo); to != nil {
			c.send(to, &messages.ForwardAck{ForwardId: r.ForwardId, Vertex: c.cfg.Vertex, Node: c.cfg.Node})
		}
		c.stats.Shortcuts++
		c.forwardOut(now, r)
		return
	}
	c.relayToScheduler(now, r)
}

// relayToScheduler passes a request to the own vertex's scheduler, keeping
// its ack_to so the scheduler acknowledges the original sender.
func (c *Core) relayToScheduler(now time.Time, r *messages.InferRequest) {
	l := c.view.Leader()
	if l.RemoteAddr == "" {
		c.relay = append(c.relay, r)
		return
	}
	c.send(actor.NewPID(l.RemoteAddr, view.SchedulerID), r)
}

func (c *Core) flushRelay(now time.Time) {
	if len(c.relay) == 0 {
		return
	}
	l := c.view.Leader()
	keep := c.relay[:0]
	for _, r := range c.relay {
		switch {
		case wire.Expired(r, now):
			c.reply(r, messages.ErrorKind_ERROR_KIND_DEADLINE_EXCEEDED, "deadline exceeded waiting for a leader of vertex %q", c.cfg.Vertex)
		case l.RemoteAddr != "":
			c.send(actor.NewPID(l.RemoteAddr, view.SchedulerID), r)
		default:
			keep = append(keep, r)
		}
	}
	for i := len(keep); i < len(c.relay); i++ {
		c.relay[i] = nil
	}
	c.relay = keep
}

func (c *Core) forwardOut(now time.Time, r *messages.InferRequest) {
	if r == nil || int(r.Hop)+1 >= len(r.Path) {
		if r != nil {
			c.reply(r, messages.ErrorKind_ERROR_KIND_UNREACHABLE, "no vertex after %q on the path of task %q", r.Path[len(r.Path)-1], r.Task)
		}
		return
	}
	n := wire.Copy(r)
	from, to := r.Path[r.Hop], r.Path[r.Hop+1]
	rtt := c.cfg.Graph.RTT(from, to)
	if math.IsInf(rtt, 0) || math.IsNaN(rtt) {
		rtt = 0
	}
	n.Hop++
	n.RttMs += rtt
	n.AckTo, n.ForwardId = nil, 0
	if c.cfg.EmulateRTT && rtt > 0 {
		c.out = append(c.out, wire.Out{To: c.self, Msg: &deliverNow{req: n}, Delay: time.Duration(rtt * float64(time.Millisecond))})
		return
	}
	c.deliver(now, n, nil)
}

// deliver sends r to the vertex r.Path[r.Hop]: the local or remote scheduler
// of the own vertex, or the router of a live member of another vertex.
func (c *Core) deliver(now time.Time, r *messages.InferRequest, tried map[string]bool) {
	c.deliverAttempt(now, r, tried, 0)
}

func (c *Core) deliverAttempt(now time.Time, r *messages.InferRequest, tried map[string]bool, attempt int) {
	for {
		if wire.Expired(r, now) {
			c.reply(r, messages.ErrorKind_ERROR_KIND_DEADLINE_EXCEEDED, "deadline exceeded before reaching vertex %q", r.Path[r.Hop])
			return
		}
		v := r.Path[r.Hop]
		if v == c.cfg.Vertex && c.cannotServe(r) {
			c.stats.Shortcuts++
			c.forwardOut(now, r)
			return
		}
		if v == c.cfg.Vertex {
			l := c.view.Leader()
			if l.RemoteAddr == "" {
				c.relayToScheduler(now, r) // held until a leader is known
				return
			}
			// Tracked even when the scheduler is local: it may stop (leadership
			// lost) with the request in its mailbox.
			c.sendTracked(now, r, l.Name, actor.NewPID(l.RemoteAddr, view.SchedulerID), tried, attempt)
			return
		}
		live := c.view.Live(v)
		var pick *view.Member
		if len(live) > 0 {
			start := int(c.rr % uint64(len(live)))
			c.rr++
			for i := range live {
				m := &live[(start+i)%len(live)]
				if !tried[m.Name] {
					pick = m
					break
				}
			}
			if pick == nil { // every live member tried: start over
				tried = nil
				pick = &live[start]
			}
		}
		if pick != nil {
			c.sendTracked(now, r, pick.Name, actor.NewPID(pick.RemoteAddr, view.RouterID), tried, attempt)
			return
		}
		// No live member: route around the vertex.
		if int(r.Hop)+1 >= len(r.Path) {
			c.reply(r, messages.ErrorKind_ERROR_KIND_UNREACHABLE, "repository vertex %q of task %q has no live member", v, r.Task)
			return
		}
		c.stats.Skipped++
		n := wire.Copy(r)
		rtt := c.cfg.Graph.RTT(v, r.Path[r.Hop+1])
		if math.IsInf(rtt, 0) || math.IsNaN(rtt) {
			rtt = 0
		}
		n.RttMs += rtt
		n.Hop++
		if c.cfg.EmulateRTT && rtt > 0 {
			c.out = append(c.out, wire.Out{To: c.self, Msg: &deliverNow{req: n}, Delay: time.Duration(rtt * float64(time.Millisecond))})
			return
		}
		r = n
		tried = nil
	}
}

// cannotServe reports whether this vertex certainly cannot serve r: it is
// not the last vertex of the path (the repository always serves) and no
// model it hosts for r's task meets r's min_accuracy.
func (c *Core) cannotServe(r *messages.InferRequest) bool {
	if c.bestAcc == nil || int(r.Hop)+1 >= len(r.Path) {
		return false
	}
	a, ok := c.bestAcc[r.Task]
	return !ok || a < r.MinAccuracy
}

func (c *Core) sendTracked(now time.Time, r *messages.InferRequest, target string, to *actor.PID, tried map[string]bool, attempt int) {
	c.nextFID++
	n := wire.Copy(r)
	n.AckTo = wire.Ref(c.self)
	n.ForwardId = c.nextFID
	c.pend[n.ForwardId] = &pending{req: r, target: target, sentAt: now, tried: tried, attempt: attempt}
	c.stats.Forwards++
	c.send(to, n)
}

func (c *Core) sortedPending() []*pending {
	ids := make([]uint64, 0, len(c.pend))
	for id := range c.pend {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	out := make([]*pending, len(ids))
	for i, id := range ids {
		out[i] = c.pend[id]
	}
	return out
}

// retryTarget re-sends every pending forward to member name elsewhere.
func (c *Core) retryTarget(now time.Time, name string) {
	var ids []uint64
	for id, p := range c.pend {
		if p.target == name {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		c.retry(now, id)
	}
}

func (c *Core) retry(now time.Time, id uint64) {
	p := c.pend[id]
	delete(c.pend, id)
	if p.tried == nil {
		p.tried = map[string]bool{}
	}
	p.tried[p.target] = true
	c.stats.Retries++
	c.deliverAttempt(now, p.req, p.tried, p.attempt+1)
}

// ackTimeout doubles with every retry of a forward (capped at 8x), so a
// slow but live target is not flooded with duplicates.
func (c *Core) ackTimeout(attempt int) time.Duration {
	return c.cfg.AckTimeout << min(attempt, 3)
}

func (c *Core) tick(now time.Time) {
	var ids []uint64
	for id, p := range c.pend {
		if now.Sub(p.sentAt) >= c.ackTimeout(p.attempt) || wire.Expired(p.req, now) {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		c.retry(now, id)
	}
	c.flushRelay(now)
}
