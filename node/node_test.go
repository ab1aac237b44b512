package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/idn-net/idn/node"
	"github.com/idn-net/idn/node/nodetest"
)

func TestSingleNodeServes(t *testing.T) {
	if nodetest.Isolate(t) {
		return
	}
	t.Cleanup(func() { nodetest.CheckNoLeaks(t) })
	topo, cat := nodetest.Files(t, nodetest.LineTopologyYAML, nodetest.SmallCatalogYAML)
	cfg := nodetest.Config(t, "r1", "repo")
	cfg.Topology, cfg.Catalog = topo, cat
	n := nodetest.Start(t, cfg)
	nodetest.WaitFor(t, 10*time.Second, "ready", n.Ready)
	rep, lat := n.Infer(context.Background(), node.InferInput{Task: "det", MinAccuracy: 0.8, SLO: 2 * time.Second})
	if !rep.Ok {
		t.Fatalf("reply: %+v", rep)
	}
	if rep.ServedByVertex != "repo" || rep.Model != "det/hi#0" {
		t.Fatalf("served by %s with %s", rep.ServedByVertex, rep.Model)
	}
	t.Logf("latency %v reply %+v", lat, rep)
}
