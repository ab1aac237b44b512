// Package node is the composition root of an IDN node: it validates the
// Config, loads the topology and catalog (policy/idn formats), starts the
// actor system with its remote endpoint (guarded against malformed wire
// messages), the emulated GPU executors and their actors, the router, the
// vertex's Raft group (consensus) and the gossip membership, bridges
// membership and leadership events into the actors, runs the vertex
// scheduler while this node leads its group, and serves the HTTP client API
// (KServe v2 shaped inference, health, models, Prometheus metrics, status).
//
// Every goroutine the node starts is owned by it and ended by Stop.
package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/idn-net/idn/actors/executor"
	"github.com/idn-net/idn/actors/router"
	"github.com/idn-net/idn/actors/scheduler"
	"github.com/idn-net/idn/actors/timing"
	"github.com/idn-net/idn/actors/view"
	"github.com/idn-net/idn/actors/wire"
	"github.com/idn-net/idn/consensus"
	"github.com/idn-net/idn/gossip"
	"github.com/idn-net/idn/gpu"
	"github.com/idn-net/idn/messages"
	"github.com/idn-net/idn/policy/idn"
)

// Sentinel errors callers branch on.
var (
	// ErrStopped is returned by operations on a stopped node.
	ErrStopped = errors.New("node: stopped")
	// ErrNotStarted is returned before Start succeeded.
	ErrNotStarted = errors.New("node: not started")
)

// Addrs are the bound (advertised) addresses of a started node.
type Addrs struct {
	// API is the HTTP client API.
	API string `json:"api"`
	// Gossip is the memberlist address (the seed address of this node).
	Gossip string `json:"gossip"`
	// Remote is the actor-system remote endpoint.
	Remote string `json:"remote"`
	// Raft is the Raft transport.
	Raft string `json:"raft"`
}

// Node is one IDN node.
type Node struct {
	cfg     Config
	log     *slog.Logger
	graph   *idn.Graph
	catalog *idn.Catalog
	vinfo   idn.Vertex
	hosted  []string
	memMB   float64

	system    *actor.ActorSystem
	remote    *remote.Remote
	guard     guardStats
	delayer   *timing.Delayer
	inbox     *inbox
	routerPID *actor.PID
	execPIDs  []*actor.PID
	execs     []gpu.Executor
	execWG    sync.WaitGroup
	baseCtx   context.Context
	cancel    context.CancelFunc

	apiLn   net.Listener
	httpSrv *http.Server
	gossip  *gossip.Gossip
	group   *consensus.Group
	addrs   Addrs

	evMu     sync.Mutex
	evQueue  []gossip.Event
	table    map[string]gossip.Member // membership built from gossip events (control loop only)
	wake     chan struct{}
	stopLoop chan struct{}
	wg       sync.WaitGroup

	// state owned by the control loop, published for status readers under mu
	mu           sync.Mutex
	schedPID     *actor.PID
	leaderName   string
	leaderAddr   string
	members      []gossip.Member
	stateHosted  []string
	routerHosted bool // x^v sent to the router at least once (control loop only)

	dropSet atomic.Pointer[map[string]bool] // fault injection (POST /v1/fault)

	inf *infidaState // live INFIDA (Allocation infida); nil in static mode

	started  atomic.Bool
	joined   atomic.Bool
	stopped  atomic.Bool
	stopOnce sync.Once
	seq      atomic.Uint64
	metrics  *Metrics
}

// New validates cfg, loads the topology and catalog and prepares a node.
// Nothing is bound until Start.
func New(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	lvl, _ := ParseLogLevel(cfg.LogLevel)
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	}
	lg = lg.With("node", cfg.Name)
	g, cat, err := loadModel(cfg)
	if err != nil {
		return nil, err
	}
	v, ok := g.Vertex(cfg.Vertex)
	if !ok {
		return nil, fmt.Errorf("%w: vertex: %q is not a vertex of the topology: %w", ErrInvalidConfig, cfg.Vertex, idn.ErrUnknownVertex)
	}
	if cfg.Tier < 0 {
		cfg.Tier = v.Tier
	}
	for _, m := range cat.Models {
		if _, ok := m.Speed[v.GPU]; !ok {
			return nil, fmt.Errorf("%w: catalog: model %q has no speed for gpu %q of vertex %q", ErrInvalidConfig, m.Name, v.GPU, v.ID)
		}
	}
	n := &Node{cfg: cfg, log: lg, graph: g, catalog: cat, vinfo: v, metrics: newMetrics()}
	n.memMB = float64(cfg.GPUMemMB)
	if n.memMB == 0 && cfg.GPUs > 0 {
		n.memMB = v.BudgetMB / float64(cfg.GPUs)
	}
	if n.memMB <= 0 {
		n.memMB = 1
	}
	if cfg.Allocation == AllocationInfida {
		if len(cfg.Hosted) > 0 {
			return nil, fmt.Errorf("%w: hosted: %d models given, but allocation %q decides x^v itself", ErrInvalidConfig, len(cfg.Hosted), cfg.Allocation)
		}
		if n.inf, err = newInfida(cfg, g, cat, cfg.Vertex); err != nil {
			return nil, err
		}
		// x^v starts as the repository models (omega, always hosted);
		// INFIDA adds the others from its first sample on.
		n.hosted = repositoryModels(g, cat, cfg.Vertex)
	} else if len(cfg.Hosted) > 0 {
		for i, name := range cfg.Hosted {
			if _, ok := cat.ModelIndex(name); !ok {
				return nil, fmt.Errorf("%w: hosted[%d]: %q is not a model of the catalog", ErrInvalidConfig, i, name)
			}
		}
		n.hosted = append([]string(nil), cfg.Hosted...)
	} else {
		n.hosted = DefaultHosted(g, cat, cfg.Vertex, n.memMB)
	}
	return n, nil
}

