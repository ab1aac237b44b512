// Package nodetest is a harness for tests that run several IDN nodes in one
// process on loopback: small topologies and catalogs, node configs bound to
// 127.0.0.1 with port 0, waiting helpers and a goroutine leak check.
package nodetest

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idn-net/idn/internal/leakcheck"
	"github.com/idn-net/idn/node"
)

// LineTopologyYAML is a three-vertex line edge - mid - repo (repository of
// every task) with RTTs of 2 ms and 4 ms.
const LineTopologyYAML = `name: line
vertices:
  - {id: repo, tier: 0, budget_mb: 100000, gpu: titan-rtx}
  - {id: mid,  tier: 1, budget_mb: 8000,   gpu: titan-rtx}
  - {id: edge, tier: 2, budget_mb: 4000,   gpu: titan-rtx}
edges:
  - {a: edge, b: mid,  rtt_ms: 2}
  - {a: mid,  b: repo, rtt_ms: 4}
repositories:
  default: repo
`

// ZeroRTTLineTopologyYAML is LineTopologyYAML with zero RTTs (benchmarks).
var ZeroRTTLineTopologyYAML = strings.NewReplacer("rtt_ms: 2", "rtt_ms: 0", "rtt_ms: 4", "rtt_ms: 0").Replace(LineTopologyYAML)

// SmallCatalogYAML has two tasks with three models each: "lo" (accuracy
// 0.5), "mid" (0.7) and "hi" (0.9).
const SmallCatalogYAML = `name: small
tasks: [det, cls]
variants:
  - {name: lo,  accuracy: 0.5, size_mb: 100, speed: {titan-rtx: {alpha_ms: 1, beta_ms: 1}}}
  - {name: mid, accuracy: 0.7, size_mb: 200, speed: {titan-rtx: {alpha_ms: 2, beta_ms: 2}}}
  - {name: hi,  accuracy: 0.9, size_mb: 400, speed: {titan-rtx: {alpha_ms: 4, beta_ms: 4}}}
`

// Files writes a topology and a catalog into a temporary directory and returns their paths.
func Files(t testing.TB, topology, catalog string) (topoPath, catPath string) {
	t.Helper()
	dir := t.TempDir()
	topoPath, catPath = filepath.Join(dir, "topology.yaml"), filepath.Join(dir, "catalog.yaml")
	if err := os.WriteFile(topoPath, []byte(topology), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(catPath, []byte(catalog), 0o600); err != nil {
		t.Fatal(err)
	}
	return topoPath, catPath
}

// Config returns a loopback node config (127.0.0.1, port 0, local timings,
// data dir in t.TempDir(), logs to t.Log at warn level).
func Config(t testing.TB, name, vertex string, seeds ...string) node.Config {
	t.Helper()
	c := node.DefaultLocalConfig()
	c.Name, c.Vertex, c.Join = name, vertex, seeds
	c.DataDir = filepath.Join(t.TempDir(), name)
	c.LogLevel = "warn"
	// Shared 2-core machines and -race slow everything ~10x: relax Raft's
	// 100 ms loopback timeouts (failover then takes ~1-3 s) so leaders do not flap under load.
	c.RaftTimeout = time.Second
	c.GossipProbe = 500 * time.Millisecond
	return c
}

// Start creates and starts a node; it is stopped at the end of the test.
func Start(t testing.TB, cfg node.Config) *node.Node {
	t.Helper()
	n, err := node.New(cfg)
	if err != nil {
		t.Fatalf("node %s: %v", cfg.Name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Start(ctx); err != nil {
		t.Fatalf("start node %s: %v", cfg.Name, err)
	}
	t.Cleanup(n.Stop)
	return n
}

// WaitFor polls cond every 20 ms until it holds or timeout passes (then the test fails).
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < timeout {
		if cond() {
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out after %v waiting for %s", timeout, what)
	return 0
}

// leakMarkers identify goroutines owned by the node and its libraries.
var leakMarkers = []string{
	"github.com/idn-net/idn/",
	"hashicorp/memberlist",
	"hashicorp/raft",
	"protoactor-go/remote",
	"net/http.(*Server).Serve",
}

// knownLeaks are stacks CheckNoLeaks tolerates: raft's NetworkTransport
// may leave handleConn readers of pooled peer connections blocked briefly
// after Shutdown.
var knownLeaks = []string{"raft.(*NetworkTransport).handleConn"}

// CheckNoLeaks fails the test if node goroutines are still alive 5 s after
// the call (register it with t.Cleanup before starting nodes so it runs last).
func CheckNoLeaks(t testing.TB) {
	t.Helper()
	leakcheck.Wait(t, leakMarkers, knownLeaks)
}

// isolateEnv names the test a child test binary must run (see Isolate).
const isolateEnv = "IDN_NODETEST_ISOLATED"

// Isolate runs the calling top-level test alone in a child process of the
// test binary and reports its result; it returns true in the parent, which
// must then return. In the child it returns false and the test runs.
//
// Why: protoactor's Remote.Start overwrites grpc's global logger, which
// goroutines of earlier nodes' gRPC transports read on exit without any
// synchronisation the race detector can see; within one test the node
// starts are ordered (see node.startRemote), across tests they are not. One
// test per process keeps -race runs meaningful.
func Isolate(t *testing.T) bool {
	t.Helper()
	if os.Getenv(isolateEnv) == t.Name() {
		return false
	}
	args := []string{"-test.run", "^" + regexp.QuoteMeta(t.Name()) + "$", "-test.count=1", "-test.v"}
	if f := flag.Lookup("test.timeout"); f != nil {
		args = append(args, "-test.timeout="+f.Value.String())
	}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), isolateEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil || testing.Verbose() {
		t.Logf("isolated run of %s:\n%s", t.Name(), filterLogs(out))
	}
	if err != nil {
		t.Fatalf("isolated run of %s failed: %v", t.Name(), err)
	}
	return true
}

// filterLogs drops the nodes' log lines from a child's output, keeping test lines and race reports.
func filterLogs(out []byte) string {
	var b strings.Builder
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "time=") && !strings.Contains(l, "level=ERROR") {
			continue
		}
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}
