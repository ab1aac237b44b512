package scenarios

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer is a goroutine-safe progress sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// fakeOptions runs the test binary as the node, with mode (see fakeNode).
func fakeOptions(t *testing.T, mode string) (Options, *syncBuffer) {
	t.Helper()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	progress := &syncBuffer{}
	return Options{Bin: bin, Env: []string{fakeNodeEnv + "=1", fakeModeEnv + "=" + mode}, Progress: progress, WorkDir: t.TempDir()}, progress
}

// assertNoProcesses checks every fake node process the run started is gone.
func assertNoProcesses(t *testing.T, workDir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(workDir, ".fake", "pids"))
	if err != nil {
		t.Fatalf("no pid list: %v", err)
	}
	for _, f := range strings.Fields(string(b)) {
		pid, _ := strconv.Atoi(f)
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("node process %d still exists after Run (kill 0: %v)", pid, err)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

const fakeScenario = `
name: fake
nodes:
  vertices:
    dc-0: {count: 3}
workload:
  rate: 40
  duration: 4s
  tasks: {task-00: 2, task-01: 1, task-03: 1}
  slo_ms: 500
faults:
  - {id: k, at: 1s, action: kill_leader, vertex: dc-0}
  - {at: 2500ms, action: restart, fault: k}
  - {id: b, at: 1500ms, action: kill, node: co-0-n1}
assertions:
  - lost == 0
  - result_ratio >= 0.7
  - failovers == 1
  - failover_max_s <= 5
  - served_vertices >= 2
  - errors.unreachable > 0
  - converged_at_end == 1
timeouts: {startup: 30s, failover: 10s, settle: 100ms, stop: 3s}
`

func TestRunAgainstFakeNodes(t *testing.T) {
	sc, err := Parse([]byte(fakeScenario), "")
	if err != nil {
		t.Fatal(err)
	}
	opt, progress := fakeOptions(t, "")
	rep, err := Run(context.Background(), sc, opt)
	t.Logf("progress:\n%s", progress.String())
	if err != nil {
		t.Fatal(err)
	}
	assertNoProcesses(t, opt.WorkDir)
	if rep.Sent < 100 || rep.Accepted != rep.Results+rep.Errors+rep.Lost || rep.Lost != 0 {
		t.Errorf("sent %d accepted %d results %d errors %d lost %d", rep.Sent, rep.Accepted, rep.Results, rep.Errors, rep.Lost)
	}
	if rep.ServedBy["cloud"] == 0 || rep.ServedBy["bs-0"]+rep.ServedBy["bs-1"] == 0 {
		t.Errorf("served by %v", rep.ServedBy)
	}
	if len(rep.Failovers) != 1 || rep.Failovers[0].Killed != "dc-0-n1" || rep.Failovers[0].NewLeader != "dc-0-n2" ||
		rep.Failovers[0].ElectedAfterS == nil || *rep.Failovers[0].ElectedAfterS > 3 {
		t.Errorf("failovers %+v", rep.Failovers)
	}
	if len(rep.Faults) != 3 || rep.Faults[2].Action != ActionRestart || rep.Faults[2].Node != "dc-0-n1" || rep.Faults[1].Node != "co-0-n1" {
		t.Errorf("faults %+v", rep.Faults)
	}
	for _, f := range rep.Faults {
		if f.Error != "" || f.AppliedAtS < f.AtS {
			t.Errorf("fault %+v", f)
		}
	}
	byName := map[string]NodeReport{}
	for _, n := range rep.Nodes {
		byName[n.Name] = n
	}
	if n := byName["dc-0-n1"]; n.Starts != 2 || n.Killed != 1 || !n.AliveAtEnd || !n.IsLeaderAtEnd {
		t.Errorf("restarted node %+v", n) // the fake re-elects the lowest name
	}
	if n := byName["co-0-n1"]; n.AliveAtEnd || n.Killed != 1 {
		t.Errorf("killed node %+v", n)
	}
	if n := byName["bs-0-n1"]; n.Metrics["idn_requests_total"] == 0 || n.Members != 6 {
		t.Errorf("entry node %+v", n)
	}
	var seq []string
	for _, ch := range rep.Leaders["dc-0"] {
		if ch.Leader != "" {
			seq = append(seq, ch.Leader)
		}
	}
	if strings.Join(seq, " ") != "dc-0-n1 dc-0-n2 dc-0-n1" {
		t.Errorf("dc-0 leaders %v, want dc-0-n1, dc-0-n2, then the restarted dc-0-n1 (fake elects the lowest name)", rep.Leaders["dc-0"])
	}
	if v, _ := rep.Metric("leader_changes"); v != 2 {
		t.Errorf("leader_changes = %v, want 2", v)
	}
	// The fake counts a request and a reply per infer call, except the
	// restarted and killed nodes; entries are bs-0-n1 and bs-1-n1.
	if rep.ServerRequests != rep.Accepted || rep.ServerUnreplied != 0 {
		t.Errorf("server requests %d replies %d unreplied %d, client accepted %d", rep.ServerRequests, rep.ServerReplies, rep.ServerUnreplied, rep.Accepted)
	}
	if !rep.Passed {
		t.Errorf("assertions: %+v", rep.Assertions)
	}
	for _, want := range []string{"cluster converged", "SIGKILL dc-0-n1 (leader of dc-0)", "new leader of dc-0", "restarted dc-0-n1"} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress lacks %q", want)
		}
	}
}

