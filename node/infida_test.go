package node_test

import (
	"bufio"
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idn-net/idn/node"
	"github.com/idn-net/idn/node/nodetest"
)

// TestInfidaTopologyII runs live INFIDA (paper 000) on Topology II with
// one node per vertex on loopback: every vertex leader runs its allocator,
// control messages flow along the request types' paths each slot, y^v and
// the slot counter are committed to each vertex's Raft group, x^v is
// sampled and the executors follow it, requests entering at the base
// stations are served, and the base stations end up hosting models.
func TestInfidaTopologyII(t *testing.T) {
	if nodetest.Isolate(t) {
		return
	}
	if testing.Short() {
		t.Skip("multi-node test")
	}
	t.Cleanup(func() { nodetest.CheckNoLeaks(t) })
	mk := func(name, vertex string, seeds ...string) node.Config {
		c := nodetest.Config(t, name, vertex, seeds...)
		c.Allocation = node.AllocationInfida
		c.Slot = 500 * time.Millisecond
		c.Eta = 0.05
		c.EmulateRTT = false
		return c
	}
	cloud := nodetest.Start(t, mk("cloud", "cloud"))
	seed := cloud.Addrs().Gossip
	all := []*node.Node{cloud}
	for _, v := range []string{"dc-0", "co-0", "bs-0", "bs-1"} {
		all = append(all, nodetest.Start(t, mk(v, v, seed)))
	}
	bs0 := all[3]
	nodetest.WaitFor(t, 30*time.Second, "5 members and a leader everywhere", func() bool {
		for _, n := range all {
			if len(n.AliveMembers()) != 5 || !n.Ready() {
				return false
			}
		}
		return true
	})
	// Load: the tasks whose types enter at bs-0, a few requests per slot.
	var tasks []string
	for _, task := range []string{"task-00", "task-01", "task-02", "task-03", "task-04", "task-05"} {
		tasks = append(tasks, task)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, fail := 0, 0
	servedBy := map[string]int{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			rep, _ := bs0.Infer(ctx, node.InferInput{Task: tasks[i%len(tasks)], SLO: 3 * time.Second})
			mu.Lock()
			if rep.Ok {
				ok++
				servedBy[rep.ServedByVertex]++
			} else if ctx.Err() == nil {
				fail++
				t.Logf("error reply: %v %s", rep.ErrorKind, rep.Error)
			}
			mu.Unlock()
			time.Sleep(10 * time.Millisecond)
		}
	}()
	defer func() {
		cancel()
		wg.Wait()
	}()
	nodetest.WaitFor(t, 60*time.Second, "every allocator steps 6 slots and bs-0 hosts models", func() bool {
		for _, n := range all {
			a := n.Status().Allocation
			if a == nil || !a.Running || a.SlotsStepped < 6 || a.CommittedSlot == 0 {
				return false
			}
		}
		a := bs0.Status().Allocation
		return len(a.Hosted) > 0 && len(a.Y) > 0
	})
	cancel()
	wg.Wait()
	for _, n := range all {
		a := n.Status().Allocation
		t.Logf("%s: committed slot %d, stepped %d, hosted %d models, y over %d models", n.Config().Name, a.CommittedSlot, a.SlotsStepped, len(a.Hosted), len(a.Y))
		if a.Mode != node.AllocationInfida {
			t.Fatalf("%s: mode %q", n.Config().Name, a.Mode)
		}
		for i, y := range a.Y {
			if !(y > 0 && y <= 1) {
				t.Fatalf("%s: y[%d] = %v outside (0,1]", n.Config().Name, i, y)
			}
		}
	}
	var slots, timeouts float64
	for _, n := range all {
		m := scrape(t, n)
		t.Logf("%s: control msgs %v batches %v raw %vB wire %vB, costs %v, slots %v, timeouts %v, stale %v, malformed %v", n.Config().Name,
			m["idn_control_messages_total"], m["idn_control_batches_total"], m["idn_control_raw_bytes_total"], m["idn_control_wire_bytes_total"],
			m["idn_serving_cost_messages_total"], m["idn_infida_slots_total"], m["idn_control_timeouts_total"], m["idn_control_stale_total"], m["idn_control_malformed_total"])
		slots += m["idn_infida_slots_total"]
		timeouts += m["idn_control_timeouts_total"]
		if m["idn_control_malformed_total"] > 0 || m["idn_serving_cost_malformed_total"] > 0 {
			t.Fatalf("%s: malformed control traffic", n.Config().Name)
		}
	}
	// The first slot after an allocator starts may wait for vertices that
	// have not started theirs; afterwards every slot completes.
	if timeouts > slots/3 {
		t.Fatalf("%v of %v slots timed out", timeouts, slots)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("requests ok %d failed %d, served by %v", ok, fail, servedBy)
	if ok == 0 || fail > ok/20 {
		t.Fatalf("ok %d failed %d", ok, fail)
	}
	if !slices.ContainsFunc([]string{"bs-0", "co-0", "dc-0"}, func(v string) bool { return servedBy[v] > 0 }) {
		t.Fatalf("nothing served below the cloud: %v", servedBy)
	}
}

// scrape reads the unlabelled counters of a node's /metrics.
func scrape(t *testing.T, n *node.Node) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + n.Addrs().API + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && !strings.HasPrefix(f[0], "#") {
			if v, err := strconv.ParseFloat(f[1], 64); err == nil {
				out[f[0]] = v
			}
		}
	}
	return out
}
