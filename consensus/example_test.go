package consensus_test

import (
	"context"
	"time"

	"github.com/idn-net/idn/consensus"
	"github.com/idn-net/idn/gossip"
	"github.com/idn-net/idn/messages"
)

// Example shows how a node wires gossip and its vertex's Raft group: the
// group's Raft address travels in the gossip metadata, and the gossip-visible
// members of the vertex are fed to UpdatePeers on every membership event (and
// periodically).
func Example() {
	ccfg := consensus.DefaultLocalConfig()
	ccfg.NodeID, ccfg.Vertex, ccfg.DataDir, ccfg.BootstrapExpect = "edge-1", "v1", "/tmp/idn-example/raft", 1
	group, err := consensus.New(ccfg, func(isLeader bool) { /* start/stop control actors, asynchronously */ })
	if err != nil {
		return
	}
	defer group.Shutdown()

	events := make(chan gossip.Event, 1024)
	gcfg := gossip.DefaultLocalConfig()
	gcfg.NodeName = "edge-1"
	gcfg.Meta = gossip.Meta{Vertex: "v1", Tier: 1, RaftAddr: group.Addr(), BootstrapExpect: 1}
	g, err := gossip.New(gcfg, func(ev gossip.Event) {
		select { // never block memberlist's side
		case events <- ev:
		default:
		}
	})
	if err != nil {
		return
	}
	defer g.Shutdown()
	defer g.Leave(time.Second)
	_ = g.Join(context.Background())

	syncPeers := func() {
		var peers []consensus.Peer
		for _, m := range g.Members() {
			if m.Meta.Vertex == "v1" {
				peers = append(peers, consensus.Peer{ID: m.Name, RaftAddr: m.Meta.RaftAddr, BootstrapExpect: m.Meta.BootstrapExpect})
			}
		}
		group.UpdatePeers(peers)
	}
	syncPeers()
	for !group.IsLeader() {
		time.Sleep(10 * time.Millisecond)
		syncPeers()
	}
	_ = group.Apply(&messages.FSMCommand{Cmd: &messages.FSMCommand_SetHosted{
		SetHosted: &messages.FSMSetHosted{Models: []string{"yolov4-416"}}}}, time.Second)
	_ = group.State().GetHostedModels() // [yolov4-416]
}
