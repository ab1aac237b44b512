package consensus

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/idn-net/idn/messages"
)

func TestSnapshotRoundTrip(t *testing.T) {
	st := &messages.VertexState{
		Vertex:       "v1",
		Members:      []*messages.GroupMember{{Id: "a", RaftAddr: "127.0.0.1:1"}, {Id: "b", RaftAddr: "127.0.0.1:2"}},
		HostedModels: []string{strings.Repeat("yolov4-416-", 100)},
		Slot:         42,
		AppliedIndex: 7,
	}
	var buf bytes.Buffer
	if err := encodeSnapshot(&buf, st); err != nil {
		t.Fatal(err)
	}
	raw, _ := proto.Marshal(st)
	if buf.Len() >= len(raw) {
		t.Fatalf("snapshot not compressed: %d >= %d bytes", buf.Len(), len(raw))
	}
	got, err := decodeSnapshot(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, st) {
		t.Fatalf("round trip: %v != %v", got, st)
	}
	// the FSM path (Snapshot/Persist -> Restore)
	f := newFSM("v1")
	f.state = proto.CloneOf(st)
	snap, _ := f.Snapshot()
	sink := &memSink{}
	if err := snap.(*fsmSnapshot).Persist(sink); err != nil {
		t.Fatal(err)
	}
	g := newFSM("v1")
	if err := g.Restore(sink.reader()); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(g.snapshotState(), st) {
		t.Fatal("FSM restore mismatch")
	}
	// corrupt input is an error, not a panic
	for _, bad := range [][]byte{nil, []byte("IDNS"), []byte("XXXXX\x00"), append(append([]byte{}, snapshotMagic...), 1, 2, 3)} {
		if _, err := decodeSnapshot(bytes.NewReader(bad)); err == nil {
			t.Fatalf("decoded garbage %q", bad)
		}
	}
}

type memSink struct{ bytes.Buffer }

func (m *memSink) ID() string    { return "mem" }
func (m *memSink) Cancel() error { return nil }
func (m *memSink) Close() error  { return nil }
func (m *memSink) reader() *rc   { return &rc{bytes.NewReader(m.Bytes())} }

type rc struct{ *bytes.Reader }

func (rc) Close() error { return nil }

func TestFSMRejectsBadCommands(t *testing.T) {
	f := newFSM("v")
	if err, _ := f.Apply(&raft.Log{Type: raft.LogCommand, Index: 1, Data: []byte{0xff, 0xff}}).(error); err == nil {
		t.Fatal("malformed command accepted")
	}
	if err, _ := f.Apply(&raft.Log{Type: raft.LogCommand, Index: 2, Data: nil}).(error); err == nil {
		t.Fatal("empty command accepted")
	}
	data, _ := proto.Marshal(&messages.FSMCommand{Cmd: &messages.FSMCommand_SetMembers{SetMembers: &messages.FSMSetMembers{
		Members: []*messages.GroupMember{{Id: ""}}}}})
	if err, _ := f.Apply(&raft.Log{Type: raft.LogCommand, Index: 3, Data: data}).(error); err == nil {
		t.Fatal("member without id accepted")
	}
	if s := f.snapshotState(); s.GetAppliedIndex() != 3 || len(s.GetMembers()) != 0 {
		t.Fatalf("state after bad commands: %v", s)
	}
}

func FuzzFSMApply(f *testing.F) {
	seed, _ := proto.Marshal(&messages.FSMCommand{Cmd: &messages.FSMCommand_AdvanceSlot{AdvanceSlot: &messages.FSMAdvanceSlot{ToSlot: 3}}})
	f.Add(seed)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		m := newFSM("v")
		_ = m.Apply(&raft.Log{Type: raft.LogCommand, Index: 1, Data: b})
	})
}

func FuzzSnapshotDecode(f *testing.F) {
	var buf bytes.Buffer
	_ = encodeSnapshot(&buf, &messages.VertexState{Slot: 1})
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = decodeSnapshot(bytes.NewReader(b))
	})
}
