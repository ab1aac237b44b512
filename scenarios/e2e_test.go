package scenarios

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// e2eScenario is a short quickstart: Topology II, 3 nodes at dc-0, the dc-0
// leader killed at 5 s and restarted at 10 s.
const e2eScenario = `
name: e2e
nodes:
  vertices:
    dc-0: {count: 3, hosted: [task-01/yolov4-512p#0, task-02/yolov4-416p#0]}
    co-0: {hosted: [task-00/yolov4-416p#0]}
    bs-0: {hosted: [task-00/yolov4-tiny-288p#0]}
    bs-1: {hosted: [task-00/yolov4-tiny-288p#0]}
workload:
  rate: 10
  duration: 15s
  tasks: {task-00: 2, task-01: 2, task-02: 1, task-03: 1}
  slo_ms: 2000
faults:
  - {id: k, at: 5s, action: kill_leader, vertex: dc-0}
  - {at: 10s, action: restart, fault: k}
assertions:
  - lost == 0
  - result_ratio >= 0.8
  - failovers == 1
  - failover_max_s <= 5
  - served_vertices >= 2
timeouts: {startup: 120s, failover: 20s}
`

// TestChaosWithRealNodes builds the real idn binary and runs a short chaos
// scenario against real idn node processes on loopback.
func TestChaosWithRealNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs 7 real idn node processes; skipped with -short")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH to build cmd/idn")
	}
	bin := filepath.Join(t.TempDir(), "idn")
	build := exec.Command(goTool, "build", "-o", bin, "github.com/idn-net/idn/cmd/idn")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build cmd/idn: %v\n%s", err, out)
	}
	sc, err := Parse([]byte(e2eScenario), "")
	if err != nil {
		t.Fatal(err)
	}
	progress := &syncBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := Run(ctx, sc, Options{Bin: bin, Progress: progress, WorkDir: t.TempDir()})
	t.Logf("progress:\n%s", progress.String())
	if rep != nil {
		var b strings.Builder
		_ = rep.WriteText(&b)
		t.Logf("report:\n%s", b.String())
		for _, n := range rep.Nodes {
			if n.PID > 0 {
				if kerr := syscall.Kill(n.PID, 0); !errors.Is(kerr, syscall.ESRCH) {
					t.Errorf("node %s pid %d still exists after Run", n.Name, n.PID)
				}
			}
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if rep.Accepted == 0 || rep.Accepted != rep.Results+rep.Errors+rep.Lost {
		t.Errorf("accounting: accepted %d results %d errors %d lost %d", rep.Accepted, rep.Results, rep.Errors, rep.Lost)
	}
}
