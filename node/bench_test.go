package node_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/idn-net/idn/node"
	"github.com/idn-net/idn/node/nodetest"
)

// benchPair starts two nodes on loopback with zero-latency executors and
// zero RTTs: "a" at vertex mid (hosts det/mid#0) and "b" at the repository.
// Requests for det with min_accuracy 0.8 enter at a, are forwarded by a's
// scheduler to b, served by b's executor, and the reply goes straight back to a.
func benchPair(b *testing.B) (*node.Node, *node.Node) {
	topo, cat := nodetest.Files(b, nodetest.ZeroRTTLineTopologyYAML, nodetest.SmallCatalogYAML)
	mk := func(name, vertex string, hosted []string, seeds ...string) node.Config {
		c := nodetest.Config(b, name, vertex, seeds...)
		c.Topology, c.Catalog, c.Hosted = topo, cat, hosted
		c.LatencyScale = 0
		c.Logger = slog.New(slog.DiscardHandler)
		c.MaxBatch = 32
		c.MaxQueue = 100000
		c.GPUs = 2
		return c
	}
	bn := nodetest.Start(b, mk("b", "repo", nil))
	an := nodetest.Start(b, mk("a", "mid", []string{"det/mid#0"}, bn.Addrs().Gossip))
	nodetest.WaitFor(b, 20*time.Second, "both ready", func() bool {
		return an.Ready() && bn.Ready() && len(an.AliveMembers()) == 2
	})
	// Warm up the remote connections.
	for i := 0; i < 100; i++ {
		if rep, _ := an.Infer(context.Background(), node.InferInput{Task: "det", MinAccuracy: 0.8, SLO: 5 * time.Second}); !rep.Ok || rep.ServedByVertex != "repo" {
			b.Fatalf("warm-up: %+v", rep)
		}
	}
	return an, bn
}

// BenchmarkForwardServeReply measures one request at a time: entry router ->
// scheduler -> forward (remote) -> repository scheduler -> executor -> reply (remote).
func BenchmarkForwardServeReply(b *testing.B) {
	an, _ := benchPair(b)
	in := node.InferInput{Task: "det", MinAccuracy: 0.8, SLO: 5 * time.Second}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if rep, _ := an.Infer(context.Background(), in); !rep.Ok {
			b.Fatalf("reply: %+v", rep)
		}
	}
}

// BenchmarkForwardServeReplyParallel measures throughput through one entry
// node with many concurrent requests (req/s reported).
func BenchmarkForwardServeReplyParallel(b *testing.B) {
	an, _ := benchPair(b)
	in := node.InferInput{Task: "det", MinAccuracy: 0.8, SLO: 10 * time.Second}
	b.ReportAllocs()
	b.SetParallelism(64)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if rep, _ := an.Infer(context.Background(), in); !rep.Ok {
				b.Errorf("reply: %v %s", rep.ErrorKind, rep.Error)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
}
