// Package consensus runs one Raft group per vertex (hashicorp/raft with a
// persistent raft-wal log and stable store in the node's data dir).
//
// The group bootstraps like Consul's bootstrap-expect: every node of the
// vertex is configured with the number of voters to expect; the node layer
// feeds the gossip-visible members of the vertex to UpdatePeers; once at
// least BootstrapExpect are visible (stable for BootstrapStable) the one with
// the lowest node id checks over the Raft transport that none of them already
// has Raft state and then bootstraps the group with all of them. Nodes seen
// later are added as voters by the leader; voters missing from UpdatePeers for
// longer than RemoveAfter are removed by the leader. A node that has Raft
// state in its data dir never bootstraps again.
//
// The FSM holds the vertex's replicated state (messages.VertexState);
// snapshots are protobuf compressed with zstd. Leadership changes are
// reported through a callback.
//
// Timing on loopback (DefaultLocalConfig, 100 ms timeouts): a crashed leader
// is replaced in 0.13-0.3 s (TestMeasureFailover); a leader that shuts down
// gracefully hands over in 25-40 ms. A follower that was unreachable (crashed, partitioned) catches up
// within up to ~10 s after it is back: hashicorp/raft backs off replication to
// a failing follower exponentially up to 10.24 s.
package consensus

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"google.golang.org/protobuf/proto"

	"github.com/idn-net/idn/messages"
)

var (
	// ErrNotLeader is returned by Apply on a node that is not the group's
	// leader (or lost leadership while applying). Forward to Leader().
	ErrNotLeader = errors.New("consensus: not the leader")
	// ErrShutdown is returned by operations after Shutdown.
	ErrShutdown = errors.New("consensus: shut down")
)

// Peer is a gossip-visible member of this node's vertex.
type Peer struct {
	ID       string // node name (Raft server id)
	RaftAddr string // host:port of its Raft transport
	// BootstrapExpect is the peer's configured BootstrapExpect (from its
	// gossip metadata); 0 = unknown. A conflicting value blocks bootstrap
	// (logged), as in Consul, instead of risking two groups.
	BootstrapExpect int
}

// Group is this node's membership in its vertex's Raft group.
type Group struct {
	cfg          Config
	log          *slog.Logger
	onLeadership func(isLeader bool)

	raft     *raft.Raft
	trans    *raft.NetworkTransport
	wal      *wal.WAL
	meta     *metadb.BoltMetaDB
	unlock   func() // releases the DataDir lock
	fsm      *fsm
	observer *raft.Observer
	obsCh    chan raft.Observation

	bootstrapped atomic.Bool // has (or joined) a configuration: never bootstrap
	isLeader     atomic.Bool // last value reported to onLeadership

	mu       sync.Mutex
	peersSet bool              // UpdatePeers called at least once
	peers    map[string]string // id -> raft addr, self included
	peersKey string
	expects  map[string]int // id -> BootstrapExpect reported in UpdatePeers
	// stableSince: when the peer set last changed; lastSeen: when each id was
	// last known present; started: New's time (floor for lastSeen).
	stableSince time.Time
	lastSeen    map[string]time.Time
	started     time.Time

	lastConflict string // reconcile goroutine only: last logged expect conflict

	kick         chan struct{}
	shutdownCh   chan struct{}
	shutdownOnce sync.Once
	shutdownErr  error
	wg           sync.WaitGroup
}

