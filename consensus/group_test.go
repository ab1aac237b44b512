package consensus

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idn-net/idn/internal/leakcheck"
	"github.com/idn-net/idn/messages"
)

func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("IDN_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return nil
}

// checkNoLeaks fails the test if raft or consensus goroutines are still
// running shortly after the test's cleanups.
func checkNoLeaks(t *testing.T) {
	t.Helper()
	leakcheck.Check(t, "hashicorp/raft", "idn/consensus.")
}

type tnode struct {
	id      string
	dir     string
	g       *Group
	leaderN atomic.Int32 // leadership callbacks with true
	mu      sync.Mutex
	calls   []bool
}

func (n *tnode) onLeader(b bool) {
	n.mu.Lock()
	n.calls = append(n.calls, b)
	n.mu.Unlock()
	if b {
		n.leaderN.Add(1)
	}
}

func testConfig(t *testing.T, id, dir string, expect int) Config {
	c := DefaultLocalConfig()
	c.NodeID = id
	c.Vertex = "v1"
	c.DataDir = dir
	c.BootstrapExpect = expect
	c.Logger = testLogger(t)
	return c
}

func start(t *testing.T, id, dir string, expect int, mod func(*Config)) *tnode {
	t.Helper()
	n := &tnode{id: id, dir: dir}
	cfg := testConfig(t, id, dir, expect)
	if mod != nil {
		mod(&cfg)
	}
	g, err := New(cfg, n.onLeader)
	if err != nil {
		t.Fatalf("New(%s): %v", id, err)
	}
	n.g = g
	t.Cleanup(func() { _ = g.Shutdown() })
	return n
}

func peersOf(nodes ...*tnode) []Peer {
	var ps []Peer
	for _, n := range nodes {
		ps = append(ps, Peer{ID: n.id, RaftAddr: n.g.Addr()})
	}
	return ps
}