func loadModel(cfg Config) (*idn.Graph, *idn.Catalog, error) {
	topo, cata := idn.DefaultTopologyYAML, idn.DefaultCatalogYAML
	var err error
	if cfg.Topology != "" {
		if topo, err = os.ReadFile(cfg.Topology); err != nil {
			return nil, nil, fmt.Errorf("%w: topology: %q: %w", ErrInvalidConfig, cfg.Topology, err)
		}
	}
	if cfg.Catalog != "" {
		if cata, err = os.ReadFile(cfg.Catalog); err != nil {
			return nil, nil, fmt.Errorf("%w: catalog: %q: %w", ErrInvalidConfig, cfg.Catalog, err)
		}
	}
	g, err := idn.ParseTopologyYAML(topo)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: topology %q: %w", ErrInvalidConfig, cfg.Topology, err)
	}
	cat, err := idn.ParseCatalogYAML(cata)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: catalog %q: %w", ErrInvalidConfig, cfg.Catalog, err)
	}
	return g, cat, nil
}

// DefaultHosted is the default static allocation x^v of a vertex: at a
// repository every model of its tasks, best accuracy first across tasks (so
// that every task gets its best model before any task gets a second one when
// memory runs out); elsewhere, per task, the most accurate model that fits
// an equal share of memMB.
func DefaultHosted(g *idn.Graph, cat *idn.Catalog, vertex string, memMB float64) []string {
	var out []string
	var rest []string
	for _, t := range cat.Tasks {
		if r, err := g.Repository(t); err == nil && r == vertex {
			rest = append(rest, t)
		}
	}
	if len(rest) > 0 {
		byTask := map[string][]int{}
		maxLen := 0
		for _, t := range rest {
			ms := append([]int(nil), cat.ModelsFor(t)...)
			sort.SliceStable(ms, func(a, b int) bool { return cat.Models[ms[a]].Accuracy > cat.Models[ms[b]].Accuracy })
			byTask[t] = ms
			maxLen = max(maxLen, len(ms))
		}
		for r := 0; r < maxLen; r++ {
			for _, t := range rest {
				if r < len(byTask[t]) {
					out = append(out, cat.Models[byTask[t][r]].Name)
				}
			}
		}
		return out
	}
	share := memMB / float64(max(1, len(cat.Tasks)))
	for _, t := range cat.Tasks {
		best := -1
		for _, i := range cat.ModelsFor(t) {
			m := cat.Models[i]
			if m.SizeMB <= share && (best < 0 || m.Accuracy > cat.Models[best].Accuracy) {
				best = i
			}
		}
		if best >= 0 {
			out = append(out, cat.Models[best].Name)
		}
	}
	return out
}

// advertise returns a dialable host:port for a bound address.
func advertise(bound net.Addr) string {
	tcp, ok := bound.(*net.TCPAddr)
	if !ok {
		return bound.String()
	}
	if !tcp.IP.IsUnspecified() {
		return tcp.String()
	}
	return net.JoinHostPort(outboundIP(), strconv.Itoa(tcp.Port))
}

// outboundIP picks the first non-loopback IPv4 address of the machine.
func outboundIP() string {
	ifaces, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range ifaces {
			if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
				return ipn.IP.String()
			}
		}
	}
	return "127.0.0.1"
}

// filterHandler drops records below a minimum level (protoactor is chatty at info).
type filterHandler struct {
	slog.Handler
	min slog.Level
}

// Enabled reports whether l reaches the minimum level.
func (f filterHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= f.min && f.Handler.Enabled(ctx, l)
}

// WithAttrs keeps the filter on the derived handler.
func (f filterHandler) WithAttrs(a []slog.Attr) slog.Handler {
	return filterHandler{f.Handler.WithAttrs(a), f.min}
}

// WithGroup keeps the filter on the derived handler.
func (f filterHandler) WithGroup(name string) slog.Handler {
	return filterHandler{f.Handler.WithGroup(name), f.min}
}

// Config returns the node's effective configuration.
func (n *Node) Config() Config { return n.cfg }

// Addrs returns the bound addresses (valid after Start).
func (n *Node) Addrs() Addrs { return n.addrs }

// Hosted returns the models this node's executors were asked to host.
func (n *Node) Hosted() []string { return append([]string(nil), n.hosted...) }

