package node_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idn-net/idn/node"
	"github.com/idn-net/idn/node/nodetest"
)

// TestFiveNodesKillOne starts 5 nodes on loopback (edge: e1; mid: m1, m2, m3
// as one Raft group of 3; repo: r1), kills the leader of mid without a
// graceful leave, and checks that every other node drops it from membership,
// that mid elects a new leader, and that requests entering at the edge that
// need mid's models are still served there (routed around the dead member).
func TestFiveNodesKillOne(t *testing.T) {
	if nodetest.Isolate(t) {
		return
	}
	if testing.Short() {
		t.Skip("multi-node test")
	}
	t.Cleanup(func() { nodetest.CheckNoLeaks(t) })
	topo, cat := nodetest.Files(t, nodetest.LineTopologyYAML, nodetest.SmallCatalogYAML)
	mk := func(name, vertex string, expect int, hosted []string, seeds ...string) node.Config {
		c := nodetest.Config(t, name, vertex, seeds...)
		c.Topology, c.Catalog, c.BootstrapExpect, c.Hosted = topo, cat, expect, hosted
		return c
	}
	r1 := nodetest.Start(t, mk("r1", "repo", 1, nil))
	seed := r1.Addrs().Gossip
	e1 := nodetest.Start(t, mk("e1", "edge", 1, []string{"det/lo#0", "cls/lo#0"}, seed))
	var mids []*node.Node
	for _, name := range []string{"m1", "m2", "m3"} {
		mids = append(mids, nodetest.Start(t, mk(name, "mid", 3, []string{"det/mid#0", "cls/mid#0"}, seed)))
	}
	all := append([]*node.Node{r1, e1}, mids...)
	names := []string{"e1", "m1", "m2", "m3", "r1"}
	defer func() {
		if t.Failed() {
			for _, n := range all {
				ss, _ := n.SchedulerStats()
				t.Logf("%s: alive %v ready %v leader %v router %+v scheduler %+v", n.Config().Name, n.AliveMembers(), n.Ready(), n.IsLeader(), n.RouterStats(), ss)
			}
		}
	}()
	nodetest.WaitFor(t, 20*time.Second, "5 members and leaders everywhere", func() bool {
		for _, n := range all {
			if !slices.Equal(n.AliveMembers(), names) || !n.Ready() {
				return false
			}
		}
		return true
	})

	infer := func(minAcc float64) (ok int, servedBy map[string]int) {
		servedBy = map[string]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rep, _ := e1.Infer(context.Background(), node.InferInput{Task: "det", MinAccuracy: minAcc, SLO: 5 * time.Second})
				mu.Lock()
				defer mu.Unlock()
				if rep.Ok {
					ok++
					servedBy[rep.ServedByVertex+"/"+rep.ServedByNode]++
				} else {
					t.Logf("error reply: %v %s", rep.ErrorKind, rep.Error)
				}
			}()
		}
		wg.Wait()
		return ok, servedBy
	}
	// Remote connections are set up lazily; on a loaded machine under -race
	// the first forwards can take seconds. Wait until the path works once.
	nodetest.WaitFor(t, 30*time.Second, "a first request served at mid", func() bool {
		rep, _ := e1.Infer(context.Background(), node.InferInput{Task: "det", MinAccuracy: 0.6, SLO: 3 * time.Second})
		return rep.Ok && rep.ServedByVertex == "mid"
	})
	ok, by := infer(0.4)
	if ok != 20 || by["edge/e1"] != 20 {
		t.Fatalf("min_accuracy 0.4: ok=%d served by %v, want all at edge/e1", ok, by)
	}
	ok, by = infer(0.6)
	if ok != 20 {
		t.Fatalf("min_accuracy 0.6: ok=%d served by %v", ok, by)
	}
	for k := range by {
		if k[:4] != "mid/" {
			t.Fatalf("min_accuracy 0.6 served by %v, want mid", by)
		}
	}

	// Kill mid's leader.
	var victim *node.Node
	for _, n := range mids {
		if n.IsLeader() {
			victim = n
		}
	}
	if victim == nil {
		t.Fatal("mid has no leader")
	}
	dead := victim.Config().Name
	victim.Kill()
	killed := time.Now()
	var rest []*node.Node
	for _, n := range all {
		if n != victim {
			rest = append(rest, n)
		}
	}
	d := nodetest.WaitFor(t, 20*time.Second, "members drop the killed node", func() bool {
		for _, n := range rest {
			if slices.Contains(n.AliveMembers(), dead) {
				return false
			}
		}
		return true
	})
	t.Logf("killed %s: dropped from every member list after %v", dead, d)
	nodetest.WaitFor(t, 20*time.Second, "new mid leader", func() bool {
		for _, n := range rest {
			if n.Config().Vertex == "mid" && n.IsLeader() {
				return true
			}
		}
		return false
	})
	t.Logf("new mid leader %v after the kill", time.Since(killed))
	ok, by = infer(0.6)
	if ok != 20 {
		t.Fatalf("after kill: ok=%d served by %v", ok, by)
	}
	for k := range by {
		if k == "mid/"+dead || k[:4] != "mid/" {
			t.Fatalf("after kill served by %v", by)
		}
	}
	t.Logf("after kill served by %v", by)
}

