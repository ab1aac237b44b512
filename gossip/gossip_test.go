package gossip

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idn-net/idn/internal/leakcheck"
)

func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("IDN_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return nil
}

// checkNoLeaks fails the test if goroutines of memberlist or this package are
// still running shortly after the test's cleanups.
func checkNoLeaks(t *testing.T) {
	t.Helper()
	leakcheck.Check(t, "hashicorp/memberlist", "idn/gossip.")
}

type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) add(e Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) find(kind EventKind, name string) (Event, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e.Kind == kind && e.Member.Name == name {
			return e, true
		}
	}
	return Event{}, false
}

type tnode struct {
	g   *Gossip
	rec *recorder
}

func startNode(t *testing.T, name string, seeds []string, mod func(*Config)) *tnode {
	t.Helper()
	return startNodeCB(t, name, seeds, mod, nil)
}

func startNodeCB(t *testing.T, name string, seeds []string, mod func(*Config), cb func(Event)) *tnode {
	t.Helper()
	cfg := DefaultLocalConfig()
	cfg.NodeName = name
	cfg.Seeds = seeds
	cfg.Logger = testLogger(t)
	cfg.Meta = Meta{Vertex: "v1", Tier: 1, RaftAddr: "127.0.0.1:1", GPUs: 2, GPUMemMB: 16000, BootstrapExpect: 3}
	if mod != nil {
		mod(&cfg)
	}
	rec := &recorder{}
	if cb == nil {
		cb = rec.add
	}
	g, err := New(cfg, cb)
	if err != nil {
		t.Fatalf("New(%s): %v", name, err)
	}
	t.Cleanup(func() { _ = g.Shutdown() })
	return &tnode{g: g, rec: rec}
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

func names(ms []Member) string {
	var s []string
	for _, m := range ms {
		s = append(s, m.Name)
	}
	return strings.Join(s, ",")
}

func startCluster(t *testing.T, n int, mod func(*Config)) []*tnode {
	t.Helper()
	seed := startNode(t, "n0", nil, mod)
	nodes := []*tnode{seed}
	for i := 1; i < n; i++ {
		nd := startNode(t, fmt.Sprintf("n%d", i), []string{seed.g.Addr()}, mod)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := nd.g.Join(ctx); err != nil {
			cancel()
			t.Fatalf("join n%d: %v", i, err)
		}
		cancel()
		nodes = append(nodes, nd)
	}
	for _, nd := range nodes {
		waitFor(t, 10*time.Second, "full membership", func() bool { return nd.g.NumMembers() == n })
	}
	return nodes
}

func TestJoinMetaAndFailure(t *testing.T) {
	checkNoLeaks(t)
	nodes := startCluster(t, 5, nil)

	// metadata arrives intact
	for _, m := range nodes[0].g.Members() {
		if m.Meta.Vertex != "v1" || m.Meta.GPUs != 2 || m.Meta.GPUMemMB != 16000 || m.Meta.BootstrapExpect != 3 || m.State != MemberAlive {
			t.Fatalf("member %s: bad meta/state %+v", m.Name, m)
		}
	}
	if got := nodes[0].g.LocalMember().Name; got != "n0" {
		t.Fatalf("LocalMember = %s", got)
	}

	// kill n4 without leaving
	victim := nodes[4]
	killed := time.Now()
	if err := victim.g.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := victim.g.Shutdown(); err != nil { // idempotent
		t.Fatal(err)
	}
	for _, nd := range nodes[:4] {
		waitFor(t, 10*time.Second, "EventFail for n4", func() bool {
			_, ok := nd.rec.find(EventFail, "n4")
			return ok
		})
		waitFor(t, 10*time.Second, "n4 dropped", func() bool { return !strings.Contains(names(nd.g.Members()), "n4") })
	}
	t.Logf("crash of n4 detected by all 4 survivors after %v", time.Since(killed).Round(time.Millisecond))
	if _, ok := nodes[0].rec.find(EventLeave, "n4"); ok {
		t.Fatal("crash reported as EventLeave")
	}
}

func TestGracefulLeave(t *testing.T) {
	checkNoLeaks(t)
	nodes := startCluster(t, 3, nil)
	start := time.Now()
	if err := nodes[2].g.Leave(time.Second); err != nil {
		t.Fatal(err)
	}
	_ = nodes[2].g.Shutdown()
	if err := nodes[2].g.Leave(time.Second); err != ErrShutdown {
		t.Fatalf("Leave after Shutdown = %v", err)
	}
	for _, nd := range nodes[:2] {
		waitFor(t, 5*time.Second, "EventLeave", func() bool {
			_, ok := nd.rec.find(EventLeave, "n2")
			return ok
		})
		if _, ok := nd.rec.find(EventFail, "n2"); ok {
			t.Fatal("leave reported as EventFail")
		}
	}
	t.Logf("graceful leave seen after %v", time.Since(start).Round(time.Millisecond))
}

func TestUpdateMeta(t *testing.T) {
	checkNoLeaks(t)
	nodes := startCluster(t, 2, nil)
	m := nodes[1].g.Meta()
	m.APIAddr = "127.0.0.1:8080"
	if err := nodes[1].g.UpdateMeta(m, time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "EventUpdate", func() bool {
		e, ok := nodes[0].rec.find(EventUpdate, "n1")
		return ok && e.Member.Meta.APIAddr == "127.0.0.1:8080"
	})
	m.Vertex = strings.Repeat("x", 600)
	if err := nodes[1].g.UpdateMeta(m, time.Second); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("oversized UpdateMeta: %v", err)
	}
}

