package router

import (
	"testing"
	"time"

	"github.com/idn-net/idn/actors/view"
	"github.com/idn-net/idn/actors/wire"
	"github.com/idn-net/idn/messages"
	"github.com/idn-net/idn/policy/idn"
)

const topo = `vertices:
  - {id: repo, tier: 0, budget_mb: 1000, gpu: g}
  - {id: mid,  tier: 1, budget_mb: 1000, gpu: g}
  - {id: edge, tier: 2, budget_mb: 1000, gpu: g}
edges:
  - {a: edge, b: mid,  rtt_ms: 2}
  - {a: mid,  b: repo, rtt_ms: 4}
repositories: {default: repo}
`

const cat = `tasks: [det]
models:
  - {name: m, task: det, accuracy: 0.5, size_mb: 1, speed: {g: {fps: 100}}}
`

var t0 = time.Unix(1000, 0)

func newCore(t *testing.T, emulate bool) *Core {
	t.Helper()
	g, err := idn.ParseTopologyYAML([]byte(topo))
	if err != nil {
		t.Fatal(err)
	}
	c, err := idn.ParseCatalogYAML([]byte(cat))
	if err != nil {
		t.Fatal(err)
	}
	r := NewCore(Config{Node: "e1", Vertex: "edge", SelfAddr: "e1:1", Graph: g, Catalog: c, AckTimeout: 100 * time.Millisecond, EmulateRTT: emulate})
	r.Handle(t0, &view.MembersSnapshot{Members: []view.Member{
		{Name: "e1", Vertex: "edge", RemoteAddr: "e1:1", Alive: true},
		{Name: "m1", Vertex: "mid", RemoteAddr: "m1:1", Alive: true},
		{Name: "m2", Vertex: "mid", RemoteAddr: "m2:1", Alive: true},
		{Name: "r1", Vertex: "repo", RemoteAddr: "r1:1", Alive: true},
	}})
	r.Handle(t0, &view.LeaderChanged{Vertex: "edge", Name: "e1", RemoteAddr: "e1:1"})
	return r
}

func req(task string) *messages.InferRequest {
	return &messages.InferRequest{Id: "q1", Task: task, DeadlineUnixNano: t0.Add(time.Second).UnixNano(),
		ReplyTo: &messages.ActorRef{Address: "e1:1", Id: view.InboxID}}
}

func one(t *testing.T, outs []wire.Out) wire.Out {
	t.Helper()
	if len(outs) != 1 {
		t.Fatalf("want 1 message, got %d: %+v", len(outs), outs)
	}
	return outs[0]
}

func TestSubmitGoesToLocalScheduler(t *testing.T) {
	r := newCore(t, false)
	o := one(t, r.Handle(t0, &Submit{Req: req("det")}))
	m := o.Msg.(*messages.InferRequest)
	if o.To.Id != view.SchedulerID || o.To.Address != "e1:1" || m.Hop != 0 || len(m.Path) != 3 || m.Path[2] != "repo" {
		t.Fatalf("got %v %+v", o.To, m)
	}
}

func TestUnknownTaskIsBadRequest(t *testing.T) {
	r := newCore(t, false)
	o := one(t, r.Handle(t0, &Submit{Req: req("nope")}))
	rep := o.Msg.(*messages.InferReply)
	if rep.Ok || rep.ErrorKind != messages.ErrorKind_ERROR_KIND_BAD_REQUEST || o.To.Id != view.InboxID {
		t.Fatalf("got %+v", rep)
	}
}

func forwarded(t *testing.T, r *Core, emulate bool) *messages.InferRequest {
	t.Helper()
	q := req("det")
	q.Path = []string{"edge", "mid", "repo"}
	outs := r.Handle(t0, &ForwardOut{Req: q})
	if emulate {
		o := one(t, outs)
		if o.Delay != 2*time.Millisecond || o.To.Id != view.RouterID {
			t.Fatalf("want self-send delayed 2ms, got %+v", o)
		}
		outs = r.Handle(t0, o.Msg)
	}
	o := one(t, outs)
	m := o.Msg.(*messages.InferRequest)
	if o.To.Id != view.RouterID || (o.To.Address != "m1:1" && o.To.Address != "m2:1") || m.Hop != 1 || m.RttMs != 2 || m.ForwardId == 0 || m.AckTo.Address != "e1:1" {
		t.Fatalf("forward: to %v %+v", o.To, m)
	}
	return m
}