// Start binds every listener, loads the hosted models on the executors,
// starts the actors, consensus and gossip, and joins the cluster through the
// seeds (retrying until one answers or ctx ends). On error everything started
// is stopped again.
func (n *Node) Start(ctx context.Context) (err error) {
	if n.stopped.Load() {
		return ErrStopped
	}
	if n.started.Swap(true) {
		return errors.New("node: already started")
	}
	defer func() {
		if err != nil {
			n.shutdown(false)
		}
	}()
	n.baseCtx, n.cancel = context.WithCancel(context.Background())
	n.delayer = timing.NewDelayer()
	n.table = map[string]gossip.Member{}
	n.wake = make(chan struct{}, 1)
	n.stopLoop = make(chan struct{})
	if err := os.MkdirAll(n.cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("%w: data_dir: %q: %w", ErrInvalidConfig, n.cfg.DataDir, err)
	}

	// Actor system and remote.
	alog := slog.New(filterHandler{n.log.Handler(), slog.LevelWarn}).With("component", "protoactor")
	n.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return alog }),
		actor.WithDeadLetterRequestLogging(false))
	host, portS, _ := net.SplitHostPort(n.cfg.BindRemote)
	port, _ := strconv.Atoi(portS)
	creds := &pingCreds{TransportCredentials: insecure.NewCredentials()}
	rcfg := remote.Configure(host, port, remote.WithServerOptions(grpc.Creds(creds),
		grpc.StreamInterceptor(guardInterceptor(&n.guard, n.log))))
	n.remote = remote.NewRemote(n.system, rcfg)
	if err := startRemote(n.remote, n.system, creds); err != nil {
		n.remote = nil
		return fmt.Errorf("bind_remote: %q: %w", n.cfg.BindRemote, err)
	}
	if h, p, err := net.SplitHostPort(n.system.Address()); err == nil {
		if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() {
			pn, _ := strconv.Atoi(p)
			n.system.ProcessRegistry.Address = advertise(&net.TCPAddr{IP: ip, Port: pn})
		}
	}
	n.addrs.Remote = n.system.Address()

	// Executors.
	if err := n.startExecutors(ctx); err != nil {
		return err
	}

	// Inbox and router.
	n.inbox = &inbox{waiting: map[string]chan *messages.InferReply{}}
	if _, ok := n.system.ProcessRegistry.Add(n.inbox, view.InboxID); !ok {
		return errors.New("node: inbox process id taken")
	}
	rp := router.Props(router.Config{Node: n.cfg.Name, Vertex: n.cfg.Vertex, SelfAddr: n.addrs.Remote, Graph: n.graph,
		Catalog: n.catalog, AckTimeout: n.cfg.AckTimeout, EmulateRTT: n.cfg.EmulateRTT, Logger: n.log}, n.system.Root, n.delayer)
	if n.routerPID, err = n.system.Root.SpawnNamed(rp, view.RouterID); err != nil {
		return fmt.Errorf("node: spawn router: %w", err)
	}

	// HTTP API.
	if n.apiLn, err = net.Listen("tcp", n.cfg.BindAPI); err != nil {
		return fmt.Errorf("bind_api: %q: %w", n.cfg.BindAPI, err)
	}
	n.addrs.API = advertise(n.apiLn.Addr())
	n.httpSrv = &http.Server{Handler: n.Handler(), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(n.log.Handler(), slog.LevelWarn)}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := n.httpSrv.Serve(n.apiLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("http server", "err", err)
		}
	}()

	// Consensus.
	ccfg := consensus.DefaultConfig()
	gcfg := gossip.DefaultConfig()
	if n.cfg.Profile == ProfileLocal {
		ccfg = consensus.DefaultLocalConfig()
		gcfg = gossip.DefaultLocalConfig()
	}
	ccfg.NodeID, ccfg.Vertex, ccfg.BindAddr = n.cfg.Name, n.cfg.Vertex, n.cfg.BindRaft
	ccfg.DataDir = filepath.Join(n.cfg.DataDir, "raft")
	ccfg.BootstrapExpect = n.cfg.BootstrapExpect
	ccfg.Logger = n.log
	if t := n.cfg.RaftTimeout; t > 0 {
		ccfg.HeartbeatTimeout, ccfg.ElectionTimeout, ccfg.LeaderLeaseTimeout = t, t, t
	}
	ccfg.Drop = n.drop
	if h, _, _ := net.SplitHostPort(n.cfg.BindRaft); net.ParseIP(h) != nil && net.ParseIP(h).IsUnspecified() {
		ccfg.AdvertiseAddr = net.JoinHostPort(outboundIP(), "0")
	}
	if n.group, err = consensus.New(ccfg, func(bool) { n.kick() }); err != nil {
		return fmt.Errorf("consensus: %w", err)
	}
	n.addrs.Raft = n.group.Addr()

	// Gossip.
	key, _ := DecodeSecretKey(n.cfg.SecretKey)
	gcfg.NodeName, gcfg.BindAddr, gcfg.Seeds, gcfg.SecretKey = n.cfg.Name, n.cfg.BindGossip, n.cfg.Join, key
	gcfg.Logger = n.log
	if p := n.cfg.GossipProbe; p > 0 {
		gcfg.ProbeInterval, gcfg.ProbeTimeout = p, p/2
		gcfg.SuspicionMult = max(gcfg.SuspicionMult, 3)
	}
	gcfg.Drop = n.drop
	if h, _, _ := net.SplitHostPort(n.cfg.BindGossip); net.ParseIP(h) != nil && net.ParseIP(h).IsUnspecified() {
		gcfg.AdvertiseAddr = net.JoinHostPort(outboundIP(), "0")
	}
	gcfg.Meta = gossip.Meta{Vertex: n.cfg.Vertex, Tier: n.cfg.Tier, RemoteAddr: n.addrs.Remote, RaftAddr: n.addrs.Raft,
		APIAddr: n.addrs.API, GPUs: n.cfg.GPUs, GPUMemMB: int(n.memMB), BootstrapExpect: n.cfg.BootstrapExpect}
	if n.gossip, err = gossip.New(gcfg, n.onGossip); err != nil {
		return fmt.Errorf("gossip: %w", err)
	}
	n.addrs.Gossip = n.gossip.Addr()

	if n.inf != nil {
		n.execWG.Add(1) // waited for after baseCtx is cancelled
		go func() {
			defer n.execWG.Done()
			n.reconcileLoop(n.baseCtx)
		}()
	}
	n.wg.Add(1)
	go n.controlLoop()
	if err := n.gossip.Join(ctx); err != nil {
		return fmt.Errorf("join %v: %w", n.cfg.Join, err)
	}
	n.joined.Store(true)
	n.kick()
	n.log.Info("node started", "vertex", n.cfg.Vertex, "api", n.addrs.API, "gossip", n.addrs.Gossip,
		"remote", n.addrs.Remote, "raft", n.addrs.Raft, "gpus", n.cfg.GPUs, "hosted", len(n.hosted))
	return nil
}

