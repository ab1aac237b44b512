package node_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/idn-net/idn/actors/executor"
	"github.com/idn-net/idn/actors/router"
	"github.com/idn-net/idn/actors/scheduler"
	"github.com/idn-net/idn/actors/view"
	"github.com/idn-net/idn/messages"
	"github.com/idn-net/idn/node"
	"github.com/idn-net/idn/node/nodetest"
	"github.com/idn-net/idn/policy/idn"
)

func FuzzDecodeInferRequest(f *testing.F) {
	f.Add("det", []byte(`{"id":"1","inputs":[{"name":"img","shape":[1],"datatype":"BYTES","data":["x"]}],"parameters":{"slo_ms":100,"min_accuracy":0.5}}`))
	f.Add("det", []byte(`{"inputs":[]}`))
	f.Add("", []byte(`{}`))
	f.Add("det", []byte(`{"inputs":[{"name":"a","shape":[-1],"datatype":"FP32","data":[1]}]}`))
	f.Add("det", []byte(`{"inputs":[{"name":"a","shape":[2],"datatype":"FP32","data":[1,2]}],"parameters":{"slo_ms":"x"}}`))
	f.Add("det", []byte(`{"inputs":[{"name":"a","shape":[2],"datatype":"FP32","data":[1,2]}],"parameters":{"min_accuracy":2}}`))
	f.Add("det", []byte(`{"inputs":[{"name":"a","shape":[2],"datatype":"FP32","data":[1,2]}]} {}`))
	f.Fuzz(func(t *testing.T, task string, body []byte) {
		in, err := node.DecodeInferRequest(task, body, time.Minute)
		if err != nil {
			if !errors.Is(err, node.ErrBadRequest) {
				t.Fatalf("error does not wrap ErrBadRequest: %v", err)
			}
			if !strings.Contains(err.Error(), ":") {
				t.Fatalf("error does not name a field: %v", err)
			}
			return
		}
		if in.Task != task || in.MinAccuracy < 0 || in.MinAccuracy > 1 || in.SLO < 0 || in.SLO > time.Minute {
			t.Fatalf("accepted out-of-range input %+v", in)
		}
	})
}

func TestDecodeInferRequestNamesField(t *testing.T) {
	cases := map[string]string{
		`{"inputs":[]}`: "inputs",
		`{"inputs":[{"name":"a","shape":[1],"datatype":"FP33","data":[1]}]}`:                                   "inputs[0].datatype",
		`{"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1]}],"parameters":{"min_accuracy":1.5}}`: "parameters.min_accuracy",
		`{"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1]}],"parameters":{"slo_ms":-1}}`:        "parameters.slo_ms",
		`{"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1]}],"parameters":{"slo_ms":"1"}}`:       "parameters.slo_ms",
		`{"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1]}],"bogus":1}`:                         "bogus",
		`{"inputs":[{"name":"","shape":[1],"datatype":"FP32","data":[1]}]}`:                                    "inputs[0].name",
	}
	for body, field := range cases {
		_, err := node.DecodeInferRequest("det", []byte(body), time.Minute)
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: error %v does not name %s", body, err, field)
		}
	}
}

// cores builds a router and a scheduler core on a small model.
func cores(t testing.TB) (*router.Core, *scheduler.Core) {
	g, err := idn.ParseTopologyYAML([]byte(nodetest.LineTopologyYAML))
	if err != nil {
		t.Fatal(err)
	}
	c, err := idn.ParseCatalogYAML([]byte(nodetest.SmallCatalogYAML))
	if err != nil {
		t.Fatal(err)
	}
	r := router.NewCore(router.Config{Node: "n1", Vertex: "mid", SelfAddr: "127.0.0.1:1", Graph: g, Catalog: c})
	s := scheduler.NewCore(scheduler.Config{Node: "n1", Vertex: "mid", SelfAddr: "127.0.0.1:1", Graph: g, Catalog: c,
		GPU: "titan-rtx", LatencyScale: 1, Hosted: []string{"det/mid#0"}})
	snap := &view.MembersSnapshot{Members: []view.Member{
		{Name: "n1", Vertex: "mid", RemoteAddr: "127.0.0.1:1", GPUs: 1, Alive: true},
		{Name: "n2", Vertex: "repo", RemoteAddr: "127.0.0.1:2", GPUs: 1, Alive: true},
	}}
	lc := &view.LeaderChanged{Vertex: "mid", Name: "n1", RemoteAddr: "127.0.0.1:1"}
	for _, m := range []any{snap, lc} {
		r.Handle(time.Unix(0, 0), m)
		s.Handle(time.Unix(0, 0), m)
	}
	return r, s
}