// TestRouteAroundDeadVertex kills the only node of the middle vertex: edge
// requests that need a better model than the edge's are served by the
// repository instead.
func TestRouteAroundDeadVertex(t *testing.T) {
	if nodetest.Isolate(t) {
		return
	}
	if testing.Short() {
		t.Skip("multi-node test")
	}
	t.Cleanup(func() { nodetest.CheckNoLeaks(t) })
	topo, cat := nodetest.Files(t, nodetest.LineTopologyYAML, nodetest.SmallCatalogYAML)
	mk := func(name, vertex string, hosted []string, seeds ...string) node.Config {
		c := nodetest.Config(t, name, vertex, seeds...)
		c.Topology, c.Catalog, c.Hosted = topo, cat, hosted
		return c
	}
	r1 := nodetest.Start(t, mk("r1", "repo", nil))
	e1 := nodetest.Start(t, mk("e1", "edge", []string{"det/lo#0"}, r1.Addrs().Gossip))
	m1 := nodetest.Start(t, mk("m1", "mid", []string{"det/mid#0"}, r1.Addrs().Gossip))
	nodetest.WaitFor(t, 20*time.Second, "3 members", func() bool {
		return len(e1.AliveMembers()) == 3 && e1.Ready() && m1.Ready() && r1.Ready()
	})
	rep, _ := e1.Infer(context.Background(), node.InferInput{Task: "det", MinAccuracy: 0.6, SLO: 5 * time.Second})
	if !rep.Ok || rep.ServedByVertex != "mid" {
		t.Fatalf("before: %+v", rep)
	}
	m1.Kill()
	nodetest.WaitFor(t, 20*time.Second, "m1 dropped", func() bool { return !slices.Contains(e1.AliveMembers(), "m1") })
	rep, lat := e1.Infer(context.Background(), node.InferInput{Task: "det", MinAccuracy: 0.6, SLO: 5 * time.Second})
	if !rep.Ok || rep.ServedByVertex != "repo" || rep.Model != "det/hi#0" {
		t.Fatalf("after: %+v", rep)
	}
	if lat < 6*time.Millisecond {
		t.Fatalf("latency %v below the emulated 6 ms of RTT", lat)
	}
	if rep.RttMs != 6 {
		t.Fatalf("rtt_ms %v, want 6 (2 + 4 around mid)", rep.RttMs)
	}
}

// TestPartitionViaFaultAPI cuts the mid node off (gossip and Raft) with POST
// /v1/fault: the edge node sees it fail and routes around it to the
// repository; healing brings it back.
func TestPartitionViaFaultAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node test")
	}
	if nodetest.Isolate(t) {
		return
	}
	t.Cleanup(func() { nodetest.CheckNoLeaks(t) })
	topo, cat := nodetest.Files(t, nodetest.LineTopologyYAML, nodetest.SmallCatalogYAML)
	mk := func(name, vertex string, hosted []string, seeds ...string) node.Config {
		c := nodetest.Config(t, name, vertex, seeds...)
		c.Topology, c.Catalog, c.Hosted, c.FaultAPI = topo, cat, hosted, true
		return c
	}
	r1 := nodetest.Start(t, mk("r1", "repo", nil))
	e1 := nodetest.Start(t, mk("e1", "edge", []string{"det/lo#0"}, r1.Addrs().Gossip))
	m1 := nodetest.Start(t, mk("m1", "mid", []string{"det/mid#0"}, r1.Addrs().Gossip))
	nodetest.WaitFor(t, 20*time.Second, "3 members", func() bool {
		return len(e1.AliveMembers()) == 3 && len(m1.AliveMembers()) == 3 && e1.Ready() && m1.Ready() && r1.Ready()
	})
	nodetest.WaitFor(t, 20*time.Second, "served at mid", func() bool {
		rep, _ := e1.Infer(context.Background(), node.InferInput{Task: "det", MinAccuracy: 0.6, SLO: 3 * time.Second})
		return rep.Ok && rep.ServedByVertex == "mid"
	})
	post := func(n *node.Node, body string) {
		t.Helper()
		res, err := http.Post("http://"+n.Addrs().API+"/v1/fault", "application/json", strings.NewReader(body))
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("fault api: %v %v", err, res)
		}
		res.Body.Close()
	}
	others := []string{e1.Addrs().Gossip, e1.Addrs().Raft, r1.Addrs().Gossip, r1.Addrs().Raft}
	mine := []string{m1.Addrs().Gossip, m1.Addrs().Raft}
	post(m1, `{"drop":["`+strings.Join(others, `","`)+`"]}`)
	e1.SetDrop(mine)
	r1.SetDrop(mine)
	nodetest.WaitFor(t, 30*time.Second, "m1 seen failed", func() bool { return !slices.Contains(e1.AliveMembers(), "m1") })
	rep, _ := e1.Infer(context.Background(), node.InferInput{Task: "det", MinAccuracy: 0.6, SLO: 5 * time.Second})
	if !rep.Ok || rep.ServedByVertex != "repo" {
		t.Fatalf("during partition: %+v", rep)
	}
	post(m1, `{"drop":[]}`)
	e1.SetDrop(nil)
	r1.SetDrop(nil)
	nodetest.WaitFor(t, 30*time.Second, "m1 back", func() bool { return slices.Contains(e1.AliveMembers(), "m1") })
}