// remoteStartMu serialises remote starts in one process (see startRemote).
var remoteStartMu sync.Mutex

// startRemote starts the remote endpoint, turning its panic on a listen
// error into an error. Remote.Start overwrites grpc's global logger, which
// every earlier server's Serve goroutine has read: to order that read before
// the next start's write (and keep several nodes per process race-free),
// starts are serialised and each waits until its own Serve goroutine has
// accepted a probe connection.
func startRemote(r *remote.Remote, sys *actor.ActorSystem, creds *pingCreds) (err error) {
	remoteStartMu.Lock()
	defer remoteStartMu.Unlock()
	seen := make(chan struct{})
	creds.armed.Store(&seen)
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	r.Start()
	addr := sys.Address()
	if h, p, e := net.SplitHostPort(addr); e == nil {
		if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() {
			addr = net.JoinHostPort("127.0.0.1", p)
		}
	}
	if c, e := net.DialTimeout("tcp", addr, 5*time.Second); e == nil {
		select {
		case <-seen:
		case <-time.After(5 * time.Second):
		}
		_ = c.Close()
	}
	// Never swallow a real connection if the probe was not seen.
	creds.armed.CompareAndSwap(&seen, nil)
	return nil
}

// pingCreds are insecure transport credentials that swallow the first
// connection after being armed (the start probe) without any logging.
type pingCreds struct {
	credentials.TransportCredentials
	armed atomic.Pointer[chan struct{}]
}

// ServerHandshake completes the probe, or hands real connections on.
func (c *pingCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	if p := c.armed.Swap(nil); p != nil {
		close(*p)
		_ = conn.Close()
		return nil, nil, io.EOF
	}
	return c.TransportCredentials.ServerHandshake(conn)
}

// Clone returns credentials sharing the probe state.
func (c *pingCreds) Clone() credentials.TransportCredentials { return c }

func (n *Node) startExecutors(ctx context.Context) error {
	models := make([]gpu.Model, 0, len(n.hosted))
	for _, name := range n.hosted {
		i, _ := n.catalog.ModelIndex(name)
		m := n.catalog.Models[i]
		models = append(models, gpu.Model{Name: m.Name, SizeMB: m.SizeMB, Accuracy: m.Accuracy,
			Profile: scheduler.ProfileOf(n.catalog, i, n.vinfo.GPU)})
	}
	for i := 0; i < n.cfg.GPUs; i++ {
		e, err := gpu.NewEmulated(gpu.EmulatedConfig{ID: fmt.Sprintf("%s/gpu%d", n.cfg.Name, i), MemoryMB: n.memMB,
			LoadDelayPerMB: n.cfg.LoadDelayPerMB, LatencyScale: n.cfg.LatencyScale})
		if err != nil {
			return fmt.Errorf("gpus[%d]: %w", i, err)
		}
		n.execs = append(n.execs, e)
	}
	var wg sync.WaitGroup
	skipped := make([]int, len(n.execs))
	for i, e := range n.execs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, m := range models {
				if err := e.Load(ctx, m); err != nil {
					skipped[i]++
				}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("loading models: %w", err)
	}
	for i, e := range n.execs {
		if skipped[i] > 0 {
			n.log.Warn("executor memory too small for every hosted model", "executor", e.ID(), "skipped", skipped[i],
				"loaded", len(e.Loaded()), "memory_mb", e.MemoryMB())
		}
		p := executor.Props(executor.Config{Node: n.cfg.Name, Vertex: n.cfg.Vertex, Exec: e, Root: n.system.Root,
			Base: n.baseCtx, WG: &n.execWG, Logger: n.log})
		pid, err := n.system.Root.SpawnNamed(p, view.ExecutorID(i))
		if err != nil {
			return fmt.Errorf("node: spawn executor %d: %w", i, err)
		}
		n.execPIDs = append(n.execPIDs, pid)
	}
	return nil
}

