package allocator_test

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/idn-net/idn/actors/allocator"
	"github.com/idn-net/idn/consensus"
	"github.com/idn-net/idn/policy/idn"
	"github.com/idn-net/idn/policy/idn/idntest"
	"github.com/idn-net/idn/policy/infida"
	"github.com/idn-net/idn/policy/sim"
)

// The allocator of a 3-node vertex runs on its Raft leader on a slot timer
// and commits y^v and the slot through Raft; after the leader is killed the
// new leader restores exactly the last committed y^v and keeps committing
// from the committed slot counter.
func TestLeaderFailoverKeepsCommittedY(t *testing.T) {
	in, r, l := idntest.Random(sim.NewRand(21), 2, 1, 4, 5)
	const v = 0 // vertex under test; vertex 1 is the repository
	if len(allocator.ModelNames(in, v)) == 0 {
		t.Fatal("vertex has no free models")
	}
	measure := func(int64) ([]float64, idn.Loads) { return r, l }
	epoch, slotLen := time.Now(), 150*time.Millisecond
	quiet := slog.New(slog.DiscardHandler)
	sys := actor.NewActorSystem(actor.WithDeadLetterRequestLogging(false),
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	defer sys.Shutdown()

	var mu sync.Mutex
	results := map[string]map[int64][]float64{} // node -> slot -> y after the step
	var repoPID *actor.PID
	repo, err := allocator.New(allocator.Config{Instance: in, Vertex: 1, Eta: eta, SlotLength: slotLen, Epoch: epoch,
		Measure: measure, Timeout: slotLen / 2})
	if err != nil {
		t.Fatal(err)
	}
	repoPID = sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return repo }))
	defer func() { _ = sys.Root.StopFuture(repoPID).Wait() }()

	type member struct {
		id  string
		g   *consensus.Group
		pid *actor.PID
	}
	leaderCh := make(chan string, 16)
	var ms []*member
	for i := 0; i < 3; i++ {
		id := fmt.Sprintf("n%d", i)
		cfg := consensus.DefaultLocalConfig()
		cfg.NodeID, cfg.Vertex, cfg.DataDir, cfg.BootstrapExpect = id, "v0", t.TempDir(), 3
		g, err := consensus.New(cfg, func(isLeader bool) {
			if isLeader {
				leaderCh <- id
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, &member{id: id, g: g})
	}
	var peers []consensus.Peer
	for _, m := range ms {
		peers = append(peers, consensus.Peer{ID: m.id, RaftAddr: m.g.Addr(), BootstrapExpect: 3})
	}
	for _, m := range ms {
		m.g.UpdatePeers(peers)
	}
	byID := func(id string) *member {
		for _, m := range ms {
			if m.id == id {
				return m
			}
		}
		return nil
	}
	// start runs the allocator on a new leader from the committed state.
	start := func(m *member) []float64 {
		st := m.g.State()
		y := allocator.RestoreY(in, v, st)
		a, err := allocator.New(allocator.Config{Instance: in, Vertex: v, Eta: eta, SlotLength: slotLen, Epoch: epoch,
			Measure: measure, Timeout: slotLen / 2, Committer: m.g, CommittedSlot: st.GetSlot(), Y: y,
			SampleEvery: 2, Rand: sim.NewRand(uint64(len(m.id))), Residual: infida.ResidualBudget,
			OnSlot: func(res allocator.Result) {
				mu.Lock()
				if results[m.id] == nil {
					results[m.id] = map[int64][]float64{}
				}
				results[m.id][res.Slot] = res.Y
				mu.Unlock()
			}})
		if err != nil {
			t.Fatal(err)
		}
		m.pid = sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return a }))
		sys.Root.Send(m.pid, &allocator.Peers{ByVertex: map[int]*actor.PID{v: m.pid, 1: repoPID}})
		sys.Root.Send(repoPID, &allocator.Peers{ByVertex: map[int]*actor.PID{v: m.pid, 1: repoPID}})
		return y
	}
	waitLeader := func(except string) *member {
		deadline := time.After(10 * time.Second)
		for {
			select {
			case id := <-leaderCh:
				if m := byID(id); id != except && m.g.IsLeader() {
					return m
				}
			case <-deadline:
				t.Fatal("no leader elected")
			}
		}
	}
	waitSlot := func(g *consensus.Group, slot uint64) {
		deadline := time.Now().Add(10 * time.Second)
		for g.State().GetSlot() < slot {
			if time.Now().After(deadline) {
				t.Fatalf("committed slot stuck at %d, want %d", g.State().GetSlot(), slot)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	old := waitLeader("")
	if y := start(old); y != nil {
		t.Fatalf("fresh group restored y %v", y)
	}
	waitSlot(old.g, 4)
	for deadline := time.Now().Add(10 * time.Second); len(old.g.State().GetHostedModels()) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no x^v committed")
		}
	}
	// kill the leader mid-run: its allocator and its Raft node go away.
	_ = sys.Root.StopFuture(old.pid).Wait()
	if err := old.g.Shutdown(); err != nil {
		t.Logf("shutdown old leader: %v", err)
	}
	nl := waitLeader(old.id)
	st := nl.g.State()
	mu.Lock()
	want := results[old.id][int64(st.GetSlot())-1]
	mu.Unlock()
	if want == nil || !slices.Equal(st.GetFractional(), want) {
		t.Fatalf("committed y^v at slot %d is %v, old leader computed %v", st.GetSlot(), st.GetFractional(), want)
	}
	used := 0.0
	for _, name := range st.GetHostedModels() {
		mi, _ := in.Catalog.ModelIndex(name)
		used += in.Size[in.Index(v, mi)]
	}
	if len(st.GetHostedModels()) == 0 || used > in.Budget[v]+1e-9 {
		t.Fatalf("committed x^v %v uses %v of budget %v", st.GetHostedModels(), used, in.Budget[v])
	}
	got := start(nl)
	if !slices.Equal(got, want) {
		t.Fatalf("new leader restored %v, last committed %v", got, want)
	}
	waitSlot(nl.g, st.GetSlot()+2) // the new leader keeps committing from there
	t.Logf("old leader %s committed %d slots; new leader %s restored y^v of slot %d and reached slot %d",
		old.id, st.GetSlot(), nl.id, st.GetSlot(), nl.g.State().GetSlot())
	_ = sys.Root.StopFuture(nl.pid).Wait()
	for _, m := range ms {
		if m != old {
			_ = m.g.Shutdown()
		}
	}
}