// handleWire feeds one decoded wire message to every handler of incoming messages.
func handleWire(r *router.Core, s *scheduler.Core, now time.Time, msg any) {
	r.Handle(now, msg)
	s.Handle(now, msg)
	if b, ok := msg.(*messages.RunBatch); ok {
		_ = executor.ValidateBatch(b)
	}
	r.Handle(now, &router.Tick{})
	s.Handle(now, &scheduler.Tick{})
}

// FuzzWireMessages decodes arbitrary bytes as each serving wire type and
// hands the result to the router and scheduler logic: malformed input must
// never panic.
func FuzzWireMessages(f *testing.F) {
	seed := &messages.InferRequest{Id: "x", Task: "det", MinAccuracy: 0.6, Path: []string{"edge", "mid", "repo"}, Hop: 1,
		ReplyTo: &messages.ActorRef{Address: "127.0.0.1:9", Id: "inbox"}, AckTo: &messages.ActorRef{Address: "127.0.0.1:9", Id: "router"}}
	b, _ := proto.Marshal(seed)
	f.Add(uint8(0), b)
	seed.Hop = 7
	b, _ = proto.Marshal(seed)
	f.Add(uint8(0), b)
	bd, _ := proto.Marshal(&messages.BatchDone{BatchId: 1, Ok: false, Error: "gpu: model not loaded"})
	f.Add(uint8(1), bd)
	rb, _ := proto.Marshal(&messages.RunBatch{BatchId: 1, Model: "det/mid#0", Items: []*messages.BatchItem{{Request: seed}}})
	f.Add(uint8(3), rb)
	f.Add(uint8(2), []byte{0x08, 0x01})
	r, s := cores(f)
	f.Fuzz(func(t *testing.T, kind uint8, data []byte) {
		var msg proto.Message
		switch kind % 4 {
		case 0:
			msg = &messages.InferRequest{}
		case 1:
			msg = &messages.BatchDone{}
		case 2:
			msg = &messages.ForwardAck{}
		default:
			msg = &messages.RunBatch{}
		}
		if proto.Unmarshal(data, msg) != nil {
			return
		}
		handleWire(r, s, time.Unix(1, 0), msg)
	})
}