// drop is the fault hook given to gossip and consensus: the configured
// Drop, or the peers set through POST /v1/fault.
func (n *Node) drop(peer string) bool {
	if m := n.dropSet.Load(); m != nil && (*m)[peer] {
		return true
	}
	return n.cfg.Drop != nil && n.cfg.Drop(peer)
}

// SetDrop replaces the set of peer addresses (host:port, gossip or Raft)
// whose traffic is dropped; nil or empty heals the partition.
func (n *Node) SetDrop(peers []string) {
	m := make(map[string]bool, len(peers))
	for _, p := range peers {
		m[p] = true
	}
	n.dropSet.Store(&m)
}

// onGossip is the gossip event callback: it never blocks (the event is
// queued for the control loop).
func (n *Node) onGossip(ev gossip.Event) {
	n.evMu.Lock()
	n.evQueue = append(n.evQueue, ev)
	n.evMu.Unlock()
	n.kick()
}

// drainEvents applies queued gossip events to the membership table and the
// actors' views. The table is built from events only: memberlist's Members()
// hands out nodes it keeps mutating (a data race), events are copied under
// its lock.
func (n *Node) drainEvents() {
	n.evMu.Lock()
	evs := n.evQueue
	n.evQueue = nil
	n.evMu.Unlock()
	for _, ev := range evs {
		m := ev.Member
		switch ev.Kind {
		case gossip.EventLeave:
			m.State = gossip.MemberLeft
		case gossip.EventFail:
			m.State = gossip.MemberDead
		}
		n.table[m.Name] = m
		msg := &view.MemberChanged{Member: toViewMember(m)}
		n.system.Root.Send(n.routerPID, msg)
		if pid := n.scheduler(); pid != nil {
			n.system.Root.Send(pid, msg)
		}
		n.log.Info("member event", "kind", ev.Kind.String(), "member", m.Name, "vertex", m.Meta.Vertex)
	}
}

func (n *Node) kick() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func toViewMember(m gossip.Member) view.Member {
	return view.Member{Name: m.Name, Vertex: m.Meta.Vertex, RemoteAddr: m.Meta.RemoteAddr, GPUs: m.Meta.GPUs,
		Alive: m.State == gossip.MemberAlive || m.State == gossip.MemberSuspect}
}

// controlLoop bridges gossip and consensus into the actors: membership
// changes, the vertex leader, x^v, and the scheduler's lifecycle.
func (n *Node) controlLoop() {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.SyncInterval)
	defer t.Stop()
	for {
		select {
		case <-n.stopLoop:
			n.stopAllocator()
			n.stopScheduler()
			return
		case <-n.wake:
			n.sync()
		case <-t.C:
			n.sync()
		}
	}
}

func (n *Node) scheduler() *actor.PID {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.schedPID
}