// New opens (or creates) the Raft state in cfg.DataDir, binds the Raft
// transport and starts the group's goroutines. A node with existing state
// rejoins its group; a new node waits for the bootstrap condition (see the
// package doc) or to be added by the leader.
//
// onLeadership (may be nil) is called from one goroutine owned by the Group
// with true when this node becomes leader — once the replicated state is
// caught up (raft Barrier) — and false when it stops being leader (including
// at Shutdown if it was leader). It may call the Group's methods except
// Shutdown (which waits for it). It must not block for long
// (the node starts/stops its control actors asynchronously); while it runs,
// further leadership changes wait.
func New(cfg Config, onLeadership func(isLeader bool)) (*Group, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	lg = lg.With("component", "consensus", "node", cfg.NodeID, "vertex", cfg.Vertex)
	hl := newHCLog(lg, "raft")

	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("consensus: DataDir: %w", err)
	}
	unlock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("consensus: DataDir: %w", err)
	}
	walDir := filepath.Join(cfg.DataDir, "wal")
	if err := os.MkdirAll(walDir, 0o700); err != nil {
		unlock()
		return nil, fmt.Errorf("consensus: DataDir: %w", err)
	}
	g := &Group{
		cfg:          cfg,
		log:          lg,
		onLeadership: onLeadership,
		peers:        map[string]string{},
		lastSeen:     map[string]time.Time{},
		started:      time.Now(),
		kick:         make(chan struct{}, 1),
		shutdownCh:   make(chan struct{}),
		obsCh:        make(chan raft.Observation, 64),
		fsm:          newFSM(cfg.Vertex),
	}
	g.unlock = unlock
	cleanup := []func(){unlock}
	fail := func(err error) (*Group, error) {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
		return nil, err
	}

	// raft-wal v0.4.0's Close does not close its bolt meta store (which holds
	// an flock): own it and close it ourselves so a restart in the same
	// process can reopen the directory.
	meta := &metadb.BoltMetaDB{}
	w, err := wal.Open(walDir, wal.WithMetaStore(meta), wal.WithLogger(hl.Named("wal")))
	if err != nil {
		_ = meta.Close()
		return fail(fmt.Errorf("consensus: open raft-wal in %s: %w", walDir, err))
	}
	g.wal, g.meta = w, meta
	cleanup = append(cleanup, func() { _ = w.Close(); _ = meta.Close() })

	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, cfg.SnapshotRetain, hl)
	if err != nil {
		return fail(fmt.Errorf("consensus: snapshot store in %s: %w", cfg.DataDir, err))
	}

	stream, err := newStreamLayer(cfg.BindAddr, cfg.AdvertiseAddr, cfg.Drop)
	if err != nil {
		return fail(fmt.Errorf("consensus: BindAddr %s: %w", cfg.BindAddr, err))
	}
	ioTimeout := min(max(10*cfg.HeartbeatTimeout, time.Second), 10*time.Second)
	g.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  stream,
		MaxPool: 3,
		Timeout: ioTimeout,
		Logger:  hl.Named("transport"),
	})
	cleanup = append(cleanup, func() { _ = g.trans.Close() })

	hasState, err := raft.HasExistingState(w, w, snaps)
	if err != nil {
		return fail(fmt.Errorf("consensus: read state in %s: %w", cfg.DataDir, err))
	}
	g.bootstrapped.Store(hasState)

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.TrailingLogs = cfg.TrailingLogs
	rc.ShutdownOnRemove = false // a removed node stays up and can be re-added
	rc.Logger = hl
	if err := raft.ValidateConfig(rc); err != nil {
		return fail(fmt.Errorf("consensus: %w", err))
	}

	r, err := raft.NewRaft(rc, g.fsm, w, w, snaps, g.trans)
	if err != nil {
		return fail(fmt.Errorf("consensus: start raft: %w", err))
	}
	g.raft = r
	g.observer = raft.NewObserver(g.obsCh, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.LeaderObservation, raft.RaftState:
			return true
		}
		return false
	})
	r.RegisterObserver(g.observer)

	g.mu.Lock()
	g.peers[cfg.NodeID] = string(g.trans.LocalAddr())
	g.peersKey = peersKey(g.peers)
	g.stableSince = time.Now()
	g.mu.Unlock()

	g.goFunc(g.leadershipLoop)
	g.goFunc(g.reconcileLoop)
	g.kickReconcile() // a group of one bootstraps at once
	lg.Info("raft group started", "addr", g.Addr(), "existing_state", hasState,
		"bootstrap_expect", cfg.BootstrapExpect)
	return g, nil
}

func (g *Group) goFunc(f func()) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		f()
	}()
}

// Addr returns the advertised Raft host:port (concrete even for port 0).
func (g *Group) Addr() string { return string(g.trans.LocalAddr()) }

// IsLeader reports whether this node is the group's leader and has applied
// every entry committed before its election (so State() is complete). It
// turns true together with the onLeadership(true) callback.
func (g *Group) IsLeader() bool { return g.isLeader.Load() && g.raft.State() == raft.Leader }

// Leader returns the current leader's id and Raft address, empty if unknown.
func (g *Group) Leader() (id, raftAddr string) {
	addr, sid := g.raft.LeaderWithID()
	return string(sid), string(addr)
}

// State returns a copy of the replicated vertex state as applied on this node
// (a follower may lag the leader by a few entries).
func (g *Group) State() *messages.VertexState { return g.fsm.snapshotState() }

