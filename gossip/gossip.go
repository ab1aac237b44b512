// Package gossip is IDN's cluster membership: every node runs memberlist,
// joins through any live seed (retrying with capped exponential backoff),
// gossips a small metadata record (vertex, tier, addresses, GPU inventory),
// reports join/leave/fail/update events through a non-blocking callback and
// leaves gracefully on shutdown. Gossip can be encrypted with a shared key.
//
// Timing (see DefaultConfig / DefaultLocalConfig): on the LAN preset a
// crashed node is declared failed after ~6-7 s; on the loopback preset after
// ~1 s (under 3 s). A graceful Leave is seen by the others in ~0.1 s.
package gossip

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"google.golang.org/protobuf/proto"

	"github.com/idn-net/idn/internal/hostport"
	"github.com/idn-net/idn/messages"
)

// ErrShutdown is returned by operations on a Gossip that was shut down.
var ErrShutdown = errors.New("gossip: shut down")

// MemberState is a member's liveness as seen by this node.
type MemberState int

const (
	MemberAlive MemberState = iota
	MemberSuspect
	MemberDead
	MemberLeft
)

func (s MemberState) String() string {
	switch s {
	case MemberAlive:
		return "alive"
	case MemberSuspect:
		return "suspect"
	case MemberDead:
		return "dead"
	case MemberLeft:
		return "left"
	}
	return "unknown(" + strconv.Itoa(int(s)) + ")"
}

// Member is one node of the cluster.
type Member struct {
	Name  string
	Addr  string // gossip host:port
	Meta  Meta
	State MemberState
}

// EventKind says what happened to a member.
type EventKind int

const (
	// EventJoin: a node joined (also delivered once for the local node).
	EventJoin EventKind = iota
	// EventLeave: a node left gracefully (Leave).
	EventLeave
	// EventFail: a node was declared dead by failure detection. It is
	// delivered after a short grace (2 x GossipInterval, 100 ms..1 s) during
	// which a late leave intent turns it into EventLeave.
	EventFail
	// EventUpdate: a node's metadata changed.
	EventUpdate
)

func (k EventKind) String() string {
	switch k {
	case EventJoin:
		return "join"
	case EventLeave:
		return "leave"
	case EventFail:
		return "fail"
	case EventUpdate:
		return "update"
	}
	return "unknown(" + strconv.Itoa(int(k)) + ")"
}

// Event is one membership change.
type Event struct {
	Kind   EventKind
	Member Member
}

// Gossip is one node's membership agent.
type Gossip struct {
	cfg     Config
	log     *slog.Logger
	ml      *memberlist.Memberlist
	onEvent func(Event)
	addr    string // bound host:port

	metaMu sync.Mutex
	meta   []byte
	metaV  Meta

	// live members as reported by memberlist's event delegate (called under
	// memberlist's lock, so copies taken there are race-free; memberlist's
	// Members() hands out nodes it keeps mutating).
	tableMu sync.Mutex
	table   map[string]Member
	advAddr string // this node's advertised host:port

	failedMu   sync.Mutex
	failed     map[string]failedMember // failed (not left) members to reconnect to
	joinCalled atomic.Bool

	intentMu sync.Mutex
	intents  map[string]time.Time // node name -> when its leave intent arrived

	evMu    sync.Mutex
	evQueue []queuedEvent
	evWake  chan struct{}

	ctx          context.Context // cancelled at Shutdown
	cancel       context.CancelFunc
	shutdownCh   chan struct{}
	shutdownOnce sync.Once
	shutdownErr  error
	wg           sync.WaitGroup
}