// sync pushes the current membership, leader and x^v to the actors and
// starts or stops the scheduler to follow leadership.
func (n *Node) sync() {
	if n.gossip == nil || n.group == nil {
		return
	}
	n.drainEvents()
	members := make([]gossip.Member, 0, len(n.table))
	for _, m := range n.table {
		members = append(members, m)
	}
	sort.Slice(members, func(i, j int) bool { return members[i].Name < members[j].Name })
	snap := &view.MembersSnapshot{Members: make([]view.Member, 0, len(members))}
	var peers []consensus.Peer
	byName := map[string]gossip.Member{}
	for _, m := range members {
		vm := toViewMember(m)
		snap.Members = append(snap.Members, vm)
		byName[m.Name] = m
		if vm.Alive && m.Meta.Vertex == n.cfg.Vertex && m.Meta.RaftAddr != "" {
			peers = append(peers, consensus.Peer{ID: m.Name, RaftAddr: m.Meta.RaftAddr})
		}
	}
	n.group.UpdatePeers(peers)

	id, _ := n.group.Leader()
	leaderAddr := ""
	if m, ok := byName[id]; ok && id != "" {
		leaderAddr = m.Meta.RemoteAddr
	}
	if id == n.cfg.Name {
		leaderAddr = n.addrs.Remote
	}
	isLeader := n.group.IsLeader()
	st := n.group.State()

	n.mu.Lock()
	leaderChanged := id != n.leaderName || leaderAddr != n.leaderAddr
	if leaderChanged && id != "" {
		n.metrics.leaderChanges.Add(1)
	}
	n.leaderName, n.leaderAddr = id, leaderAddr
	n.members = members
	hostedChanged := !slices.Equal(st.GetHostedModels(), n.stateHosted)
	tellRouter := hostedChanged || !n.routerHosted
	n.routerHosted = true
	n.stateHosted = st.GetHostedModels()
	sched := n.schedPID
	n.mu.Unlock()

	lc := &view.LeaderChanged{Vertex: n.cfg.Vertex, Name: id, RemoteAddr: leaderAddr}
	if !isLeader && sched != nil {
		// Leadership lost: queued requests go back to the router, which
		// delivers them to the new leader; then the scheduler stops.
		if _, err := n.system.Root.RequestFuture(sched, &scheduler.Handover{}, 2*time.Second).Result(); err != nil {
			n.log.Warn("scheduler handover", "err", err)
		}
		n.stopScheduler()
		sched = nil
	}
	if isLeader && sched == nil {
		if len(st.GetHostedModels()) == 0 && len(n.hosted) > 0 {
			cmd := &messages.FSMCommand{Cmd: &messages.FSMCommand_SetHosted{SetHosted: &messages.FSMSetHosted{Models: n.hosted}}}
			if err := n.group.Apply(cmd, time.Second); err != nil {
				n.log.Warn("replicating x^v failed", "err", err)
			} else {
				st = n.group.State()
			}
		}
		n.startScheduler(snap, lc, n.servable(st))
		hostedChanged = false
	}
	if id == n.cfg.Name && n.scheduler() == nil {
		// Raft names this node leader but its scheduler is not running (yet):
		// hold requests instead of sending them to a missing actor.
		lc = &view.LeaderChanged{Vertex: n.cfg.Vertex}
	}
	n.system.Root.Send(n.routerPID, snap)
	n.system.Root.Send(n.routerPID, lc)
	// In INFIDA mode the router never shortcuts past the vertex: every
	// request of a type entering here must reach the scheduler to be
	// counted (r_rho, paper 000 Sec. III-D).
	if tellRouter && n.inf == nil {
		n.system.Root.Send(n.routerPID, &router.Hosted{Models: n.hostedFrom(st)})
	}
	if pid := n.scheduler(); pid != nil {
		n.system.Root.Send(pid, snap)
		if leaderChanged {
			n.system.Root.Send(pid, lc)
		}
		if n.inf != nil {
			// INFIDA: serve with the models of x^v the executors have
			// actually loaded (x^v changes every refresh; loads take time
			// and a model that does not fit is never served).
			if sv := n.servable(st); !slices.Equal(sv, n.inf.lastServable) {
				n.inf.lastServable = sv
				n.system.Root.Send(pid, &scheduler.HostedChanged{Models: sv})
			}
		} else if hostedChanged {
			n.system.Root.Send(pid, &scheduler.HostedChanged{Models: n.hostedFrom(st)})
		}
	}
	n.syncInfida(isLeader && n.scheduler() != nil, members, st)
}

// hostedFrom returns x^v from the replicated state, or the configured one
// while the state has none.
func (n *Node) hostedFrom(st *messages.VertexState) []string {
	if h := st.GetHostedModels(); len(h) > 0 {
		return h
	}
	return n.hosted
}

func (n *Node) startScheduler(snap *view.MembersSnapshot, lc *view.LeaderChanged, hosted []string) {
	cfg := scheduler.Config{Node: n.cfg.Name, Vertex: n.cfg.Vertex, SelfAddr: n.addrs.Remote, Graph: n.graph,
		Catalog: n.catalog, GPU: n.vinfo.GPU, LatencyScale: n.cfg.LatencyScale, Hosted: hosted,
		MaxBatch: n.cfg.MaxBatch, MaxQueue: n.cfg.MaxQueue, Logger: n.log, Infida: n.schedulerInfida()}
	pid, err := n.system.Root.SpawnNamed(scheduler.Props(cfg, n.system.Root, n.delayer, snap, lc), view.SchedulerID)
	if err != nil {
		n.log.Error("spawn scheduler", "err", err)
		return
	}
	n.mu.Lock()
	n.schedPID = pid
	n.mu.Unlock()
	n.log.Info("became vertex leader: scheduler started", "vertex", n.cfg.Vertex, "hosted", len(hosted))
}

func (n *Node) stopScheduler() {
	n.mu.Lock()
	pid := n.schedPID
	n.schedPID = nil
	n.mu.Unlock()
	if pid == nil {
		return
	}
	if err := n.system.Root.StopFuture(pid).Wait(); err != nil {
		n.log.Warn("stopping scheduler", "err", err)
	}
	n.log.Info("scheduler stopped", "vertex", n.cfg.Vertex)
}

// RouterStats returns the router actor's counters (zero when stopped).
func (n *Node) RouterStats() router.Stats {
	if n.system == nil || n.routerPID == nil || n.stopped.Load() {
		return router.Stats{}
	}
	res, err := n.system.Root.RequestFuture(n.routerPID, &router.GetStats{}, time.Second).Result()
	if err != nil {
		return router.Stats{}
	}
	st, _ := res.(router.Stats)
	return st
}