// Apply replicates cmd through the group and applies it. It returns
// ErrNotLeader (wrapped, errors.Is works) when this node is not the leader or
// lost leadership before the command committed (then it may or may not have
// been applied), ErrShutdown after Shutdown, or the error the FSM returned
// for an invalid command. It blocks until the command is applied here or
// timeout passes.
func (g *Group) Apply(cmd *messages.FSMCommand, timeout time.Duration) error {
	if cmd == nil || cmd.Cmd == nil {
		return errors.New("consensus: Apply: empty command")
	}
	select {
	case <-g.shutdownCh:
		return ErrShutdown
	default:
	}
	if g.raft.State() != raft.Leader {
		return ErrNotLeader
	}
	b, err := proto.Marshal(cmd)
	if err != nil {
		return fmt.Errorf("consensus: Apply: %w", err)
	}
	f := g.raft.Apply(b, timeout)
	if err := f.Error(); err != nil {
		return mapRaftErr(err)
	}
	if rerr, ok := f.Response().(error); ok && rerr != nil {
		return rerr
	}
	return nil
}

func mapRaftErr(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrLeadershipTransferInProgress), errors.Is(err, raft.ErrAbortedByRestore):
		return fmt.Errorf("%w: %v", ErrNotLeader, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrShutdown
	}
	return fmt.Errorf("consensus: %w", err)
}

// Snapshot asks raft to take a snapshot now (tests, operators).
func (g *Group) Snapshot() error {
	if err := g.raft.Snapshot().Error(); err != nil {
		return fmt.Errorf("consensus: snapshot: %w", err)
	}
	return nil
}

// Servers returns the current Raft configuration as peers (sorted by id).
func (g *Group) Servers() ([]Peer, error) {
	f := g.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, mapRaftErr(err)
	}
	var out []Peer
	for _, s := range f.Configuration().Servers {
		out = append(out, Peer{ID: string(s.ID), RaftAddr: string(s.Address)})
	}
	slices.SortFunc(out, func(a, b Peer) int { return cmpString(a.ID, b.ID) })
	return out, nil
}

// UpdatePeers tells the group which members of its vertex gossip currently
// shows alive (self may be included or not; it is always counted). It drives
// bootstrap-expect, adds by the leader and removals after RemoveAfter. It
// never blocks on the network: the work happens on the group's goroutine.
func (g *Group) UpdatePeers(peers []Peer) {
	now := time.Now()
	g.mu.Lock()
	m := make(map[string]string, len(peers)+1)
	expects := map[string]int{}
	for _, p := range peers {
		if p.ID == "" || p.RaftAddr == "" || p.ID == g.cfg.NodeID {
			continue
		}
		m[p.ID] = p.RaftAddr
		if p.BootstrapExpect != 0 {
			expects[p.ID] = p.BootstrapExpect
		}
	}
	g.expects = expects
	m[g.cfg.NodeID] = string(g.trans.LocalAddr())
	key := peersKey(m)
	if key != g.peersKey {
		g.peersKey = key
		g.stableSince = now
	}
	// the previous set was present until now, the new one is present now
	for id := range g.peers {
		g.lastSeen[id] = now
	}
	for id := range m {
		g.lastSeen[id] = now
	}
	g.peers = m
	g.peersSet = true
	g.mu.Unlock()
	g.kickReconcile()
}

func peersKey(m map[string]string) string {
	ids := make([]string, 0, len(m))
	for id, a := range m {
		ids = append(ids, id+"="+a)
	}
	slices.Sort(ids)
	return strings.Join(ids, ",")
}

func (g *Group) kickReconcile() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// Shutdown stops raft, closes the transport and the log store and waits for
// every goroutine of the group. A leader first transfers leadership to
// another voter (bounded by ElectionTimeout) so the group fails over at once;
// a crash (kill -9) instead costs an election timeout. If this node was leader, onLeadership(false)
// is called before it returns. Idempotent.
func (g *Group) Shutdown() error { return g.shutdown(true) }

// shutdown is Shutdown; transfer=false simulates a crash in tests.
func (g *Group) shutdown(transfer bool) error {
	g.shutdownOnce.Do(func() {
		// A leader with other voters hands leadership over first, so the group
		// does not wait for an election timeout (bounded by ElectionTimeout).
		if transfer && g.raft.State() == raft.Leader {
			if f := g.raft.GetConfiguration(); f.Error() == nil && len(f.Configuration().Servers) > 1 {
				if err := g.raft.LeadershipTransfer().Error(); err != nil {
					g.log.Debug("leadership transfer before shutdown failed", "err", err)
				}
			}
		}
		close(g.shutdownCh)
		err := g.raft.Shutdown().Error()
		g.raft.DeregisterObserver(g.observer)
		// closing the transport (and all its connections) unblocks a
		// bootstrap probe in flight on the reconcile goroutine
		if cerr := g.trans.Close(); err == nil {
			err = cerr
		}
		g.wg.Wait()
		if cerr := g.wal.Close(); err == nil {
			err = cerr
		}
		if cerr := g.meta.Close(); err == nil {
			err = cerr
		}
		g.unlock()
		if g.isLeader.Swap(false) && g.onLeadership != nil {
			g.onLeadership(false)
		}
		g.shutdownErr = err
		g.log.Info("raft group stopped")
	})
	return g.shutdownErr
}

