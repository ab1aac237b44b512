package gossip

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/idn-net/idn/messages"
)

// Malformed metadata from a peer is an error, never a panic.
func FuzzDecodeMeta(f *testing.F) {
	good, _ := Meta{Vertex: "v1", Tier: 2, RaftAddr: "127.0.0.1:1", GPUs: 1}.Encode()
	f.Add(good)
	f.Add([]byte{0x0a, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMeta(b)
		if err != nil {
			return
		}
		// what decodes re-encodes
		if _, err := m.Encode(); err != nil {
			t.Fatalf("re-encode %+v: %v", m, err)
		}
	})
}

// Malformed user messages from peers are ignored, never a panic.
func FuzzNotifyMsg(f *testing.F) {
	good, _ := proto.Marshal(&messages.GossipMessage{Msg: &messages.GossipMessage_LeaveIntent{
		LeaveIntent: &messages.GossipLeaveIntent{Node: "n1"}}})
	f.Add(good)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		g := &Gossip{cfg: Config{NodeName: "self"}, log: discardLogger, intents: map[string]time.Time{}}
		(*delegate)(g).NotifyMsg(b)
	})
}