// New validates cfg, binds the gossip port and starts memberlist. It does not
// contact the seeds: call Join. onEvent (may be nil) receives membership
// events in order from one goroutine owned by Gossip; it must not block for
// long (the node forwards events to its actors with a non-blocking send).
// Events queue up while onEvent runs, so a slow callback delays later events
// but never stalls memberlist. onEvent may call Members and the other
// methods, but not Shutdown (which waits for it).
func New(cfg Config, onEvent func(Event)) (*Gossip, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	lg := cfg.Logger
	if lg == nil {
		lg = discardLogger
	}
	lg = lg.With("component", "gossip", "node", cfg.NodeName)
	meta, err := cfg.Meta.Encode()
	if err != nil {
		return nil, fmt.Errorf("gossip: Meta: %w", err)
	}
	g := &Gossip{
		cfg:        cfg,
		log:        lg,
		onEvent:    onEvent,
		meta:       meta,
		metaV:      cfg.Meta,
		evWake:     make(chan struct{}, 1),
		intents:    map[string]time.Time{},
		table:      map[string]Member{},
		failed:     map[string]failedMember{},
		shutdownCh: make(chan struct{}),
	}
	g.ctx, g.cancel = context.WithCancel(context.Background())

	bindHost, bindPort, _ := hostport.Split(cfg.BindAddr)
	stdLog := newStdLogger(lg)
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{
		BindAddrs: []string{bindHost},
		BindPort:  bindPort,
		Logger:    stdLog,
	})
	if err != nil {
		return nil, fmt.Errorf("gossip: BindAddr %s: %w", cfg.BindAddr, err)
	}
	port := nt.GetAutoBindPort()
	advHost, advPort := bindHost, port
	if cfg.AdvertiseAddr != "" {
		h, p, _ := hostport.Split(cfg.AdvertiseAddr)
		advHost = h
		if p != 0 {
			advPort = p
		}
	} else if ip := net.ParseIP(bindHost); ip != nil && ip.IsUnspecified() {
		advHost = "" // let memberlist pick a private address
	}
	g.addr = net.JoinHostPort(bindHost, strconv.Itoa(port))

	var trans memberlist.Transport = nt
	if cfg.Drop != nil {
		trans = newDropTransport(nt, cfg.Drop)
	}

	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.NodeName
	mc.Transport = trans
	mc.BindAddr = bindHost
	mc.BindPort = port
	mc.AdvertiseAddr = advHost
	mc.AdvertisePort = advPort
	mc.ProbeInterval = cfg.ProbeInterval
	mc.ProbeTimeout = cfg.ProbeTimeout
	mc.SuspicionMult = cfg.SuspicionMult
	mc.GossipInterval = cfg.GossipInterval
	mc.PushPullInterval = cfg.PushPullInterval
	mc.TCPTimeout = cfg.TCPTimeout
	mc.DeadNodeReclaimTime = cfg.DeadNodeReclaimTime
	if cfg.GossipInterval < 200*time.Millisecond {
		// faster gossip: forget dead nodes sooner too (loopback preset)
		mc.GossipToTheDeadTime = 15 * cfg.ProbeInterval
	}
	mc.Logger = stdLog
	mc.Delegate = (*delegate)(g)
	mc.Events = (*eventDelegate)(g)
	if len(cfg.SecretKey) > 0 {
		kr, err := memberlist.NewKeyring(nil, slices.Clone(cfg.SecretKey))
		if err != nil {
			_ = trans.Shutdown()
			return nil, fmt.Errorf("gossip: SecretKey: %w", err)
		}
		mc.Keyring = kr
		mc.GossipVerifyIncoming = true
		mc.GossipVerifyOutgoing = true
	}

	g.wg.Add(1)
	go g.dispatch()

	ml, err := memberlist.Create(mc)
	if err != nil {
		_ = trans.Shutdown()
		g.stopDispatch()
		return nil, fmt.Errorf("gossip: start memberlist: %w", err)
	}
	g.ml = ml
	g.advAddr = ml.LocalNode().Address() // not mutated before Join
	g.wg.Add(1)
	go g.reconnectLoop()
	lg.Debug("gossip started", "addr", g.addr)
	return g, nil
}

// Addr returns the bound gossip host:port (the port is concrete even when
// BindAddr asked for port 0).
func (g *Gossip) Addr() string { return g.addr }

// Join contacts the seeds until one answers, retrying with capped exponential
// backoff (Config.JoinBackoffMin..Max, with jitter). It returns nil as soon as
// one seed answered, ctx.Err() when ctx ends first, ErrShutdown after
// Shutdown. With no seeds other than this node itself it returns nil at once
// (the node starts a new cluster).
func (g *Gossip) Join(ctx context.Context) error {
	g.joinCalled.Store(true)
	seeds := make([]string, 0, len(g.cfg.Seeds))
	self := g.advAddr
	for _, s := range g.cfg.Seeds {
		if s != self && s != g.addr {
			seeds = append(seeds, s)
		}
	}
	if len(seeds) == 0 {
		return nil
	}
	return retryBackoff(ctx, g.shutdownCh, g.cfg.JoinBackoffMin, g.cfg.JoinBackoffMax, halfJitter,
		func(attempt int) bool {
			n, err := g.ml.Join(seeds)
			if n > 0 {
				g.log.Info("joined cluster", "contacted", n, "attempt", attempt)
				return true
			}
			g.log.Debug("join: no seed answered", "seeds", seeds, "attempt", attempt, "err", err)
			return false
		})
}

