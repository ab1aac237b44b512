package consensus

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Raft's and raft-wal's logs go to the injected slog.Logger; nothing is
// written to stdout or stderr.
func TestLogsGoToInjectedLogger(t *testing.T) {
	checkNoLeaks(t)
	rOut, wOut, _ := os.Pipe()
	rErr, wErr, _ := os.Pipe()
	oldOut, oldErr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = wOut, wErr
	var stray bytes.Buffer
	var copyWG sync.WaitGroup
	copyWG.Add(2)
	go func() { defer copyWG.Done(); _, _ = io.Copy(&stray, rOut) }()
	var strayErr bytes.Buffer
	go func() { defer copyWG.Done(); _, _ = io.Copy(&strayErr, rErr) }()

	buf := &lockedBuf{}
	lg := slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	func() {
		var nodes []*tnode
		for i := range 2 {
			nodes = append(nodes, start(t, "log"+string(rune('a'+i)), t.TempDir(), 2, func(c *Config) { c.Logger = lg }))
		}
		gossipAll(nodes...)
		waitLeader(t, nodes...)
		mustApply(t, advance(), nodes...)
		for _, n := range nodes {
			_ = n.g.Shutdown()
		}
	}()
	time.Sleep(50 * time.Millisecond)
	os.Stdout, os.Stderr = oldOut, oldErr
	_ = wOut.Close()
	_ = wErr.Close()
	copyWG.Wait()
	if stray.Len() > 0 || strayErr.Len() > 0 {
		t.Fatalf("printed outside the logger: stdout %q stderr %q", stray.String(), strayErr.String())
	}
	out := buf.String()
	for _, want := range []string{"component=consensus", "logger=raft", "entering leader state", "bootstrapped raft group"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q", want)
		}
	}
}