func TestMetaTooLarge(t *testing.T) {
	cfg := DefaultLocalConfig()
	cfg.NodeName = "big"
	cfg.Meta.Vertex = strings.Repeat("v", MaxMetaSize)
	_, err := New(cfg, nil)
	if err == nil || !strings.Contains(err.Error(), "Meta") {
		t.Fatalf("want Meta error, got %v", err)
	}
}

func TestValidateNamesFields(t *testing.T) {
	cfg := Config{SecretKey: []byte("short"), Seeds: []string{"nohost"}, BindAddr: "localhost:x"}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("want error")
	}
	for _, f := range []string{"NodeName", "BindAddr", "Seeds[0]", "SecretKey", "JoinBackoffMin", "ProbeInterval", "SuspicionMult"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error does not name %s: %v", f, err)
		}
	}
	if err := DefaultConfig().Validate(); err == nil || !strings.Contains(err.Error(), "NodeName") {
		t.Fatalf("default config without name: %v", err)
	}
	c := DefaultLocalConfig()
	c.NodeName = "a"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestEncryption(t *testing.T) {
	checkNoLeaks(t)
	key1 := []byte("0123456789abcdef")
	key2 := []byte("fedcba9876543210")
	a := startNode(t, "a", nil, func(c *Config) { c.SecretKey = key1 })
	b := startNode(t, "b", []string{a.g.Addr()}, func(c *Config) { c.SecretKey = key1 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.g.Join(ctx); err != nil {
		t.Fatalf("same key join: %v", err)
	}
	waitFor(t, 5*time.Second, "encrypted membership", func() bool { return a.g.NumMembers() == 2 })

	c := startNode(t, "c", []string{a.g.Addr()}, func(c *Config) { c.SecretKey = key2 })
	ctx2, cancel2 := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel2()
	if err := c.g.Join(ctx2); err == nil {
		t.Fatal("node with a different key joined")
	}
	d := startNode(t, "d", []string{a.g.Addr()}, nil) // no key
	ctx3, cancel3 := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel3()
	if err := d.g.Join(ctx3); err == nil {
		t.Fatal("node without key joined")
	}
	if n := a.g.NumMembers(); n != 2 {
		t.Fatalf("members = %d (%s)", n, names(a.g.Members()))
	}
}

func TestJoinRetriesUntilSeedUp(t *testing.T) {
	checkNoLeaks(t)
	// reserve a port for the seed, start the joiner first
	probe := startNode(t, "probe", nil, nil)
	seedAddr := probe.g.Addr()
	_ = probe.g.Shutdown()

	joiner := startNode(t, "late", []string{seedAddr}, nil)
	errc := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() { errc <- joiner.g.Join(ctx) }()
	time.Sleep(300 * time.Millisecond)
	seed := startNode(t, "seed", nil, func(c *Config) { c.BindAddr = seedAddr })
	if err := <-errc; err != nil {
		t.Fatalf("join: %v", err)
	}
	waitFor(t, 5*time.Second, "2 members", func() bool { return seed.g.NumMembers() == 2 })

	// Join ends with ctx when no seed ever answers, and with ErrShutdown.
	lonely := startNode(t, "lonely", []string{"127.0.0.1:1"}, nil)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	if err := lonely.g.Join(ctx2); err != context.DeadlineExceeded {
		t.Fatalf("join without seeds: %v", err)
	}
	go func() { time.Sleep(100 * time.Millisecond); _ = lonely.g.Shutdown() }()
	if err := lonely.g.Join(context.Background()); err != ErrShutdown {
		t.Fatalf("join after shutdown: %v", err)
	}
}

func TestDropPartitions(t *testing.T) {
	checkNoLeaks(t)
	var mu sync.Mutex
	partitioned := false
	drop := func(string) bool { mu.Lock(); defer mu.Unlock(); return partitioned }
	nodes := startCluster(t, 2, nil)
	iso := startNode(t, "iso", []string{nodes[0].g.Addr()}, func(c *Config) { c.Drop = drop })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := iso.g.Join(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "3 members", func() bool { return nodes[0].g.NumMembers() == 3 })
	mu.Lock()
	partitioned = true
	mu.Unlock()
	waitFor(t, 10*time.Second, "iso failed", func() bool {
		_, ok := nodes[0].rec.find(EventFail, "iso")
		return ok
	})
	waitFor(t, 10*time.Second, "iso sees others failed", func() bool { return iso.g.NumMembers() == 1 })
	mu.Lock()
	partitioned = false
	mu.Unlock()
	// the reconnect loop heals the partition by itself
	d := waitFor(t, 10*time.Second, "healed", func() bool {
		return nodes[0].g.NumMembers() == 3 && nodes[1].g.NumMembers() == 3 && iso.g.NumMembers() == 3
	})
	t.Logf("partition healed %v after it ended", d.Round(time.Millisecond))
}

func TestRestartedNodeRejoins(t *testing.T) {
	checkNoLeaks(t)
	nodes := startCluster(t, 3, nil)
	old := nodes[2]
	_ = old.g.Shutdown() // crash
	waitFor(t, 10*time.Second, "n2 failed", func() bool {
		_, ok := nodes[0].rec.find(EventFail, "n2")
		return ok
	})
	// same name, new port (a restarted process)
	n2 := startNode(t, "n2", []string{nodes[0].g.Addr()}, func(c *Config) { c.Meta.APIAddr = "127.0.0.1:9" })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n2.g.Join(ctx); err != nil {
		t.Fatal(err)
	}
	for _, nd := range nodes[:2] {
		waitFor(t, 10*time.Second, "n2 back with its new address", func() bool {
			for _, m := range nd.g.Members() {
				if m.Name == "n2" && m.Addr == n2.g.Addr() && m.Meta.APIAddr == "127.0.0.1:9" {
					return true
				}
			}
			return false
		})
	}
}

func TestSlowCallbackDoesNotStallMembership(t *testing.T) {
	checkNoLeaks(t)
	block := make(chan struct{})
	var once sync.Once
	seed := startNode(t, "seed", nil, nil)
	// the callback blocks on the first event until the test ends
	slow := startNodeCB(t, "slow", []string{seed.g.Addr()}, nil, func(Event) { once.Do(func() { <-block }) })
	t.Cleanup(func() { close(block) }) // runs before slow's Shutdown (LIFO)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := slow.g.Join(ctx); err != nil {
		t.Fatal(err)
	}
	third := startNode(t, "third", []string{seed.g.Addr()}, nil)
	if err := third.g.Join(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "membership despite blocked callback", func() bool { return slow.g.NumMembers() == 3 })
}

// TestLANPresetFailureDetection measures the LAN preset's crash detection on
// loopback (slow: run with IDN_SLOW=1).
func TestLANPresetFailureDetection(t *testing.T) {
	if os.Getenv("IDN_SLOW") == "" {
		t.Skip("set IDN_SLOW=1 to measure the LAN preset")
	}
	checkNoLeaks(t)
	lan := func(c *Config) {
		d := DefaultConfig()
		d.BindAddr = "127.0.0.1:0"
		d.NodeName, d.Seeds, d.Logger, d.Meta = c.NodeName, c.Seeds, c.Logger, c.Meta
		*c = d
	}
	nodes := startCluster(t, 3, lan)
	killed := time.Now()
	_ = nodes[2].g.Shutdown()
	for _, nd := range nodes[:2] {
		waitFor(t, 60*time.Second, "EventFail", func() bool {
			_, ok := nd.rec.find(EventFail, "n2")
			return ok
		})
	}
	t.Logf("LAN preset: crash detected by both survivors after %v", time.Since(killed).Round(time.Millisecond))
}

// TestMeasureFailureDetection crashes one of 5 nodes (loopback preset)
// several times and reports when every survivor has seen EventFail (slow:
// run with IDN_SLOW=1).
func TestMeasureFailureDetection(t *testing.T) {
	if os.Getenv("IDN_SLOW") == "" {
		t.Skip("set IDN_SLOW=1 to measure failure detection")
	}
	var ds []time.Duration
	for i := range 10 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			nodes := startCluster(t, 5, nil)
			killed := time.Now()
			_ = nodes[4].g.Shutdown()
			for _, nd := range nodes[:4] {
				waitFor(t, 20*time.Second, "EventFail", func() bool {
					_, ok := nd.rec.find(EventFail, "n4")
					return ok
				})
			}
			ds = append(ds, time.Since(killed))
		})
	}
	slices.Sort(ds)
	t.Logf("crash detected by all survivors over %d runs: min %v median %v max %v", len(ds),
		ds[0].Round(time.Millisecond), ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
}
