package consensus

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkApply3 measures one replicated command through a 3-voter group on
// loopback (commit on a quorum + apply on the leader).
func BenchmarkApply3(b *testing.B) {
	var nodes []*tnode
	for i := range 3 {
		cfg := DefaultLocalConfig()
		cfg.NodeID, cfg.Vertex, cfg.DataDir, cfg.BootstrapExpect = fmt.Sprintf("b%d", i), "v", b.TempDir(), 3
		n := &tnode{id: cfg.NodeID, dir: cfg.DataDir}
		g, err := New(cfg, nil)
		if err != nil {
			b.Fatal(err)
		}
		n.g = g
		b.Cleanup(func() { _ = g.Shutdown() })
		nodes = append(nodes, n)
	}
	gossipAll(nodes...)
	var l *tnode
	deadline := time.Now().Add(10 * time.Second)
	for l == nil {
		if ls := leaders(nodes...); len(ls) == 1 {
			l = ls[0]
		} else if time.Now().After(deadline) {
			b.Fatal("no leader")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cmd := advance()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := l.g.Apply(cmd, time.Second); err != nil {
			b.Fatal(err)
		}
	}
}