type failedMember struct {
	addr string
	at   time.Time
}

func (g *Gossip) trackFailed(ev Event) {
	g.failedMu.Lock()
	defer g.failedMu.Unlock()
	switch ev.Kind {
	case EventFail:
		g.failed[ev.Member.Name] = failedMember{addr: ev.Member.Addr, at: time.Now()}
	case EventJoin, EventLeave:
		delete(g.failed, ev.Member.Name)
	}
}

// reconnectTargets returns one random recently failed member's address, and
// the seeds when this node is alone after having joined.
func (g *Gossip) reconnectTargets() []string {
	var out []string
	g.failedMu.Lock()
	now := time.Now()
	var cands []string
	for name, f := range g.failed {
		if now.Sub(f.at) > g.cfg.ReconnectTimeout {
			delete(g.failed, name)
			continue
		}
		cands = append(cands, f.addr)
	}
	g.failedMu.Unlock()
	if len(cands) > 0 {
		out = append(out, cands[rand.N(len(cands))])
	}
	if g.joinCalled.Load() && g.NumMembers() <= 1 {
		for _, s := range g.cfg.Seeds {
			if s != g.advAddr && s != g.addr {
				out = append(out, s)
			}
		}
	}
	return out
}

// reconnectLoop heals partitions: memberlist never contacts a member it
// declared dead again, so every ReconnectInterval one recently failed member
// (or the seeds, when alone) is joined again.
func (g *Gossip) reconnectLoop() {
	defer g.wg.Done()
	if g.cfg.ReconnectInterval <= 0 {
		return
	}
	t := time.NewTicker(g.cfg.ReconnectInterval)
	defer t.Stop()
	for {
		select {
		case <-g.shutdownCh:
			return
		case <-t.C:
		}
		// Probe with a dial Shutdown can cancel: memberlist's Join cannot be
		// interrupted and may block TCPTimeout on an unreachable host.
		var addrs []string
		for _, a := range g.reconnectTargets() {
			d := net.Dialer{Timeout: g.cfg.TCPTimeout}
			c, err := d.DialContext(g.ctx, "tcp", a)
			if err == nil {
				_ = c.Close()
				addrs = append(addrs, a)
			}
		}
		if len(addrs) == 0 || g.ctx.Err() != nil {
			continue
		}
		if n, err := g.ml.Join(addrs); n > 0 {
			g.log.Info("reconnected", "via", addrs, "contacted", n)
		} else {
			g.log.Debug("reconnect failed", "addrs", addrs, "err", err)
		}
	}
}

// halfJitter returns a random wait in [b/2, b].
func halfJitter(b time.Duration) time.Duration { return b/2 + rand.N(b/2+1) }

