package scheduler

import (
	"fmt"
	"testing"
	"time"

	"github.com/idn-net/idn/actors/router"
	"github.com/idn-net/idn/actors/view"
	"github.com/idn-net/idn/actors/wire"
	"github.com/idn-net/idn/messages"
	"github.com/idn-net/idn/policy/idn"
)

const topo = `vertices:
  - {id: repo, tier: 0, budget_mb: 1000, gpu: g}
  - {id: mid,  tier: 1, budget_mb: 1000, gpu: g}
edges:
  - {a: mid, b: repo, rtt_ms: 4}
repositories: {default: repo}
`

const cat = `tasks: [det]
models:
  - {name: lo, task: det, accuracy: 0.5, size_mb: 1, speed: {g: {alpha_ms: 10, beta_ms: 10}}}
  - {name: hi, task: det, accuracy: 0.9, size_mb: 1, speed: {g: {alpha_ms: 10, beta_ms: 10}}}
`

var t0 = time.Unix(1000, 0)

func newCore(t *testing.T, vertex string, hosted []string, gpus int) *Core {
	t.Helper()
	g, err := idn.ParseTopologyYAML([]byte(topo))
	if err != nil {
		t.Fatal(err)
	}
	c, err := idn.ParseCatalogYAML([]byte(cat))
	if err != nil {
		t.Fatal(err)
	}
	s := NewCore(Config{Node: "n1", Vertex: vertex, SelfAddr: "n1:1", Graph: g, Catalog: c, GPU: "g", LatencyScale: 1,
		Hosted: hosted, MaxBatch: 2, MaxQueue: 4})
	s.Handle(t0, &view.MembersSnapshot{Members: []view.Member{{Name: "n1", Vertex: vertex, RemoteAddr: "n1:1", GPUs: gpus, Alive: true}}})
	return s
}

func req(id string, minAcc float64, hop int32, deadline time.Duration) *messages.InferRequest {
	return &messages.InferRequest{Id: id, Task: "det", MinAccuracy: minAcc, Path: []string{"mid", "repo"}, Hop: hop,
		DeadlineUnixNano: t0.Add(deadline).UnixNano(), ReplyTo: &messages.ActorRef{Address: "e:1", Id: view.InboxID},
		AckTo: &messages.ActorRef{Address: "e:1", Id: view.RouterID}, ForwardId: 7}
}

func find[T any](outs []wire.Out) (T, bool) {
	for _, o := range outs {
		if m, ok := o.Msg.(T); ok {
			return m, true
		}
	}
	var zero T
	return zero, false
}

func TestServeHereAcksAndBatches(t *testing.T) {
	s := newCore(t, "mid", []string{"lo"}, 1)
	outs := s.Handle(t0, req("a", 0.4, 0, time.Second))
	ack, ok := find[*messages.ForwardAck](outs)
	if !ok || ack.ForwardId != 7 {
		t.Fatalf("no ack: %+v", outs)
	}
	rb, ok := find[*messages.RunBatch](outs)
	if !ok || rb.Model != "lo" || len(rb.Items) != 1 {
		t.Fatalf("no batch: %+v", outs)
	}
	// Executor busy: the next three queue; BatchDone dispatches a batch of MaxBatch=2.
	for _, id := range []string{"b", "c", "d"} {
		if _, ok := find[*messages.RunBatch](s.Handle(t0, req(id, 0.4, 0, time.Second))); ok {
			t.Fatal("dispatched to a busy executor")
		}
	}
	rb2, ok := find[*messages.RunBatch](s.Handle(t0, &messages.BatchDone{BatchId: rb.BatchId, Ok: true, Loaded: []string{"lo"}}))
	if !ok || len(rb2.Items) != 2 || rb2.Items[0].Request.Id != "b" {
		t.Fatalf("second batch %+v", rb2)
	}
}

func TestForwardWhenNotAccurateEnough(t *testing.T) {
	s := newCore(t, "mid", []string{"lo"}, 1)
	fo, ok := find[*router.ForwardOut](s.Handle(t0, req("a", 0.8, 0, time.Second)))
	if !ok || fo.Req.Id != "a" {
		t.Fatal("not forwarded")
	}
}