// SchedulerStats returns the vertex scheduler's counters when this node runs it.
func (n *Node) SchedulerStats() (scheduler.Stats, bool) {
	pid := n.scheduler()
	if pid == nil || n.stopped.Load() {
		return scheduler.Stats{}, false
	}
	res, err := n.system.Root.RequestFuture(pid, &scheduler.GetStats{}, time.Second).Result()
	if err != nil {
		return scheduler.Stats{}, false
	}
	st, ok := res.(scheduler.Stats)
	return st, ok
}

// IsLeader reports whether this node leads its vertex group.
func (n *Node) IsLeader() bool {
	return n.group != nil && !n.stopped.Load() && n.group.IsLeader()
}

// Ready reports whether the node joined and its vertex has a known leader.
func (n *Node) Ready() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.joined.Load() && !n.stopped.Load() && n.leaderAddr != ""
}

// Member is one member in Status.
type Member struct {
	// Name, Vertex and State ("alive", "suspect", "dead", "left") of the member.
	Name   string `json:"name"`
	Vertex string `json:"vertex"`
	State  string `json:"state"`
}

// Status is the answer of GET /v1/status.
type Status struct {
	// Name, Vertex and Tier of this node.
	Name   string `json:"name"`
	Vertex string `json:"vertex"`
	Tier   int    `json:"tier"`
	// Ready is true once joined with a known vertex leader.
	Ready bool `json:"ready"`
	// IsLeader is true when this node leads its vertex group.
	IsLeader bool `json:"is_leader"`
	// Leader names the vertex leader (empty when unknown).
	Leader string `json:"leader"`
	// Members lists the cluster members this node knows of.
	Members []Member `json:"members"`
	// Hosted is x^v (replicated state, or the configured allocation before it is replicated).
	Hosted []string `json:"hosted"`
	// Allocation is the allocation mode and, with INFIDA, its replicated
	// state and this node's allocator.
	Allocation *AllocationStatus `json:"allocation"`
}

// Status returns the node's status.
func (n *Node) Status() Status {
	n.mu.Lock()
	st := Status{Name: n.cfg.Name, Vertex: n.cfg.Vertex, Tier: n.cfg.Tier, Leader: n.leaderName,
		Members: make([]Member, 0, len(n.members)), Hosted: n.stateHosted}
	for _, m := range n.members {
		st.Members = append(st.Members, Member{Name: m.Name, Vertex: m.Meta.Vertex, State: m.State.String()})
	}
	n.mu.Unlock()
	if len(st.Hosted) == 0 {
		st.Hosted = n.hosted
	}
	st.Ready = n.Ready()
	st.IsLeader = n.IsLeader()
	if !n.stopped.Load() {
		st.Allocation = n.allocationStatus()
	}
	return st
}

