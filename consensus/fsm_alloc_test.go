package consensus

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/idn-net/idn/messages"
)

func applyCmd(t *testing.T, f *fsm, idx uint64, c *messages.FSMSetAllocation) error {
	t.Helper()
	data, err := proto.Marshal(&messages.FSMCommand{Cmd: &messages.FSMCommand_SetAllocation{SetAllocation: c}})
	if err != nil {
		t.Fatal(err)
	}
	err, _ = f.Apply(&raft.Log{Type: raft.LogCommand, Index: idx, Data: data}).(error)
	return err
}

// set_allocation commits y^v, x^v and the slot atomically with a
// compare-and-set on the slot; invalid commands change nothing.
func TestSetAllocation(t *testing.T) {
	f := newFSM("v1")
	ok := &messages.FSMSetAllocation{ExpectSlot: 0, Slot: 1, Models: []string{"a", "b"}, Y: []float64{0.25, 1},
		SetHosted: true, Hosted: []string{"b", "r", "b"}}
	if err := applyCmd(t, f, 1, ok); err != nil {
		t.Fatal(err)
	}
	st := f.snapshotState()
	if st.Slot != 1 || st.Fractional[0] != 0.25 || st.FractionalModels[1] != "b" || strings.Join(st.HostedModels, ",") != "b,r" {
		t.Fatalf("state after commit: %v", st)
	}
	// y only (x kept), next slot
	if err := applyCmd(t, f, 2, &messages.FSMSetAllocation{ExpectSlot: 1, Slot: 2, Models: []string{"a", "b"}, Y: []float64{0.5, 0.5}}); err != nil {
		t.Fatal(err)
	}
	bad := map[string]*messages.FSMSetAllocation{
		"expect_slot": {ExpectSlot: 1, Slot: 3},                        // deposed leader's late commit
		"must exceed": {ExpectSlot: 2, Slot: 2},                        // no progress
		"y values":    {ExpectSlot: 2, Slot: 3, Models: []string{"a"}}, // misaligned
		"models[1]":   {ExpectSlot: 2, Slot: 3, Models: []string{"a", "a"}, Y: []float64{0, 0}},
		"y[0]":        {ExpectSlot: 2, Slot: 3, Models: []string{"a"}, Y: []float64{math.NaN()}},
	}
	idx := uint64(3)
	for field, c := range bad {
		err := applyCmd(t, f, idx, c)
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Fatalf("%s: got %v", field, err)
		}
		idx++
	}
	st = f.snapshotState()
	if st.Slot != 2 || st.Fractional[0] != 0.5 || strings.Join(st.HostedModels, ",") != "b,r" {
		t.Fatalf("rejected commands changed the state: %v", st)
	}
	// snapshot round trip keeps y^v, x^v and the slot
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
		t.Fatalf("restore: %v != %v", g.snapshotState(), st)
	}
	var buf bytes.Buffer
	if err := encodeSnapshot(&buf, st); err != nil {
		t.Fatal(err)
	}
	if got, err := decodeSnapshot(&buf); err != nil || !proto.Equal(got, st) {
		t.Fatalf("decode: %v %v", got, err)
	}
}