// leadershipLoop reports leadership changes. Observations may be dropped
// (non-blocking observer), so state is also polled.
func (g *Group) leadershipLoop() {
	t := time.NewTicker(max(g.cfg.HeartbeatTimeout/2, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-g.shutdownCh:
			return
		case <-g.obsCh:
		case <-t.C:
		}
		now := g.raft.State() == raft.Leader
		if now == g.isLeader.Load() {
			continue
		}
		if now {
			// A new leader learns the commit index only once an entry of its
			// own term commits: wait until every earlier entry is applied so
			// that State() is complete when leadership is reported.
			if err := g.raft.Barrier(max(10*g.cfg.HeartbeatTimeout, time.Second)).Error(); err != nil {
				g.log.Debug("leadership: barrier failed", "err", err)
				continue
			}
			now = g.raft.State() == raft.Leader
			if !now {
				continue
			}
		}
		select {
		case <-g.shutdownCh:
			return // Shutdown reports the final false
		default:
		}
		g.isLeader.Store(now)
		g.log.Info("leadership changed", "is_leader", now)
		if g.onLeadership != nil {
			g.onLeadership(now)
		}
		g.kickReconcile()
	}
}

func (g *Group) reconcileLoop() {
	t := time.NewTicker(g.cfg.ReconcileInterval)
	defer t.Stop()
	for {
		select {
		case <-g.shutdownCh:
			return
		case <-g.kick:
		case <-t.C:
		}
		g.reconcile()
	}
}

func (g *Group) reconcile() {
	if !g.bootstrapped.Load() {
		if f := g.raft.GetConfiguration(); f.Error() == nil && len(f.Configuration().Servers) > 0 {
			g.bootstrapped.Store(true) // added by a leader
		} else {
			g.maybeBootstrap()
			return
		}
	}
	if g.raft.State() == raft.Leader {
		g.leaderReconcile()
	}
}

func (g *Group) shuttingDown() bool {
	select {
	case <-g.shutdownCh:
		return true
	default:
		return false
	}
}

// maybeBootstrap bootstraps the group when this node is the lowest id among
// at least BootstrapExpect stable peers and none of them has Raft state.
func (g *Group) maybeBootstrap() {
	expect := g.cfg.BootstrapExpect
	if expect == 0 {
		return
	}
	g.mu.Lock()
	peers := make(map[string]string, len(g.peers))
	for id, a := range g.peers {
		peers[id] = a
	}
	stableFor := time.Since(g.stableSince)
	var conflicts []string
	for id, e := range g.expects {
		if e != expect {
			conflicts = append(conflicts, fmt.Sprintf("%s=%d", id, e))
		}
	}
	g.mu.Unlock()

	if len(peers) < expect {
		return
	}
	if len(conflicts) > 0 {
		slices.Sort(conflicts)
		if key := strings.Join(conflicts, ","); key != g.lastConflict { // log each conflict once
			g.lastConflict = key
			g.log.Warn("bootstrap blocked: peers expect a different number of voters",
				"bootstrap_expect", expect, "peers", conflicts)
		}
		return
	}
	ids := make([]string, 0, len(peers))
	for id := range peers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if ids[0] != g.cfg.NodeID {
		return // the lowest id bootstraps; we wait to be added
	}
	if expect > 1 && stableFor < g.cfg.BootstrapStable {
		return
	}
	// Ask every peer for its current term (a side-effect-free pre-vote with
	// term 0): any term > 0 means it already belongs to a group.
	for _, id := range ids[1:] {
		if g.shuttingDown() {
			return
		}
		term, err := g.probe(id, peers[id])
		if err != nil {
			g.log.Debug("bootstrap: peer not reachable yet", "peer", id, "err", err)
			return
		}
		if term > 0 {
			g.log.Info("bootstrap: peer already has raft state; waiting to be added", "peer", id, "term", term)
			return
		}
	}
	var conf raft.Configuration
	for _, id := range ids {
		conf.Servers = append(conf.Servers, raft.Server{
			Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(peers[id]),
		})
	}
	err := g.raft.BootstrapCluster(conf).Error()
	switch {
	case err == nil:
		g.log.Info("bootstrapped raft group", "voters", ids)
	case errors.Is(err, raft.ErrCantBootstrap):
		g.log.Info("bootstrap: raft state already exists")
	default:
		g.log.Warn("bootstrap failed", "err", err)
		return
	}
	g.bootstrapped.Store(true)
}

