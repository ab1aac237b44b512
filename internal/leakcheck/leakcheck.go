// Package leakcheck is a test helper that fails a test when goroutines owned
// by the code under test outlive it. Every package that starts goroutines
// (gossip, consensus, the node) checks with it that Shutdown/Stop waited for
// all of them.
package leakcheck

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// Grace is how long Check waits for goroutines to exit after the test's
// other cleanups before it reports them: shutdown paths close sockets and
// timers asynchronously, so a short settling time avoids false reports.
const Grace = 5 * time.Second

// Goroutines returns the stacks of live goroutines whose stack mentions any
// of markers, excluding the calling goroutine, test-runner frames and stacks
// that mention any of ignore.
func Goroutines(markers, ignore []string) []string {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for i, g := range strings.Split(string(buf), "\n\n") {
		// i == 0 is the calling goroutine (runtime.Stack lists it first).
		if i == 0 || strings.Contains(g, "testing.tRunner") || strings.Contains(g, "testing.(*B)") ||
			strings.Contains(g, "testing.(*F)") {
			continue
		}
		if containsAny(g, ignore) {
			continue
		}
		if containsAny(g, markers) {
			out = append(out, g)
		}
	}
	return out
}

// Wait polls until no goroutine matching markers (and none of ignore) is
// left, for at most Grace; it fails t with the stacks still alive then.
func Wait(t testing.TB, markers, ignore []string) {
	t.Helper()
	deadline := time.Now().Add(Grace)
	var left []string
	for {
		if left = Goroutines(markers, ignore); len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("%d leaked goroutines:\n%s", len(left), strings.Join(left, "\n\n"))
}

// Check registers Wait as a cleanup of t. Call it before starting anything
// that registers its own cleanups, so that it runs after them (cleanups run
// last-in, first-out).
func Check(t testing.TB, markers ...string) {
	t.Helper()
	t.Cleanup(func() { Wait(t, markers, nil) })
}

func containsAny(s string, subs []string) bool {
	for _, m := range subs {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}