func TestRunLostWhenNodesNeverReply(t *testing.T) {
	sc, err := Parse([]byte(`
name: hang
workload: {rate: 20, duration: 1s, tasks: {task-00: 1}, timeout: 300ms}
assertions: [lost == 0]
timeouts: {startup: 30s, settle: 0}
`), "")
	if err != nil {
		t.Fatal(err)
	}
	opt, _ := fakeOptions(t, "hang")
	rep, err := Run(context.Background(), sc, opt)
	if !errors.Is(err, ErrAssertionFailed) || !strings.Contains(err.Error(), "lost == 0") {
		t.Fatalf("err = %v", err)
	}
	assertNoProcesses(t, opt.WorkDir)
	if rep.Accepted == 0 || rep.Lost != rep.Accepted || rep.LostByCause["timeout"] != rep.Lost || rep.Results != 0 {
		t.Errorf("accepted %d lost %d (%v) results %d", rep.Accepted, rep.Lost, rep.LostByCause, rep.Results)
	}
}

func TestRunStartupFailures(t *testing.T) {
	sc, err := Parse([]byte(`
name: startup
workload: {rate: 1, duration: 1s, tasks: {task-00: 1}}
timeouts: {startup: 2s}
`), "")
	if err != nil {
		t.Fatal(err)
	}
	for mode, want := range map[string]string{
		"noready": "no ready line on stdout within 2s",
		"exit":    "node exited before it was ready",
	} {
		t.Run(mode, func(t *testing.T) {
			opt, _ := fakeOptions(t, mode)
			rep, err := Run(context.Background(), sc, opt)
			if err == nil || rep != nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "cloud-n1") {
				t.Fatalf("err = %v, want %q", err, want)
			}
			if mode == "noready" {
				assertNoProcesses(t, opt.WorkDir)
			}
		})
	}
	opt, _ := fakeOptions(t, "")
	opt.Bin = filepath.Join(t.TempDir(), "no-such-idn")
	if _, err := Run(context.Background(), sc, opt); err == nil || !strings.Contains(err.Error(), "no-such-idn") {
		t.Errorf("missing binary: %v", err)
	}
}