// retryBackoff calls attempt (numbered from 1) until it returns true. Between
// rounds it waits jitter(b) where b starts at minB, doubles each round and is
// capped at maxB. It returns nil on success, ctx.Err() when ctx ends and
// ErrShutdown when stop is closed, checked before each attempt and while
// waiting.
func retryBackoff(ctx context.Context, stop <-chan struct{}, minB, maxB time.Duration,
	jitter func(time.Duration) time.Duration, attempt func(int) bool) error {
	backoff := minB
	for n := 1; ; n++ {
		select {
		case <-stop:
			return ErrShutdown
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if attempt(n) {
			return nil
		}
		t := time.NewTimer(jitter(backoff))
		select {
		case <-stop:
			t.Stop()
			return ErrShutdown
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, maxB)
	}
}

// Members returns the live members (alive or suspect; reported as
// MemberAlive), this node included, sorted by name. It is a race-free copy
// kept from memberlist's events.
func (g *Gossip) Members() []Member {
	g.tableMu.Lock()
	out := make([]Member, 0, len(g.table))
	for _, m := range g.table {
		out = append(out, m)
	}
	g.tableMu.Unlock()
	slices.SortFunc(out, func(a, b Member) int {
		if a.Name < b.Name {
			return -1
		} else if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return out
}

// NumMembers returns the number of live members, this node included.
func (g *Gossip) NumMembers() int {
	g.tableMu.Lock()
	defer g.tableMu.Unlock()
	return len(g.table)
}

// LocalMember returns this node.
func (g *Gossip) LocalMember() Member {
	return Member{Name: g.cfg.NodeName, Addr: g.advAddr, Meta: g.Meta(), State: MemberAlive}
}

// Meta returns this node's current metadata.
func (g *Gossip) Meta() Meta {
	g.metaMu.Lock()
	defer g.metaMu.Unlock()
	return g.metaV
}

// UpdateMeta replaces this node's metadata and gossips it (others see
// EventUpdate). It fails without change when the encoding exceeds
// MaxMetaSize. It blocks up to timeout waiting for the update to be
// broadcast.
func (g *Gossip) UpdateMeta(m Meta, timeout time.Duration) error {
	b, err := m.Encode()
	if err != nil {
		return fmt.Errorf("gossip: Meta: %w", err)
	}
	if len(b) > MaxMetaSize {
		return fmt.Errorf("gossip: Meta: encodes to %d bytes, over the %d-byte limit", len(b), MaxMetaSize)
	}
	select {
	case <-g.shutdownCh:
		return ErrShutdown
	default:
	}
	g.metaMu.Lock()
	g.meta, g.metaV = b, m
	g.metaMu.Unlock()
	return g.ml.UpdateNode(timeout)
}

// Leave announces a graceful departure and waits up to timeout for it to be
// gossiped; other nodes see EventLeave (a node that missed the leave intent
// may report EventFail). The intent is sent to each member first (bounded by
// Config.TCPTimeout), then memberlist's leave waits up to timeout. Call
// Shutdown afterwards.
func (g *Gossip) Leave(timeout time.Duration) error {
	select {
	case <-g.shutdownCh:
		return ErrShutdown
	default:
	}
	g.sendLeaveIntent()
	return g.ml.Leave(timeout)
}

// sendLeaveIntent tells every live member (over TCP, in parallel) that this
// node is about to leave.
func (g *Gossip) sendLeaveIntent() {
	msg, err := proto.Marshal(&messages.GossipMessage{Msg: &messages.GossipMessage_LeaveIntent{
		LeaveIntent: &messages.GossipLeaveIntent{Node: g.cfg.NodeName}}})
	if err != nil {
		return
	}
	var wg sync.WaitGroup
	for _, m := range g.Members() {
		if m.Name == g.cfg.NodeName {
			continue
		}
		host, portS, err := net.SplitHostPort(m.Addr)
		if err != nil {
			continue
		}
		port, _ := strconv.Atoi(portS)
		n := &memberlist.Node{Name: m.Name, Addr: net.ParseIP(host), Port: uint16(port)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.ml.SendReliable(n, msg); err != nil {
				g.log.Debug("leave intent not delivered", "peer", n.Name, "err", err)
			}
		}()
	}
	wg.Wait() // each send is bounded by TCPTimeout
}

// Shutdown stops memberlist without leaving (others will detect a failure
// unless Leave was called first) and waits for every goroutine of this
// package, including an onEvent call in progress; queued events are dropped.
// Idempotent; no event is delivered after it returns.
func (g *Gossip) Shutdown() error {
	g.shutdownOnce.Do(func() {
		g.cancel()
		g.shutdownErr = g.ml.Shutdown()
		g.stopDispatch()
		g.log.Debug("gossip stopped")
	})
	return g.shutdownErr
}

func (g *Gossip) stopDispatch() {
	g.cancel()
	select {
	case <-g.shutdownCh:
	default:
		close(g.shutdownCh)
	}
	g.wg.Wait()
}

func (g *Gossip) member(n *memberlist.Node) Member {
	m := Member{Name: n.Name, Addr: n.Address()}
	if meta, err := DecodeMeta(n.Meta); err != nil {
		g.log.Warn("ignoring malformed node meta", "peer", n.Name, "err", err)
	} else {
		m.Meta = meta
	}
	switch n.State {
	case memberlist.StateAlive:
		m.State = MemberAlive
	case memberlist.StateSuspect:
		m.State = MemberSuspect
	case memberlist.StateDead:
		m.State = MemberDead
	case memberlist.StateLeft:
		m.State = MemberLeft
	}
	return m
}

// queuedEvent is an event waiting for delivery. A departure without a leave
// intent is re-checked at recheckAt: the intent travels over TCP and may be
// processed just after memberlist's (UDP) leave message.
type queuedEvent struct {
	ev        Event
	recheckAt time.Time
}

// intentGrace is how long a departure waits for a late leave intent before it
// is reported as EventFail.
func (g *Gossip) intentGrace() time.Duration {
	return min(max(2*g.cfg.GossipInterval, 100*time.Millisecond), time.Second)
}

func (g *Gossip) enqueue(ev Event) { g.enqueueItem(queuedEvent{ev: ev}) }

func (g *Gossip) enqueueItem(q queuedEvent) {
	g.evMu.Lock()
	g.evQueue = append(g.evQueue, q)
	g.evMu.Unlock()
	select {
	case g.evWake <- struct{}{}:
	default:
	}
}

// dispatch delivers queued events to onEvent in order.
func (g *Gossip) dispatch() {
	defer g.wg.Done()
	for {
		select {
		case <-g.shutdownCh:
			return
		case <-g.evWake:
		}
		g.evMu.Lock()
		batch := g.evQueue
		g.evQueue = nil
		g.evMu.Unlock()
		for _, q := range batch {
			select {
			case <-g.shutdownCh:
				return
			default:
			}
			ev := q.ev
			if !q.recheckAt.IsZero() {
				if d := time.Until(q.recheckAt); d > 0 {
					t := time.NewTimer(d)
					select {
					case <-g.shutdownCh:
						t.Stop()
						return
					case <-t.C:
					}
				}
				if g.takeIntent(ev.Member.Name) {
					ev.Kind, ev.Member.State = EventLeave, MemberLeft
				}
			}
			g.trackFailed(ev)
			if g.onEvent != nil {
				g.onEvent(ev)
			}
		}
	}
}

// delegate implements memberlist.Delegate (metadata only for now).
type delegate Gossip

func (d *delegate) NodeMeta(limit int) []byte {
	g := (*Gossip)(d)
	g.metaMu.Lock()
	defer g.metaMu.Unlock()
	if len(g.meta) > limit { // checked earlier; never let memberlist panic
		return nil
	}
	return slices.Clone(g.meta)
}

// NotifyMsg handles user messages from peers; malformed input is ignored.
func (d *delegate) NotifyMsg(b []byte) {
	g := (*Gossip)(d)
	var m messages.GossipMessage
	if err := proto.Unmarshal(b, &m); err != nil {
		g.log.Debug("ignoring malformed gossip message", "err", err)
		return
	}
	switch msg := m.Msg.(type) {
	case *messages.GossipMessage_LeaveIntent:
		name := msg.LeaveIntent.GetNode()
		if name == "" || name == g.cfg.NodeName {
			return
		}
		g.intentMu.Lock()
		now := time.Now()
		for n, at := range g.intents { // forget stale intents
			if now.Sub(at) > time.Minute {
				delete(g.intents, n)
			}
		}
		g.intents[name] = now
		g.intentMu.Unlock()
	}
}

// takeIntent reports (and forgets) whether name announced it was leaving.
func (g *Gossip) takeIntent(name string) bool {
	g.intentMu.Lock()
	defer g.intentMu.Unlock()
	_, ok := g.intents[name]
	delete(g.intents, name)
	return ok
}

func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *delegate) LocalState(join bool) []byte                { return nil }
func (d *delegate) MergeRemoteState(buf []byte, join bool)     {}

// eventDelegate implements memberlist.EventDelegate. memberlist calls it with
// its state lock held: it only converts and queues.
type eventDelegate Gossip

func (e *eventDelegate) NotifyJoin(n *memberlist.Node) {
	g := (*Gossip)(e)
	g.takeIntent(n.Name) // a rejoined node's old intent no longer applies
	m := g.member(n)
	m.State = MemberAlive
	g.setMember(m)
	g.enqueue(Event{Kind: EventJoin, Member: m})
}

func (g *Gossip) setMember(m Member) {
	g.tableMu.Lock()
	g.table[m.Name] = m
	g.tableMu.Unlock()
}

func (e *eventDelegate) NotifyLeave(n *memberlist.Node) {
	g := (*Gossip)(e)
	m := g.member(n)
	// memberlist passes the node with a stale State here (its internal state
	// says left/dead), so a graceful leave is recognised by the leave intent
	// the node sent before leaving.
	kind := EventFail
	m.State = MemberDead
	if n.State == memberlist.StateLeft || g.takeIntent(n.Name) {
		kind = EventLeave
		m.State = MemberLeft
	}
	g.tableMu.Lock()
	delete(g.table, m.Name)
	g.tableMu.Unlock()
	q := queuedEvent{ev: Event{Kind: kind, Member: m}}
	if kind == EventFail {
		q.recheckAt = time.Now().Add(g.intentGrace())
	}
	g.enqueueItem(q)
}

func (e *eventDelegate) NotifyUpdate(n *memberlist.Node) {
	g := (*Gossip)(e)
	m := g.member(n)
	m.State = MemberAlive
	g.setMember(m)
	g.enqueue(Event{Kind: EventUpdate, Member: m})
}
