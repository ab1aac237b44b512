package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idn-net/idn/node"
)

func TestNodeCommandReadyLineAndGracefulStop(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var stderr strings.Builder
	done := make(chan error, 1)
	go func() {
		done <- runNode(ctx, []string{"--local", "--name", "t1", "--vertex", "cloud", "--data-dir", t.TempDir(),
			"--log-level", "error", "--gpus", "1", "--gpu-mem-mb", "4000"}, pw, &lockedWriter{w: &stderr})
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no ready line: %v", err)
	}
	go io.Copy(io.Discard, pr)
	var ready readyLine
	if err := json.Unmarshal([]byte(line), &ready); err != nil || ready.Event != "ready" || ready.Name != "t1" || ready.Vertex != "cloud" ||
		!strings.HasPrefix(ready.API, "127.0.0.1:") || ready.Gossip == "" || ready.Remote == "" || ready.Raft == "" || ready.PID == 0 {
		t.Fatalf("ready line %q: %v", line, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := http.Get("http://" + ready.API + "/v2/health/ready")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("node never became ready")
		}
		time.Sleep(50 * time.Millisecond)
	}
	body := `{"inputs":[{"name":"img","shape":[1],"datatype":"BYTES","data":["x"]}]}`
	res, err := http.Post("http://"+ready.API+"/v2/models/task-00/infer", "application/json", strings.NewReader(body))
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("infer: %v %v", err, res)
	}
	res.Body.Close()
	cancel() // what SIGINT/SIGTERM do
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("runNode: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("node did not stop")
	}
}

func TestNodeCommandBadFlags(t *testing.T) {
	var out, errOut strings.Builder
	err := runNode(context.Background(), []string{"--vertex", ""}, &out, &errOut)
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "vertex") {
		t.Fatalf("want usage error naming vertex, got %v", err)
	}
	err = runNode(context.Background(), []string{"--local", "--name", "x", "--vertex", "cloud", "--gpus", "-3"}, &out, &errOut)
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "gpus") {
		t.Fatalf("want usage error naming gpus, got %v", err)
	}
	for flag, args := range map[string][]string{
		"allocation": {"--allocation", "greedy"},
		"slot":       {"--slot", "0s"},
		"refresh":    {"--refresh", "0"},
	} {
		err = runNode(context.Background(), append([]string{"--local", "--name", "x", "--vertex", "cloud"}, args...), &out, &errOut)
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), flag+":") {
			t.Fatalf("want usage error naming %s, got %v", flag, err)
		}
	}
	if out.Len() != 0 {
		t.Fatalf("stdout must stay empty on errors: %q", out.String())
	}
}

func TestNodeConfigAllocationFlags(t *testing.T) {
	var errOut strings.Builder
	cfg, err := nodeConfigFromArgs([]string{"--local", "--name", "x", "--vertex", "cloud"}, &errOut)
	if err != nil || cfg.Allocation != node.AllocationStatic || cfg.Slot != node.DefaultSlot || cfg.Refresh != node.DefaultRefresh {
		t.Fatalf("defaults: %+v %v", cfg, err)
	}
	cfg, err = nodeConfigFromArgs([]string{"--local", "--name", "x", "--vertex", "cloud", "--allocation", "infida", "--slot", "2s", "--refresh", "4"}, &errOut)
	if err != nil || cfg.Allocation != node.AllocationInfida || cfg.Slot != 2*time.Second || cfg.Refresh != 4 {
		t.Fatalf("flags: allocation %q slot %v refresh %d: %v", cfg.Allocation, cfg.Slot, cfg.Refresh, err)
	}
}

// lockedWriter serialises writes from the node's goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