// AliveMembers returns the names of the members gossip shows alive, sorted
// (as of the control loop's last sync).
func (n *Node) AliveMembers() []string {
	if n.stopped.Load() {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, m := range n.members {
		if m.State == gossip.MemberAlive {
			out = append(out, m.Name)
		}
	}
	return out
}

// InferInput is one inference request submitted to this (entry) node.
type InferInput struct {
	// ID is the client's request id (echoed); empty = generated.
	ID string
	// Task names the task (a task of the catalog).
	Task string
	// MinAccuracy in [0,1] is the least acceptable model accuracy.
	MinAccuracy float64
	// SLO is the deadline; 0 = the configured default.
	SLO time.Duration
	// Payload is the request's input (opaque to emulated executors).
	Payload []byte
}

// Infer routes one request from this node and waits for its one reply (a
// result or an explicit error). It never returns nil.
func (n *Node) Infer(ctx context.Context, in InferInput) (*messages.InferReply, time.Duration) {
	start := time.Now()
	if !n.started.Load() || n.stopped.Load() || n.inbox == nil {
		return &messages.InferReply{Id: in.ID, ErrorKind: messages.ErrorKind_ERROR_KIND_UNREACHABLE, Error: "node is not running"}, 0
	}
	slo := in.SLO
	if slo <= 0 {
		slo = n.cfg.DefaultDeadline
	}
	deadline := start.Add(slo)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	id := n.cfg.Name + "-" + strconv.FormatUint(n.seq.Add(1), 10)
	req := &messages.InferRequest{Id: id, Task: in.Task, MinAccuracy: in.MinAccuracy, DeadlineUnixNano: deadline.UnixNano(),
		ReplyTo: &messages.ActorRef{Address: n.addrs.Remote, Id: view.InboxID}, EntryNode: n.cfg.Name,
		AcceptedUnixNano: start.UnixNano(), Payload: in.Payload}
	n.metrics.requests.Add(1)
	ch := n.inbox.register(id)
	n.system.Root.Send(n.routerPID, &router.Submit{Req: req})
	timer := time.NewTimer(time.Until(deadline))
	var rep *messages.InferReply
	select {
	case rep = <-ch:
		timer.Stop()
	case <-timer.C:
		n.inbox.cancel(id)
		rep = wire.ErrorReply(req, messages.ErrorKind_ERROR_KIND_DEADLINE_EXCEEDED, "deadline of %v exceeded", slo)
	case <-ctx.Done():
		timer.Stop()
		n.inbox.cancel(id)
		rep = wire.ErrorReply(req, messages.ErrorKind_ERROR_KIND_DEADLINE_EXCEEDED, "request cancelled: %v", ctx.Err())
	}
	lat := time.Since(start)
	rep.Id = in.ID
	if rep.Id == "" {
		rep.Id = id
	}
	n.metrics.observe(rep.Ok, rep.ServedByVertex, rep.Model, wire.KindName(rep.ErrorKind), rep.Correct, lat)
	return rep, lat
}

// Stop leaves the cluster gracefully (gossip leave, so peers see a leave
// rather than a failure), then stops the HTTP API, consensus, gossip, the
// actors and every goroutine. It is idempotent.
func (n *Node) Stop() { n.shutdown(true) }

// Kill stops the node abruptly, as a crash would look to its peers: no
// gossip leave, no Raft leadership transfer. For tests.
func (n *Node) Kill() { n.shutdown(false) }

func (n *Node) shutdown(graceful bool) {
	n.stopOnce.Do(func() {
		n.stopped.Store(true)
		if graceful && n.gossip != nil {
			if err := n.gossip.Leave(n.cfg.LeaveTimeout); err != nil {
				n.log.Warn("gossip leave", "err", err)
			}
		}
		if n.httpSrv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = n.httpSrv.Shutdown(ctx)
			cancel()
		} else if n.apiLn != nil {
			_ = n.apiLn.Close()
		}
		if n.stopLoop != nil {
			close(n.stopLoop)
		}
		if n.gossip != nil {
			_ = n.gossip.Shutdown()
		}
		n.wg.Wait() // control loop (scheduler stopped) and HTTP server
		if n.group != nil {
			_ = n.group.Shutdown()
		}
		if n.cancel != nil {
			n.cancel()
		}
		if n.system != nil {
			if n.routerPID != nil {
				_ = n.system.Root.StopFuture(n.routerPID).Wait()
			}
			for _, pid := range n.execPIDs {
				_ = n.system.Root.StopFuture(pid).Wait()
			}
		}
		n.execWG.Wait()
		for _, e := range n.execs {
			_ = e.Close()
		}
		if n.inbox != nil {
			n.inbox.closeAll()
		}
		if n.remote != nil {
			// Remote.Shutdown(true) races with its endpoint writers (it nils a
			// map they read); stop the gRPC server, then the endpoint actors
			// (which close their client connections) ourselves.
			n.remote.Shutdown(false)
			for _, id := range []string{"EndpointSupervisor", "activator"} {
				_ = n.system.Root.StopFuture(n.system.NewLocalPID(id)).Wait()
			}
		}
		if n.delayer != nil {
			n.delayer.Stop()
		}
		if n.system != nil {
			n.system.Shutdown()
		}
		n.log.Info("node stopped", "graceful", graceful)
	})
}

// inbox is the process that receives the replies of requests entered here.
type inbox struct {
	mu      sync.Mutex
	waiting map[string]chan *messages.InferReply
	closed  bool
}

var _ actor.Process = (*inbox)(nil)

func (in *inbox) register(id string) chan *messages.InferReply {
	ch := make(chan *messages.InferReply, 1)
	in.mu.Lock()
	if in.closed {
		in.mu.Unlock()
		ch <- &messages.InferReply{Id: id, ErrorKind: messages.ErrorKind_ERROR_KIND_UNREACHABLE, Error: "node stopped"}
		return ch
	}
	in.waiting[id] = ch
	in.mu.Unlock()
	return ch
}

func (in *inbox) cancel(id string) {
	in.mu.Lock()
	delete(in.waiting, id)
	in.mu.Unlock()
}

func (in *inbox) closeAll() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.closed = true
	for id, ch := range in.waiting {
		ch <- &messages.InferReply{Id: id, ErrorKind: messages.ErrorKind_ERROR_KIND_UNREACHABLE, Error: "node stopped"}
		delete(in.waiting, id)
	}
}

// SendUserMessage delivers the first reply of a request to its waiter; later
// replies (duplicates after a retried forward) are dropped.
func (in *inbox) SendUserMessage(_ *actor.PID, message any) {
	r, ok := actor.UnwrapEnvelopeMessage(message).(*messages.InferReply)
	if !ok || r == nil {
		return
	}
	in.mu.Lock()
	ch := in.waiting[r.Id]
	delete(in.waiting, r.Id)
	in.mu.Unlock()
	if ch != nil {
		ch <- r
	}
}

// SendSystemMessage ignores system messages.
func (in *inbox) SendSystemMessage(*actor.PID, any) {}

// Stop is a no-op: the inbox lives as long as the node.
func (in *inbox) Stop(*actor.PID) {}