func TestForwardWhenSaturated(t *testing.T) {
	s := newCore(t, "mid", []string{"lo"}, 1)
	// Each batch of 2 takes 30 ms; with a 50 ms deadline the third request cannot make it.
	s.Handle(t0, req("a", 0, 0, 50*time.Millisecond))
	s.Handle(t0, req("b", 0, 0, 50*time.Millisecond))
	s.Handle(t0, req("c", 0, 0, 50*time.Millisecond))
	if _, ok := find[*router.ForwardOut](s.Handle(t0, req("d", 0, 0, 50*time.Millisecond))); !ok {
		t.Fatalf("queue of %d should be saturated for a 50 ms deadline", s.Queued())
	}
}

func TestRepositoryAlwaysServesOrOverloads(t *testing.T) {
	s := newCore(t, "repo", []string{"lo"}, 1)
	// min_accuracy 0.95 unmet by every model: the repository still serves.
	if rb, ok := find[*messages.RunBatch](s.Handle(t0, req("a", 0.95, 1, time.Minute))); !ok || rb.Model != "lo" {
		t.Fatal("repository did not serve")
	}
	for i := 0; i < 4; i++ {
		s.Handle(t0, req(fmt.Sprint("q", i), 0.95, 1, time.Minute))
	}
	// A duplicate (retried forward) is acked but not queued again.
	outs := s.Handle(t0, req("q0", 0.95, 1, time.Minute))
	if _, ok := find[*messages.ForwardAck](outs); !ok || len(outs) != 1 || s.Stats().Duplicates != 1 {
		t.Fatalf("duplicate: %+v stats %+v", outs, s.Stats())
	}
	rep, ok := find[*messages.InferReply](s.Handle(t0, req("z", 0.95, 1, time.Minute)))
	if !ok || rep.ErrorKind != messages.ErrorKind_ERROR_KIND_OVERLOADED {
		t.Fatalf("want overloaded, got %+v", rep)
	}
}

func TestExpiryRequeueAndDrain(t *testing.T) {
	s := newCore(t, "mid", []string{"lo"}, 1)
	rb, _ := find[*messages.RunBatch](s.Handle(t0, req("a", 0, 0, time.Second)))
	s.Handle(t0, req("b", 0, 0, 100*time.Millisecond))
	rep, ok := find[*messages.InferReply](s.Handle(t0.Add(200*time.Millisecond), &Tick{}))
	if !ok || rep.Id != "b" || rep.ErrorKind != messages.ErrorKind_ERROR_KIND_DEADLINE_EXCEEDED {
		t.Fatalf("want b expired, got %+v", rep)
	}
	// The executor's node leaves: its batch is requeued (no executor left to run it).
	s.Handle(t0, &view.MemberChanged{Member: view.Member{Name: "n1", Vertex: "mid", RemoteAddr: "n1:1", GPUs: 1, Alive: false}})
	if s.Queued() != 1 || s.Stats().Requeued != 1 {
		t.Fatalf("queued %d stats %+v (batch %d)", s.Queued(), s.Stats(), rb.BatchId)
	}
	outs := s.Drain()
	rep, ok = find[*messages.InferReply](outs)
	if !ok || rep.Id != "a" || rep.ErrorKind != messages.ErrorKind_ERROR_KIND_UNREACHABLE {
		t.Fatalf("drain: %+v", outs)
	}
}

func TestNotLoadedBatchIsRequeuedOnAnotherExecutor(t *testing.T) {
	s := newCore(t, "mid", []string{"lo"}, 2)
	outs := s.Handle(t0, req("a", 0, 0, time.Second))
	rb, _ := find[*messages.RunBatch](outs)
	var first string
	for _, o := range outs {
		if _, ok := o.Msg.(*messages.RunBatch); ok {
			first = o.To.Id
		}
	}
	outs = s.Handle(t0, &messages.BatchDone{BatchId: rb.BatchId, Ok: false, Error: "gpu: model not loaded: lo"})
	var second string
	for _, o := range outs {
		if _, ok := o.Msg.(*messages.RunBatch); ok {
			second = o.To.Id
		}
	}
	if second == "" || second == first {
		t.Fatalf("requeued batch went to %q (first %q)", second, first)
	}
}

func TestHandoverGivesQueueBackToRouter(t *testing.T) {
	s := newCore(t, "mid", []string{"lo"}, 1)
	s.Handle(t0, req("a", 0, 0, time.Second)) // dispatched
	s.Handle(t0, req("b", 0, 0, time.Second)) // queued
	outs := s.Handover()
	rd, ok := find[*router.Redeliver](outs)
	if !ok || len(outs) != 1 || rd.Req.Id != "b" || outs[0].To.Id != view.RouterID || s.Queued() != 0 {
		t.Fatalf("handover: %+v", outs)
	}
}