// probe asks a peer's Raft transport for its current term with a pre-vote
// request for term 0, which changes nothing on the peer (term 0 = no Raft
// state). An error means the peer's Raft endpoint is not reachable.
func (g *Group) probe(id, addr string) (uint64, error) {
	var resp raft.RequestPreVoteResponse
	req := &raft.RequestPreVoteRequest{
		RPCHeader: raft.RPCHeader{
			ProtocolVersion: raft.ProtocolVersionMax,
			ID:              []byte(g.cfg.NodeID),
			Addr:            g.trans.EncodePeer(raft.ServerID(g.cfg.NodeID), g.trans.LocalAddr()),
		},
	}
	if err := g.trans.RequestPreVote(raft.ServerID(id), raft.ServerAddress(addr), req, &resp); err != nil {
		return 0, err
	}
	return resp.Term, nil
}

// leaderReconcile adds gossip-visible peers missing from the configuration,
// removes voters gone longer than RemoveAfter and records the voters in the
// replicated state.
func (g *Group) leaderReconcile() {
	f := g.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return
	}
	servers := f.Configuration().Servers
	g.mu.Lock()
	peersSet := g.peersSet
	peers := make(map[string]string, len(g.peers))
	for id, a := range g.peers {
		peers[id] = a
	}
	now := time.Now()
	missingFor := map[string]time.Duration{}
	for _, s := range servers {
		id := string(s.ID)
		if _, ok := peers[id]; ok || id == g.cfg.NodeID {
			continue
		}
		since := g.lastSeen[id]
		if since.Before(g.started) {
			since = g.started
		}
		missingFor[id] = now.Sub(since)
	}
	g.mu.Unlock()

	timeout := max(10*g.cfg.HeartbeatTimeout, time.Second)
	changed := false
	inConf := map[string]string{}
	for _, s := range servers {
		inConf[string(s.ID)] = string(s.Address)
	}
	if peersSet {
		for id, addr := range peers {
			if g.shuttingDown() || g.raft.State() != raft.Leader {
				return
			}
			if cur, ok := inConf[id]; ok && cur == addr {
				continue
			}
			// Never add an unreachable voter: in a small group it would cost
			// the quorum (a group of one adding a dead second voter stalls).
			if _, err := g.probe(id, addr); err != nil {
				g.log.Debug("not adding unreachable peer yet", "peer", id, "addr", addr, "err", err)
				continue
			}
			if err := g.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, timeout).Error(); err != nil {
				g.log.Warn("add voter failed", "peer", id, "addr", addr, "err", err)
				continue
			}
			g.log.Info("added voter", "peer", id, "addr", addr)
			changed = true
		}
		for id, d := range missingFor {
			if d < g.cfg.RemoveAfter || g.shuttingDown() || g.raft.State() != raft.Leader {
				continue
			}
			if err := g.raft.RemoveServer(raft.ServerID(id), 0, timeout).Error(); err != nil {
				g.log.Warn("remove server failed", "peer", id, "err", err)
				continue
			}
			g.log.Info("removed voter gone too long", "peer", id, "gone_for", d.Round(time.Millisecond))
			changed = true
		}
	}
	if changed {
		f = g.raft.GetConfiguration()
		if err := f.Error(); err != nil {
			return
		}
		servers = f.Configuration().Servers
	}
	// Record the voters in the replicated state when they differ.
	want := make([]*messages.GroupMember, 0, len(servers))
	for _, s := range servers {
		if s.Suffrage == raft.Voter {
			want = append(want, &messages.GroupMember{Id: string(s.ID), RaftAddr: string(s.Address)})
		}
	}
	slices.SortFunc(want, func(a, b *messages.GroupMember) int { return cmpString(a.GetId(), b.GetId()) })
	have := g.fsm.snapshotState().GetMembers()
	if slices.EqualFunc(want, have, func(a, b *messages.GroupMember) bool { return proto.Equal(a, b) }) {
		return
	}
	cmd := &messages.FSMCommand{Cmd: &messages.FSMCommand_SetMembers{SetMembers: &messages.FSMSetMembers{Members: want}}}
	if err := g.Apply(cmd, timeout); err != nil && !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrShutdown) {
		g.log.Warn("record members failed", "err", err)
	}
}