// gossipAll plays gossip: tells every node about all of them.
func gossipAll(nodes ...*tnode) {
	ps := peersOf(nodes...)
	for _, n := range nodes {
		n.g.UpdatePeers(ps)
	}
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

func leaders(nodes ...*tnode) []*tnode {
	var ls []*tnode
	for _, n := range nodes {
		if n.g.IsLeader() {
			ls = append(ls, n)
		}
	}
	return ls
}

// waitLeader waits until exactly one of nodes is leader and every node knows it.
func waitLeader(t *testing.T, nodes ...*tnode) *tnode {
	t.Helper()
	var l *tnode
	waitFor(t, 10*time.Second, "one agreed leader", func() bool {
		ls := leaders(nodes...)
		if len(ls) != 1 {
			return false
		}
		l = ls[0]
		for _, n := range nodes {
			if id, _ := n.g.Leader(); id != l.id {
				return false
			}
		}
		return true
	})
	return l
}

// mustApply applies cmd through whichever of nodes is leader, retrying while
// leadership moves (a loaded machine can trigger re-elections with the
// loopback preset's 100 ms timeouts).
func mustApply(t *testing.T, cmd *messages.FSMCommand, nodes ...*tnode) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error = ErrNotLeader
		for _, n := range nodes {
			if n.g.IsLeader() {
				err = n.g.Apply(cmd, time.Second)
				break
			}
		}
		if err == nil {
			return
		}
		if !errors.Is(err, ErrNotLeader) || time.Now().After(deadline) {
			t.Fatalf("apply: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func setHosted(models ...string) *messages.FSMCommand {
	return &messages.FSMCommand{Cmd: &messages.FSMCommand_SetHosted{SetHosted: &messages.FSMSetHosted{Models: models}}}
}

func advance() *messages.FSMCommand {
	return &messages.FSMCommand{Cmd: &messages.FSMCommand_AdvanceSlot{AdvanceSlot: &messages.FSMAdvanceSlot{}}}
}

func startGroup(t *testing.T, n int) []*tnode {
	t.Helper()
	var nodes []*tnode
	for i := range n {
		nodes = append(nodes, start(t, fmt.Sprintf("node-%d", i), t.TempDir(), n, nil))
	}
	gossipAll(nodes...)
	return nodes
}

func TestBootstrapExpectElectsOneLeader(t *testing.T) {
	checkNoLeaks(t)
	for run := range 4 {
		t.Run(fmt.Sprint(run), func(t *testing.T) {
			// Start three nodes together; gossip views arrive in different
			// orders (run-dependent) before converging.
			var nodes []*tnode
			for i := range 3 {
				nodes = append(nodes, start(t, fmt.Sprintf("n%d", (i+run)%3), t.TempDir(), 3, nil))
			}
			for i, n := range nodes { // partial views first
				n.g.UpdatePeers(peersOf(nodes[i], nodes[(i+1)%3]))
			}
			time.Sleep(50 * time.Millisecond)
			gossipAll(nodes...)
			l := waitLeader(t, nodes...)
			// exactly one group of three: every node has the same 3-voter configuration
			for _, n := range nodes {
				waitFor(t, 5*time.Second, "3 voters everywhere", func() bool {
					s, err := n.g.Servers()
					return err == nil && len(s) == 3
				})
			}
			// the leader records the members in the replicated state
			waitFor(t, 5*time.Second, "members in state", func() bool {
				for _, n := range nodes {
					if len(n.g.State().GetMembers()) != 3 {
						return false
					}
				}
				return true
			})
			if l.leaderN.Load() < 1 {
				t.Fatal("leadership callback not called")
			}
			// one group: every node holds the same voter set
			want, _ := nodes[0].g.Servers()
			for _, n := range nodes[1:] {
				if got, _ := n.g.Servers(); !slices.Equal(got, want) {
					t.Fatalf("%s has configuration %v, %s has %v", n.id, got, nodes[0].id, want)
				}
			}
		})
	}
}

func TestApplyReplicatesAndFailover(t *testing.T) {
	checkNoLeaks(t)
	nodes := startGroup(t, 3)
	l := waitLeader(t, nodes...)
	mustApply(t, setHosted("yolov4-416", "yolov4-tiny", "yolov4-416"), nodes...)
	for range 3 {
		mustApply(t, advance(), nodes...)
	}
	l = waitLeader(t, nodes...)
	for _, n := range nodes {
		if n == l {
			continue
		}
		if err := n.g.Apply(advance(), time.Second); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("follower Apply: %v, want ErrNotLeader", err)
		}
		waitFor(t, 5*time.Second, "replicated state", func() bool {
			s := n.g.State()
			return s.GetSlot() == 3 && strings.Join(s.GetHostedModels(), ",") == "yolov4-416,yolov4-tiny"
		})
	}
	// compare-and-set slot
	cas := &messages.FSMCommand{Cmd: &messages.FSMCommand_AdvanceSlot{AdvanceSlot: &messages.FSMAdvanceSlot{CheckExpect: true, ExpectSlot: 1}}}
	if err := l.g.Apply(cas, time.Second); err == nil {
		t.Fatal("advance_slot with a stale expect_slot applied")
	}

	// kill the leader (no graceful handover): the survivors elect a new one with the state.
	killed := time.Now()
	_ = l.g.shutdown(false) // crash: no leadership transfer
	var rest []*tnode
	for _, n := range nodes {
		if n != l {
			rest = append(rest, n)
		}
	}
	gossipAll(rest...)
	nl := waitLeader(t, rest...)
	t.Logf("new leader %s elected %v after the leader was killed", nl.id, time.Since(killed).Round(time.Millisecond))
	if s := nl.g.State(); s.GetSlot() != 3 || len(s.GetHostedModels()) != 2 {
		t.Fatalf("new leader lost state: %v", s)
	}
	mustApply(t, advance(), rest...)
	if calls := l.calls; len(calls) == 0 || calls[len(calls)-1] {
		t.Fatalf("old leader callbacks %v: want final false", calls)
	}
	if err := l.g.Apply(advance(), time.Second); !errors.Is(err, ErrShutdown) {
		t.Fatalf("Apply after Shutdown: %v", err)
	}
}

func TestGroupOfOneAndRestart(t *testing.T) {
	checkNoLeaks(t)
	dir := t.TempDir()
	n := start(t, "solo", dir, 1, nil)
	waitLeader(t, n)
	if err := n.g.Apply(setHosted("m1"), time.Second); err != nil {
		t.Fatal(err)
	}
	if err := n.g.Apply(advance(), time.Second); err != nil {
		t.Fatal(err)
	}
	if err := n.g.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := n.g.Shutdown(); err != nil { // idempotent
		t.Fatal(err)
	}
	// restart from the data dir (new port): state comes back, no new bootstrap
	n2 := start(t, "solo", dir, 1, nil)
	waitLeader(t, n2)
	waitFor(t, 5*time.Second, "restored state", func() bool {
		s := n2.g.State()
		return s.GetSlot() == 1 && len(s.GetHostedModels()) == 1
	})
	// snapshot, restart again: restored from the zstd snapshot
	if err := n2.g.Apply(advance(), time.Second); err != nil {
		t.Fatal(err)
	}
	if err := n2.g.Snapshot(); err != nil {
		t.Fatal(err)
	}
	_ = n2.g.Shutdown()
	n3 := start(t, "solo", dir, 1, nil)
	if s := n3.g.State(); s.GetSlot() != 2 { // restored at New, before any election
		t.Fatalf("state after snapshot restore: %v", s)
	}
	waitLeader(t, n3)
}

func TestRestartFollowerRejoins(t *testing.T) {
	checkNoLeaks(t)
	nodes := startGroup(t, 3)
	mustApply(t, advance(), nodes...)
	l := waitLeader(t, nodes...)
	var f *tnode
	for _, n := range nodes {
		if n != l {
			f = n
			break
		}
	}
	waitFor(t, 5*time.Second, "follower applied", func() bool { return f.g.State().GetSlot() == 1 })
	_ = f.g.Shutdown()
	mustApply(t, advance(), nodes...) // f is shut down: never leader
	// restart on a new port with the same data dir; gossip shows its new address
	f2 := start(t, f.id, f.dir, 3, nil)
	var live []*tnode
	for _, n := range nodes {
		if n != f {
			live = append(live, n)
		}
	}
	live = append(live, f2)
	gossipAll(live...)
	// hashicorp/raft backs off replication to an unreachable follower (up to
	// ~10 s), so catching up after a restart can take that long.
	waitFor(t, 30*time.Second, "restarted follower catches up", func() bool { return f2.g.State().GetSlot() == 2 })
	s, _ := l.g.Servers()
	for _, p := range s {
		if p.ID == f.id && p.RaftAddr != f2.g.Addr() {
			t.Fatalf("leader kept old address %s for %s", p.RaftAddr, p.ID)
		}
	}
}

func TestFourthNodeAddedAndRemoveAfter(t *testing.T) {
	checkNoLeaks(t)
	var nodes []*tnode
	for i := range 3 {
		nodes = append(nodes, start(t, fmt.Sprintf("node-%d", i), t.TempDir(), 3, func(c *Config) { c.RemoveAfter = time.Second }))
	}
	gossipAll(nodes...)
	l := waitLeader(t, nodes...)
	mustApply(t, setHosted("m"), nodes...)
	late := start(t, "node-0a", t.TempDir(), 3, func(c *Config) { c.RemoveAfter = time.Second })
	all := append(append([]*tnode(nil), nodes...), late)
	gossipAll(all...)
	waitFor(t, 10*time.Second, "4th node is a voter with the state", func() bool {
		s, err := l.g.Servers()
		return err == nil && len(s) == 4 && len(late.g.State().GetHostedModels()) == 1 &&
			len(late.g.State().GetMembers()) == 4
	})
	waitFor(t, 5*time.Second, "late node knows the leader", func() bool { id, _ := late.g.Leader(); return id != "" })

	// a follower disappears from gossip: removed after RemoveAfter
	var gone *tnode
	for _, n := range all {
		if n != l {
			gone = n
			break
		}
	}
	_ = gone.g.Shutdown()
	var live []*tnode
	for _, n := range all {
		if n != gone {
			live = append(live, n)
		}
	}
	gossipAll(live...)
	d := waitFor(t, 10*time.Second, "removal", func() bool {
		s, err := l.g.Servers()
		return err == nil && len(s) == 3 && len(l.g.State().GetMembers()) == 3
	})
	if d < 500*time.Millisecond {
		t.Fatalf("removed after %v, before RemoveAfter", d)
	}
}

func TestNoBootstrapIntoExistingGroup(t *testing.T) {
	checkNoLeaks(t)
	// b and c form a group of two (expect 2); "a" (lowest id, no state, expect 2)
	// shows up later: it must not bootstrap a second group but be added.
	b := start(t, "b", t.TempDir(), 2, nil)
	c := start(t, "c", t.TempDir(), 2, nil)
	gossipAll(b, c)
	waitLeader(t, b, c)
	mustApply(t, advance(), b, c)
	a := start(t, "a", t.TempDir(), 2, nil)
	a.g.UpdatePeers(peersOf(a, b, c)) // a sees everyone before the leader sees a
	time.Sleep(500 * time.Millisecond)
	if s, _ := a.g.Servers(); len(s) != 0 {
		t.Fatalf("a bootstrapped on its own: %v", s)
	}
	gossipAll(a, b, c)
	waitFor(t, 10*time.Second, "a added", func() bool { return a.g.State().GetSlot() == 1 })
	if ls := leaders(a, b, c); len(ls) != 1 {
		t.Fatalf("%d leaders", len(ls))
	}
}

func TestValidateNamesFields(t *testing.T) {
	c := Config{BindAddr: "0.0.0.0:0", BootstrapExpect: -1, LeaderLeaseTimeout: time.Second, HeartbeatTimeout: 10 * time.Millisecond}
	err := c.Validate()
	if err == nil {
		t.Fatal("want error")
	}
	for _, f := range []string{"NodeID", "Vertex", "AdvertiseAddr", "DataDir", "BootstrapExpect", "RemoveAfter",
		"ElectionTimeout", "LeaderLeaseTimeout", "SnapshotThreshold"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error does not name %s: %v", f, err)
		}
	}
	if _, err := New(c, nil); err == nil {
		t.Fatal("New accepted an invalid config")
	}
	good := DefaultLocalConfig()
	good.NodeID, good.Vertex, good.DataDir = "a", "v", "/nonexistent-but-not-created-by-validate"
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(good.DataDir); !os.IsNotExist(err) {
		t.Fatal("Validate touched the file system")
	}
}

