package scheduler

import (
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/idn-net/idn/actors/router"
	"github.com/idn-net/idn/actors/view"
	"github.com/idn-net/idn/actors/wire"
	"github.com/idn-net/idn/messages"
	"github.com/idn-net/idn/policy/idn"
)

// probe forwards the messages sent to it to a channel.
type probe struct {
	ch chan any
}

func (p *probe) SendUserMessage(_ *actor.PID, m any) { p.ch <- actor.UnwrapEnvelopeMessage(m) }
func (p *probe) SendSystemMessage(*actor.PID, any)   {}
func (p *probe) Stop(*actor.PID)                     {}

func next[T any](t *testing.T, p *probe) T {
	t.Helper()
	for {
		select {
		case m := <-p.ch:
			if v, ok := m.(T); ok {
				return v
			}
		case <-time.After(5 * time.Second):
			var zero T
			t.Fatalf("no %T received", zero)
			return zero
		}
	}
}

// TestActorPassesUpstreamCosts checks that the shell hands UpstreamCosts to the core.
func TestActorPassesUpstreamCosts(t *testing.T) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	defer sys.Shutdown()
	rt, ex, inbox := &probe{ch: make(chan any, 16)}, &probe{ch: make(chan any, 16)}, &probe{ch: make(chan any, 16)}
	sys.ProcessRegistry.Add(rt, view.RouterID)
	sys.ProcessRegistry.Add(ex, view.ExecutorID(0))
	inboxPID, _ := sys.ProcessRegistry.Add(inbox, view.InboxID)
	g, err := idn.ParseTopologyYAML([]byte(topo))
	if err != nil {
		t.Fatal(err)
	}
	c, err := idn.ParseCatalogYAML([]byte(cat))
	if err != nil {
		t.Fatal(err)
	}
	addr := sys.Address()
	cfg := Config{Node: "n1", Vertex: "mid", SelfAddr: addr, Graph: g, Catalog: c, GPU: "g", LatencyScale: 1,
		Hosted: []string{"lo"}, Infida: &Infida{Meter: unlimited{}, LocalCost: map[string]float64{"lo": 10}}}
	members := &view.MembersSnapshot{Members: []view.Member{{Name: "n1", Vertex: "mid", RemoteAddr: addr, GPUs: 1, Alive: true}}}
	pid, err := sys.Root.SpawnNamed(Props(cfg, sys.Root, nil, members), "sched-test")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sys.Root.StopFuture(pid).Wait() }()
	mk := func(id string) *messages.InferRequest {
		return &messages.InferRequest{Id: id, Task: "det", Path: []string{"mid", "repo"},
			DeadlineUnixNano: time.Now().Add(time.Minute).UnixNano(), ReplyTo: wire.Ref(inboxPID)}
	}
	sys.Root.Send(pid, mk("a"))
	if rb := next[*messages.RunBatch](t, ex); rb.Model != "lo" {
		t.Fatalf("a: batch of %s", rb.Model)
	}
	sys.Root.Send(pid, &UpstreamCosts{Best: map[string]float64{"det": 5}})
	sys.Root.Send(pid, mk("b"))
	if fo := next[*router.ForwardOut](t, rt); fo.Req.Id != "b" {
		t.Fatalf("forwarded %s", fo.Req.Id)
	}
}
