package consensus

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idn-net/idn/gossip"
)

// cnode is a node of the integration tests: real gossip driving a real group,
// wired the way the node package wires them.
type cnode struct {
	*tnode
	gs       *gossip.Gossip
	kill     func()
	killOnce func() // crash: no Leave
}

func (c *cnode) syncPeers() {
	var ps []Peer
	for _, m := range c.gs.Members() {
		if m.Meta.Vertex == "v1" {
			ps = append(ps, Peer{ID: m.Name, RaftAddr: m.Meta.RaftAddr, BootstrapExpect: m.Meta.BootstrapExpect})
		}
	}
	c.tnode.g.UpdatePeers(ps)
}

func startCNode(t *testing.T, id, dir string, seeds []string, expect int) *cnode {
	t.Helper()
	tn := start(t, id, dir, expect, nil)
	c := &cnode{tnode: tn}
	gc := gossip.DefaultLocalConfig()
	gc.NodeName = id
	gc.Seeds = seeds
	gc.Logger = testLogger(t)
	gc.Meta = gossip.Meta{Vertex: "v1", RaftAddr: tn.g.Addr(), BootstrapExpect: expect}
	wake := make(chan struct{}, 1)
	gs, err := gossip.New(gc, func(gossip.Event) {
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	c.gs = gs
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // the node's control loop, in miniature
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-wake:
			case <-time.After(200 * time.Millisecond):
			}
			c.syncPeers()
		}
	}()
	c.kill = func() {
		close(stop)
		<-done
		_ = gs.Shutdown()
		_ = tn.g.shutdown(false)
	}
	var once bool
	t.Cleanup(func() {
		if !once {
			once = true
			c.kill()
		}
	})
	c.killOnce = func() { once = true; c.kill() }
	return c
}

func TestWithGossipBootstrapFailoverRejoin(t *testing.T) {
	checkNoLeaks(t)
	for run := range 3 {
		t.Run(fmt.Sprint(run), func(t *testing.T) {
			began := time.Now()
			seed := startCNode(t, "a", t.TempDir(), nil, 3)
			nodes := []*cnode{seed}
			for _, id := range []string{"b", "c"} {
				nodes = append(nodes, startCNode(t, id, t.TempDir(), []string{seed.gs.Addr()}, 3))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for _, n := range nodes {
				if err := n.gs.Join(ctx); err != nil {
					t.Fatal(err)
				}
			}
			tns := []*tnode{nodes[0].tnode, nodes[1].tnode, nodes[2].tnode}
			l := waitLeader(t, tns...)
			t.Logf("run %d: first leader %s after %v", run, l.id, time.Since(began).Round(time.Millisecond))
			mustApply(t, setHosted("m"), tns...)
			for _, n := range tns {
				waitFor(t, 5*time.Second, "one group of 3 voters", func() bool {
					s, err := n.g.Servers()
					return err == nil && len(s) == 3
				})
			}
			if run > 0 {
				return
			}
			// crash the leader; the others elect a new one with the state
			l = waitLeader(t, tns...)
			var dead *cnode
			var rest []*cnode
			for _, n := range nodes {
				if n.tnode == l {
					dead = n
				} else {
					rest = append(rest, n)
				}
			}
			killed := time.Now()
			dead.killOnce()
			nl := waitLeader(t, rest[0].tnode, rest[1].tnode)
			t.Logf("re-elected %s %v after the leader crashed", nl.id, time.Since(killed).Round(time.Millisecond))
			if len(nl.g.State().GetHostedModels()) != 1 {
				t.Fatal("new leader lost the state")
			}
			mustApply(t, advance(), rest[0].tnode, rest[1].tnode)
			// restart it from its data dir on new ports; it rejoins as a voter
			back := startCNode(t, dead.id, dead.dir, []string{rest[0].gs.Addr()}, 3)
			if err := back.gs.Join(ctx); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 30*time.Second, "restarted node caught up" /* raft replication backoff */, func() bool {
				return back.tnode.g.State().GetSlot() == 1 && len(leaders(rest[0].tnode, rest[1].tnode, back.tnode)) == 1
			})
			waitFor(t, 10*time.Second, "leader knows the new raft address", func() bool {
				s, _ := nl.g.Servers()
				for _, p := range s {
					if p.ID == back.id {
						return p.RaftAddr == back.tnode.g.Addr()
					}
				}
				return false
			})
		})
	}
}