func TestDropPartitionsLeader(t *testing.T) {
	checkNoLeaks(t)
	var cut atomic.Bool
	var nodes []*tnode
	for i := range 3 {
		mod := func(c *Config) {}
		if i == 0 {
			// node-0 gets the fault hook (leader or follower, both must work)
			mod = func(c *Config) { c.Drop = func(string) bool { return cut.Load() } }
		}
		nodes = append(nodes, start(t, fmt.Sprintf("node-%d", i), t.TempDir(), 3, mod))
	}
	gossipAll(nodes...)
	waitLeader(t, nodes...)
	mustApply(t, advance(), nodes...)
	iso := nodes[0]
	cut.Store(true)
	var rest []*tnode
	for _, n := range nodes[1:] {
		rest = append(rest, n)
	}
	waitFor(t, 10*time.Second, "majority side has a leader", func() bool {
		ls := leaders(rest...)
		return len(ls) == 1
	})
	waitFor(t, 10*time.Second, "isolated node is not leader", func() bool { return !iso.g.IsLeader() })
	mustApply(t, advance(), rest...)
	if err := iso.g.Apply(advance(), 100*time.Millisecond); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("isolated Apply: %v", err)
	}
	cut.Store(false)
	waitFor(t, 30*time.Second, "healed node catches up" /* raft replication backoff, see above */, func() bool {
		return iso.g.State().GetSlot() == 2 && len(leaders(nodes...)) == 1
	})
}