// FuzzRemoteEnvelope decodes arbitrary bytes as a protoactor remote message,
// sanitizes it as the node's gRPC guard does, then performs the endpoint
// reader's lookups and deserialization and hands the messages to the
// handlers: nothing may panic.
func FuzzRemoteEnvelope(f *testing.F) {
	req, _ := proto.Marshal(&messages.InferRequest{Id: "x", Task: "det", Path: []string{"mid", "repo"},
		ReplyTo: &messages.ActorRef{Address: "127.0.0.1:9", Id: "inbox"}})
	good := &remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: &remote.MessageBatch{
		TypeNames: []string{"idn.messages.InferRequest", "no.such.Type"},
		Targets:   []*actor.PID{{Address: "127.0.0.1:1", Id: "router"}},
		Envelopes: []*remote.MessageEnvelope{{TypeId: 0, MessageData: req}, {TypeId: 1, MessageData: req}, {TypeId: 5, Target: 3, Sender: 9}},
	}}}
	b, _ := proto.Marshal(good)
	f.Add(b)
	b, _ = proto.Marshal(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectRequest{ConnectRequest: &remote.ConnectRequest{}}})
	f.Add(b)
	r, s := cores(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		var m remote.RemoteMessage
		if proto.Unmarshal(data, &m) != nil {
			return
		}
		node.SanitizeRemoteMessage(&m)
		mb, ok := m.MessageType.(*remote.RemoteMessage_MessageBatch)
		if !ok {
			return
		}
		for _, e := range mb.MessageBatch.Envelopes {
			// What the endpoint reader does, unchecked.
			_ = mb.MessageBatch.Targets[e.Target].Id
			if e.Sender > 0 {
				_ = mb.MessageBatch.Senders[e.Sender-1].Id
			}
			msg, err := remote.Deserialize(e.MessageData, mb.MessageBatch.TypeNames[e.TypeId], e.SerializerId)
			if err != nil {
				t.Fatalf("sanitized envelope failed to deserialize: %v", err)
			}
			handleWire(r, s, time.Unix(1, 0), msg)
		}
	})
}

// TestMalformedRemoteTrafficDoesNotKillNode speaks the protoactor remote
// protocol to a running node with malformed batches (unknown type names,
// out-of-range indices, garbage data, nil connection requests) and checks
// the node still serves.
func TestMalformedRemoteTrafficDoesNotKillNode(t *testing.T) {
	if nodetest.Isolate(t) {
		return
	}
	t.Cleanup(func() { nodetest.CheckNoLeaks(t) })
	topo, cat := nodetest.Files(t, nodetest.LineTopologyYAML, nodetest.SmallCatalogYAML)
	cfg := nodetest.Config(t, "r1", "repo")
	cfg.Topology, cfg.Catalog = topo, cat
	n := nodetest.Start(t, cfg)
	nodetest.WaitFor(t, 10*time.Second, "ready", n.Ready)

	conn, err := grpc.Dial(n.Addrs().Remote, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	bad := []*remote.RemoteMessage{
		{MessageType: &remote.RemoteMessage_ConnectRequest{ConnectRequest: &remote.ConnectRequest{}}},
		{MessageType: &remote.RemoteMessage_ConnectRequest{ConnectRequest: &remote.ConnectRequest{ConnectionType: &remote.ConnectRequest_ServerConnection{}}}},
		{MessageType: &remote.RemoteMessage_MessageBatch{}},
		{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: &remote.MessageBatch{
			TypeNames: []string{"no.such.Type", "idn.messages.InferRequest", "actor.Terminated"},
			Targets:   []*actor.PID{{Address: n.Addrs().Remote, Id: "router"}, nil},
			Envelopes: []*remote.MessageEnvelope{
				{TypeId: 0, MessageData: []byte{1, 2, 3}},
				{TypeId: 1, MessageData: []byte{0xff, 0xff}},
				{TypeId: 1, Target: 1},
				{TypeId: 2, MessageData: nil},
				{TypeId: 9, Target: 7, Sender: 4, SerializerId: 8},
				{TypeId: 1, SerializerId: 1, MessageData: []byte("{}")},
				nil,
			},
		}}},
	}
	for round := 0; round < 2; round++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		stream, err := remote.NewRemotingClient(conn).Receive(ctx)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		for _, m := range bad {
			if err := stream.Send(m); err != nil {
				break
			}
		}
		_ = stream.CloseSend()
		time.Sleep(100 * time.Millisecond)
		cancel()
	}
	rep, _ := n.Infer(context.Background(), node.InferInput{Task: "det", SLO: 2 * time.Second})
	if !rep.Ok {
		t.Fatalf("node no longer serves after malformed traffic: %+v", rep)
	}
	w := httptest.NewRecorder()
	n.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if strings.Contains(w.Body.String(), "idn_wire_dropped_total 0\n") {
		t.Fatalf("the guard dropped nothing:\n%s", w.Body.String())
	}
}
