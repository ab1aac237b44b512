package executor

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/idn-net/idn/actors/wire"
	"github.com/idn-net/idn/gpu"
	"github.com/idn-net/idn/messages"
)

// probe collects the messages sent to it.
type probe struct {
	mu   sync.Mutex
	msgs []any
	ch   chan struct{}
}

func (p *probe) SendUserMessage(_ *actor.PID, m any) {
	p.mu.Lock()
	p.msgs = append(p.msgs, actor.UnwrapEnvelopeMessage(m))
	p.mu.Unlock()
	p.ch <- struct{}{}
}
func (p *probe) SendSystemMessage(*actor.PID, any) {}
func (p *probe) Stop(*actor.PID)                   {}

func setup(t *testing.T, profile gpu.Profile) (*actor.ActorSystem, *actor.PID, *probe, *actor.PID, *sync.WaitGroup) {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	e, err := gpu.NewEmulated(gpu.EmulatedConfig{ID: "g0", MemoryMB: 100, LatencyScale: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Load(context.Background(), gpu.Model{Name: "m", SizeMB: 1, Accuracy: 1, Profile: profile}); err != nil {
		t.Fatal(err)
	}
	wg := &sync.WaitGroup{}
	pid, err := sys.Root.SpawnNamed(Props(Config{Node: "n1", Vertex: "v", Exec: e, Root: sys.Root, WG: wg}), "executor-0")
	if err != nil {
		t.Fatal(err)
	}
	p := &probe{ch: make(chan struct{}, 100)}
	ppid, _ := sys.ProcessRegistry.Add(p, "probe")
	t.Cleanup(func() {
		_ = sys.Root.StopFuture(pid).Wait()
		wg.Wait()
		sys.Shutdown()
	})
	return sys, pid, p, ppid, wg
}

func batch(ppid *actor.PID, deadline time.Time, ids ...string) *messages.RunBatch {
	b := &messages.RunBatch{BatchId: 1, Model: "m", DoneTo: wire.Ref(ppid)}
	for _, id := range ids {
		b.Items = append(b.Items, &messages.BatchItem{Request: &messages.InferRequest{Id: id, Task: "t", Path: []string{"v"},
			DeadlineUnixNano: deadline.UnixNano(), ReplyTo: wire.Ref(ppid)}})
	}
	return b
}

func wait(t *testing.T, p *probe, n int) []any {
	t.Helper()
	for i := 0; i < n; i++ {
		select {
		case <-p.ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("got %d of %d messages", i, n)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]any(nil), p.msgs...)
}

func TestRunBatchRepliesAndReportsDone(t *testing.T) {
	sys, pid, p, ppid, _ := setup(t, gpu.Profile{AlphaMs: 1})
	sys.Root.Send(pid, batch(ppid, time.Now().Add(time.Second), "a", "b"))
	msgs := wait(t, p, 3)
	var ok, done int
	for _, m := range msgs {
		switch x := m.(type) {
		case *messages.InferReply:
			if x.Ok && x.Correct && x.ServedByNode == "n1" && x.BatchSize == 2 && x.ServiceMs >= 2 {
				ok++
			}
		case *messages.BatchDone:
			if x.Ok && len(x.Loaded) == 1 {
				done++
			}
		}
	}
	if ok != 2 || done != 1 {
		t.Fatalf("messages %+v", msgs)
	}
}

func TestExpiredBatchIsPreempted(t *testing.T) {
	sys, pid, p, ppid, _ := setup(t, gpu.Profile{BetaMs: 200})
	sys.Root.Send(pid, batch(ppid, time.Now().Add(20*time.Millisecond), "a"))
	start := time.Now()
	msgs := wait(t, p, 2)
	if time.Since(start) > 150*time.Millisecond {
		t.Fatalf("preemption took %v", time.Since(start))
	}
	for _, m := range msgs {
		if r, ok := m.(*messages.InferReply); ok && r.ErrorKind != messages.ErrorKind_ERROR_KIND_DEADLINE_EXCEEDED {
			t.Fatalf("reply %+v", r)
		}
	}
}

func TestMalformedBatchRejected(t *testing.T) {
	sys, pid, p, ppid, _ := setup(t, gpu.Profile{})
	b := batch(ppid, time.Now().Add(time.Second), "a")
	b.Items[0].Request.Hop = 9
	sys.Root.Send(pid, b)
	msgs := wait(t, p, 1)
	if d, ok := msgs[0].(*messages.BatchDone); !ok || d.Ok {
		t.Fatalf("got %+v", msgs)
	}
}