func TestGracefulShutdownTransfersLeadership(t *testing.T) {
	checkNoLeaks(t)
	nodes := startGroup(t, 3)
	l := waitLeader(t, nodes...)
	var rest []*tnode
	for _, n := range nodes {
		if n != l {
			rest = append(rest, n)
		}
	}
	stopped := time.Now()
	_ = l.g.Shutdown()
	nl := waitLeader(t, rest...)
	t.Logf("graceful shutdown of the leader: %s leads %v later", nl.id, time.Since(stopped).Round(time.Millisecond))
}

func TestSnapshotInstallToNewNode(t *testing.T) {
	checkNoLeaks(t)
	small := func(c *Config) { c.TrailingLogs = 1; c.SnapshotThreshold = 4 }
	a := start(t, "a", t.TempDir(), 1, small)
	waitLeader(t, a)
	if err := a.g.Apply(setHosted("m1", "m2"), time.Second); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if err := a.g.Apply(advance(), time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.g.Snapshot(); err != nil {
		t.Fatal(err)
	}
	// b joins later: the leader's log no longer starts at 1, so b gets the
	// zstd snapshot through InstallSnapshot and restores it.
	b := start(t, "b", t.TempDir(), 1, func(c *Config) { small(c); c.BootstrapExpect = 0 })
	gossipAll(a, b)
	waitFor(t, 10*time.Second, "b restored the snapshot", func() bool {
		s := b.g.State()
		return s.GetSlot() == 20 && len(s.GetHostedModels()) == 2
	})
}

// TestMeasureFailover crashes the leader of a fresh 3-voter group (loopback
// preset) several times and reports the time until a new leader is reported
// (slow: run with IDN_SLOW=1).
func TestMeasureFailover(t *testing.T) {
	if os.Getenv("IDN_SLOW") == "" {
		t.Skip("set IDN_SLOW=1 to measure failover")
	}
	var ds []time.Duration
	for i := range 10 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			nodes := startGroup(t, 3)
			l := waitLeader(t, nodes...)
			var rest []*tnode
			for _, n := range nodes {
				if n != l {
					rest = append(rest, n)
				}
			}
			killed := time.Now()
			_ = l.g.shutdown(false)
			waitLeader(t, rest...)
			ds = append(ds, time.Since(killed))
		})
	}
	slices.Sort(ds)
	t.Logf("re-election after a leader crash over %d runs: min %v median %v max %v", len(ds),
		ds[0].Round(time.Millisecond), ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
}

