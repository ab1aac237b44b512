package node_test

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/protobuf/proto"

	"github.com/idn-net/idn/messages"
	"github.com/idn-net/idn/node"
)

// The wire guard accepts the INFIDA control envelope of actors/allocator
// (package idn.messages) and drops undecodable ones; the allocator then
// validates the batch inside (zstd, indices, finiteness).
func TestGuardControlEnvelope(t *testing.T) {
	env, _ := proto.Marshal(&messages.ControlEnvelope{Slot: 3, FromVertex: 1, Zstd: true, Batch: []byte{1, 2, 3}, RawSize: 9})
	m := &remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: &remote.MessageBatch{
		TypeNames: []string{"idn.messages.ControlEnvelope", "idn.messages.ControlBatch"},
		Targets:   []*actor.PID{{Address: "127.0.0.1:1", Id: "allocator"}},
		Envelopes: []*remote.MessageEnvelope{
			{TypeId: 0, MessageData: env},
			{TypeId: 0, MessageData: []byte{0xff, 0xff}},
			{TypeId: 1, MessageData: []byte{0x0a}},
		},
	}}}
	if n := node.SanitizeRemoteMessage(m); n != 2 {
		t.Fatalf("dropped %d envelopes, want 2", n)
	}
	kept := m.GetMessageBatch().Envelopes
	if len(kept) != 1 || kept[0].TypeId != 0 {
		t.Fatalf("kept %v", kept)
	}
	msg, err := remote.Deserialize(kept[0].MessageData, "idn.messages.ControlEnvelope", 0)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := msg.(*messages.ControlEnvelope); !ok || e.Slot != 3 || !e.Zstd {
		t.Fatalf("deserialized %T %v", msg, msg)
	}
}