func TestRunCancelStopsNodes(t *testing.T) {
	sc, err := Parse([]byte(`
name: cancel
workload: {rate: 20, duration: 60s, tasks: {task-00: 1}}
timeouts: {startup: 30s, settle: 0}
`), "")
	if err != nil {
		t.Fatal(err)
	}
	opt, progress := fakeOptions(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for !strings.Contains(progress.String(), "load:") {
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(500 * time.Millisecond)
		cancel()
	}()
	began := time.Now()
	rep, err := Run(ctx, sc, opt)
	if !errors.Is(err, context.Canceled) || rep == nil || rep.Passed || rep.Sent == 0 || !strings.Contains(err.Error(), "partial report") {
		t.Fatalf("rep %+v err %v", rep, err)
	}
	if d := time.Since(began); d > 30*time.Second {
		t.Errorf("Run took %s after cancel", d)
	}
	assertNoProcesses(t, opt.WorkDir)
}

func TestRunPartition(t *testing.T) {
	sc, err := Parse([]byte(`
name: partition
nodes:
  vertices:
    dc-0: {count: 3}
workload: {rate: 20, duration: 4s, tasks: {task-00: 1}}
faults: [{at: 500ms, action: partition, vertex: dc-0, duration: 2s}]
assertions:
  - failovers == 1
  - converged_at_end == 1
  - lost == 0
timeouts: {startup: 30s, failover: 10s, settle: 100ms}
`), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range sc.NodeSpecs() {
		if !strings.Contains(strings.Join(n.Args, " "), "--fault-api") {
			t.Fatalf("%s lacks --fault-api: %v", n.Name, n.Args)
		}
	}
	opt, progress := fakeOptions(t, "")
	rep, err := Run(context.Background(), sc, opt)
	t.Logf("progress:\n%s", progress.String())
	if err != nil {
		t.Fatal(err)
	}
	assertNoProcesses(t, opt.WorkDir)
	if len(rep.Failovers) != 1 || rep.Failovers[0].Fault != "partition" || rep.Failovers[0].NewLeader != "dc-0-n2" {
		t.Errorf("failovers %+v", rep.Failovers)
	}
	// The cut-off leader keeps leading alone until the heal: a split.
	split := false
	for _, ch := range rep.Leaders["dc-0"] {
		split = split || ch.Leader == "dc-0-n1,dc-0-n2"
	}
	if !split {
		t.Errorf("dc-0 leaders %v: want the split dc-0-n1,dc-0-n2 during the partition", rep.Leaders["dc-0"])
	}
	if !strings.Contains(progress.String(), "healed the partition of dc-0-n1 after 2s") {
		t.Error("no heal in progress")
	}
}

func TestRunPartitionNeedsFaultAPI(t *testing.T) {
	sc, err := Parse([]byte(`
name: partition
workload: {rate: 1, duration: 3s, tasks: {task-00: 1}}
faults: [{at: 100ms, action: partition, node: co-0-n1, duration: 1s}]
timeouts: {settle: 0}
`), "")
	if err != nil {
		t.Fatal(err)
	}
	for i := range sc.nodeList { // as if the nodes ran without --fault-api
		sc.nodeList[i].Args = nil
	}
	opt, _ := fakeOptions(t, "")
	_, err = Run(context.Background(), sc, opt)
	if !errors.Is(err, ErrAssertionFailed) || !strings.Contains(err.Error(), "needs --fault-api") {
		t.Fatalf("err = %v", err)
	}
}

func TestRunRefusesUsedWorkDir(t *testing.T) {
	sc, err := Parse([]byte("name: x\nworkload: {rate: 1, duration: 1s, tasks: {task-00: 1}}\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	opt, _ := fakeOptions(t, "")
	if err := os.MkdirAll(filepath.Join(opt.WorkDir, "bs-0-n1", "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), sc, opt); err == nil || !strings.Contains(err.Error(), "already holds a node dir bs-0-n1") {
		t.Fatalf("err = %v", err)
	}
}

func TestRunStopAndPause(t *testing.T) {
	sc, err := Parse([]byte(`
name: stop-pause
nodes:
  vertices:
    dc-0: {count: 3}
workload: {rate: 40, duration: 4s, tasks: {task-00: 1, task-01: 1}}
faults:
  - {at: 500ms, action: pause, vertex: dc-0, duration: 1500ms}
  - {id: s, at: 1s, action: stop, node: bs-1-n1}
  - {at: 2500ms, action: restart, fault: s}
assertions:
  - failovers == 1
  - failover_max_s <= 3
  - converged_at_end == 1
timeouts: {startup: 30s, failover: 10s, settle: 100ms, stop: 3s}
`), "")
	if err != nil {
		t.Fatal(err)
	}
	opt, progress := fakeOptions(t, "")
	rep, err := Run(context.Background(), sc, opt)
	t.Logf("progress:\n%s", progress.String())
	if err != nil {
		t.Fatal(err)
	}
	assertNoProcesses(t, opt.WorkDir)
	for _, want := range []string{"SIGSTOP dc-0-n1 (leader of dc-0)", "SIGCONT dc-0-n1 after 1.5s", "SIGTERM bs-1-n1", "restarted bs-1-n1"} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress lacks %q", want)
		}
	}
	if len(rep.Failovers) != 1 || rep.Failovers[0].Killed != "dc-0-n1" || rep.Failovers[0].NewLeader != "dc-0-n2" {
		t.Errorf("failovers %+v", rep.Failovers)
	}
	for cause := range rep.LostByCause {
		if cause != "entry_stopped" {
			t.Errorf("lost by cause %v: only requests cut by the stop of their entry node may be lost", rep.LostByCause)
		}
	}
	byName := map[string]NodeReport{}
	for _, n := range rep.Nodes {
		byName[n.Name] = n
	}
	if n := byName["bs-1-n1"]; n.Starts != 2 || !n.AliveAtEnd {
		t.Errorf("stopped+restarted node %+v", n)
	}
	if n := byName["dc-0-n1"]; n.Starts != 1 || !n.AliveAtEnd || !n.IsLeaderAtEnd {
		t.Errorf("paused node %+v", n)
	}
}