func TestUnreachablePeerNotAdded(t *testing.T) {
	checkNoLeaks(t)
	solo := start(t, "a", t.TempDir(), 1, nil)
	waitLeader(t, solo)
	// gossip shows a second node of the vertex whose Raft address is dead
	solo.g.UpdatePeers([]Peer{{ID: "a", RaftAddr: solo.g.Addr()}, {ID: "b", RaftAddr: "127.0.0.1:1"}})
	time.Sleep(3 * DefaultLocalConfig().ReconcileInterval)
	if s, _ := solo.g.Servers(); len(s) != 1 {
		t.Fatalf("unreachable peer added: %v", s)
	}
	mustApply(t, advance(), solo) // the group of one still commits
}

func TestDataDirInUse(t *testing.T) {
	checkNoLeaks(t)
	dir := t.TempDir()
	start(t, "a", dir, 1, nil)
	cfg := testConfig(t, "a", dir, 1)
	done := make(chan error, 1)
	go func() {
		_, err := New(cfg, nil)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "DataDir") || !strings.Contains(err.Error(), "in use") {
			t.Fatalf("second group on the same DataDir: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("second group on the same DataDir blocked")
	}
}

func TestConflictingExpectBlocksBootstrap(t *testing.T) {
	checkNoLeaks(t)
	a := start(t, "a", t.TempDir(), 2, nil)
	b := start(t, "b", t.TempDir(), 2, nil)
	a.g.UpdatePeers([]Peer{{ID: "b", RaftAddr: b.g.Addr(), BootstrapExpect: 3}})
	time.Sleep(3 * DefaultLocalConfig().BootstrapStable)
	if s, _ := a.g.Servers(); len(s) != 0 {
		t.Fatalf("bootstrapped despite conflicting expect: %v", s)
	}
	a.g.UpdatePeers([]Peer{{ID: "b", RaftAddr: b.g.Addr(), BootstrapExpect: 2}})
	b.g.UpdatePeers([]Peer{{ID: "a", RaftAddr: a.g.Addr(), BootstrapExpect: 2}})
	waitLeader(t, a, b)
}