func TestForwardAckAndRetry(t *testing.T) {
	r := newCore(t, true)
	m := forwarded(t, r, true)
	r.Handle(t0, &messages.ForwardAck{ForwardId: m.ForwardId})
	if r.Pending() != 0 {
		t.Fatal("ack did not clear the pending forward")
	}
	// No ack: after AckTimeout the tick retries on the other member of mid.
	m = forwarded(t, r, true)
	first := ""
	for _, p := range r.pend {
		first = p.target
	}
	if outs := r.Handle(t0.Add(50*time.Millisecond), &Tick{}); len(outs) != 0 {
		t.Fatalf("retried before the ack timeout: %+v", outs)
	}
	o := one(t, r.Handle(t0.Add(150*time.Millisecond), &Tick{}))
	m2 := o.Msg.(*messages.InferRequest)
	if (first == "m1") != (o.To.Address == "m2:1") || m2.ForwardId == m.ForwardId || m2.Hop != 1 {
		t.Fatalf("retry went to %v (first %s)", o.To, first)
	}
	if r.Stats().Retries != 1 {
		t.Fatalf("stats %+v", r.Stats())
	}
}

func TestMemberDownRetriesElsewhereAndRoutesAround(t *testing.T) {
	r := newCore(t, false)
	forwarded(t, r, false)
	var target string
	for _, p := range r.pend {
		target = p.target
	}
	other := map[string]string{"m1": "m2:1", "m2": "m1:1"}[target]
	o := one(t, r.Handle(t0, &view.MemberChanged{Member: view.Member{Name: target, Vertex: "mid", Alive: false}}))
	if o.To.Address != other {
		t.Fatalf("retry to %v, want %s", o.To, other)
	}
	// Both mid members down: the request skips mid and goes to the repository.
	for _, n := range []string{"m1", "m2"} {
		r.Handle(t0, &view.MemberChanged{Member: view.Member{Name: n, Vertex: "mid", Alive: false}})
	}
	m := forwardedTo(t, r, "r1:1")
	if m.Hop != 2 || m.RttMs != 6 {
		t.Fatalf("routed around: %+v", m)
	}
	// Repository down too: unreachable.
	r.Handle(t0, &view.MemberChanged{Member: view.Member{Name: "r1", Vertex: "repo", Alive: false}})
	q := req("det")
	q.Path = []string{"edge", "mid", "repo"}
	var rep *messages.InferReply
	for _, o := range r.Handle(t0, &ForwardOut{Req: q}) {
		if x, ok := o.Msg.(*messages.InferReply); ok {
			rep = x
		}
	}
	if rep == nil || rep.ErrorKind != messages.ErrorKind_ERROR_KIND_UNREACHABLE {
		t.Fatalf("want unreachable, got %+v", rep)
	}
}

func forwardedTo(t *testing.T, r *Core, addr string) *messages.InferRequest {
	t.Helper()
	q := req("det")
	q.Path = []string{"edge", "mid", "repo"}
	var got *messages.InferRequest
	for _, o := range r.Handle(t0, &ForwardOut{Req: q}) {
		if m, ok := o.Msg.(*messages.InferRequest); ok && o.To.Address == addr {
			got = m
		}
	}
	if got == nil {
		t.Fatalf("nothing forwarded to %s", addr)
	}
	return got
}

func TestIncomingRelayedToLeaderOrHeld(t *testing.T) {
	r := newCore(t, false)
	r.Handle(t0, &view.LeaderChanged{Vertex: "edge"})
	q := req("det")
	q.Path = []string{"edge", "mid", "repo"}
	q.AckTo = &messages.ActorRef{Address: "x:1", Id: view.RouterID}
	if outs := r.Handle(t0, q); len(outs) != 0 {
		t.Fatalf("relayed without a leader: %+v", outs)
	}
	o := one(t, r.Handle(t0, &view.LeaderChanged{Vertex: "edge", Name: "e2", RemoteAddr: "e2:1"}))
	if o.To.Address != "e2:1" || o.To.Id != view.SchedulerID || o.Msg.(*messages.InferRequest).AckTo.Address != "x:1" {
		t.Fatalf("relay %+v", o)
	}
	// Malformed forwards are counted and answered, never panic.
	bad := req("det")
	bad.Path = []string{"edge"}
	bad.Hop = 5
	r.Handle(t0, bad)
	r.Handle(t0, (*messages.InferRequest)(nil))
	if r.Stats().Malformed != 2 {
		t.Fatalf("stats %+v", r.Stats())
	}
}

func TestShortcutWhenNothingAcceptableHostedHere(t *testing.T) {
	r := newCore(t, false)
	r.Handle(t0, &Hosted{Models: []string{"m"}}) // accuracy 0.5
	q := req("det")
	q.MinAccuracy = 0.9
	o := one(t, r.Handle(t0, &Submit{Req: q}))
	m := o.Msg.(*messages.InferRequest)
	if o.To.Id != view.RouterID || m.Hop != 1 || r.Stats().Shortcuts != 1 {
		t.Fatalf("want a direct forward to mid, got %v %+v", o.To, m)
	}
	// Acceptable here: goes to the vertex scheduler.
	o = one(t, r.Handle(t0, &Submit{Req: req("det")}))
	if o.To.Id != view.SchedulerID {
		t.Fatalf("want the scheduler, got %v", o.To)
	}
}
