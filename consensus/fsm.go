package consensus

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/hashicorp/raft"
	"github.com/klauspost/compress/zstd"
	"google.golang.org/protobuf/proto"

	"github.com/idn-net/idn/messages"
)

// snapshotMagic prefixes every snapshot: "IDNS" + format version 1, followed by
// a zstd stream of one protobuf messages.VertexState.
var snapshotMagic = []byte("IDNS\x01")

// maxSnapshotSize bounds the decompressed snapshot (a corrupt or hostile
// snapshot cannot exhaust memory).
const maxSnapshotSize = 256 << 20

// ErrUnknownCommand is returned (as the Apply response) for an FSMCommand whose
// case this build does not know.
var ErrUnknownCommand = errors.New("consensus: unknown FSM command")

// fsm is the replicated vertex state.
type fsm struct {
	mu    sync.RWMutex
	state *messages.VertexState
	// onApply, if set, is called after each applied entry (outside the lock).
	onApply func()
}

func newFSM(vertex string) *fsm {
	return &fsm{state: &messages.VertexState{Vertex: vertex}}
}

func (f *fsm) snapshotState() *messages.VertexState {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return proto.CloneOf(f.state)
}

// Apply implements raft.FSM. It returns nil or an error (the Apply response).
func (f *fsm) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	var cmd messages.FSMCommand
	if err := proto.Unmarshal(l.Data, &cmd); err != nil {
		f.setApplied(l.Index)
		return fmt.Errorf("consensus: bad FSM command at index %d: %w", l.Index, err)
	}
	err := f.apply(&cmd, l.Index)
	if f.onApply != nil {
		f.onApply()
	}
	return err
}

func (f *fsm) setApplied(idx uint64) {
	f.mu.Lock()
	f.state.AppliedIndex = idx
	f.mu.Unlock()
}

// apply validates and applies one command. Invalid commands change nothing
// but the applied index, identically on every replica.
func (f *fsm) apply(cmd *messages.FSMCommand, index uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.state
	s.AppliedIndex = index
	switch c := cmd.Cmd.(type) {
	case *messages.FSMCommand_SetHosted:
		s.HostedModels = sortedUnique(c.SetHosted.GetModels())
		return nil
	case *messages.FSMCommand_AdvanceSlot:
		a := c.AdvanceSlot
		if a.GetCheckExpect() && a.GetExpectSlot() != s.Slot {
			return fmt.Errorf("consensus: advance_slot: expected slot %d, current is %d", a.GetExpectSlot(), s.Slot)
		}
		to := a.GetToSlot()
		if to == 0 {
			to = s.Slot + 1
		}
		if to < s.Slot {
			return fmt.Errorf("consensus: advance_slot: to_slot %d is behind current slot %d", to, s.Slot)
		}
		s.Slot = to
		return nil
	case *messages.FSMCommand_SetMembers:
		ms := make([]*messages.GroupMember, 0, len(c.SetMembers.GetMembers()))
		for _, m := range c.SetMembers.GetMembers() {
			if m.GetId() == "" {
				return errors.New("consensus: set_members: member with empty id")
			}
			ms = append(ms, proto.CloneOf(m))
		}
		slices.SortFunc(ms, func(a, b *messages.GroupMember) int { return cmpString(a.GetId(), b.GetId()) })
		s.Members = ms
		return nil
	case *messages.FSMCommand_SetAllocation:
		a := c.SetAllocation
		if err := validateAllocation(a); err != nil {
			return err
		}
		if a.GetExpectSlot() != s.Slot {
			return fmt.Errorf("consensus: set_allocation: expect_slot %d, current slot is %d", a.GetExpectSlot(), s.Slot)
		}
		s.Slot = a.GetSlot()
		s.FractionalModels = slices.Clone(a.GetModels())
		s.Fractional = slices.Clone(a.GetY())
		if a.GetSetHosted() {
			s.HostedModels = sortedUnique(a.GetHosted())
		}
		return nil
	default:
		return fmt.Errorf("%w (%T)", ErrUnknownCommand, cmd.Cmd)
	}
}

// validateAllocation checks an FSMSetAllocation; errors name the field.
func validateAllocation(a *messages.FSMSetAllocation) error {
	if a.GetSlot() <= a.GetExpectSlot() {
		return fmt.Errorf("consensus: set_allocation: slot %d must exceed expect_slot %d", a.GetSlot(), a.GetExpectSlot())
	}
	if len(a.GetModels()) != len(a.GetY()) {
		return fmt.Errorf("consensus: set_allocation: %d models but %d y values", len(a.GetModels()), len(a.GetY()))
	}
	seen := make(map[string]bool, len(a.GetModels()))
	for i, m := range a.GetModels() {
		if m == "" || seen[m] {
			return fmt.Errorf("consensus: set_allocation: models[%d]: %q empty or repeated", i, m)
		}
		seen[m] = true
	}
	for i, y := range a.GetY() {
		if !(y >= 0 && y <= 1) {
			return fmt.Errorf("consensus: set_allocation: y[%d]: %v outside [0,1]", i, y)
		}
	}
	return nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func sortedUnique(in []string) []string {
	out := slices.Clone(in)
	slices.Sort(out)
	out = slices.Compact(out)
	out = slices.DeleteFunc(out, func(s string) bool { return s == "" })
	if out == nil {
		out = []string{}
	}
	return out
}

// Snapshot implements raft.FSM: it captures a copy; Persist compresses it.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	return &fsmSnapshot{state: f.snapshotState()}, nil
}

// Restore implements raft.FSM.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	st, err := decodeSnapshot(rc)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.state = st
	f.mu.Unlock()
	if f.onApply != nil {
		f.onApply()
	}
	return nil
}

type fsmSnapshot struct{ state *messages.VertexState }

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := encodeSnapshot(sink, s.state); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() {}

// encodeSnapshot writes magic + zstd(protobuf(state)) to w.
func encodeSnapshot(w io.Writer, st *messages.VertexState) error {
	raw, err := proto.Marshal(st)
	if err != nil {
		return fmt.Errorf("consensus: snapshot marshal: %w", err)
	}
	if _, err := w.Write(snapshotMagic); err != nil {
		return err
	}
	enc, err := zstd.NewWriter(w, zstd.WithEncoderConcurrency(1))
	if err != nil {
		return err
	}
	if _, err := enc.Write(raw); err != nil {
		_ = enc.Close()
		return err
	}
	return enc.Close()
}

// decodeSnapshot reads what encodeSnapshot wrote; corrupt input is an error.
func decodeSnapshot(r io.Reader) (*messages.VertexState, error) {
	head := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(r, head); err != nil {
		return nil, fmt.Errorf("consensus: snapshot header: %w", err)
	}
	if !bytes.Equal(head, snapshotMagic) {
		return nil, fmt.Errorf("consensus: snapshot: bad magic %q", head)
	}
	dec, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxSnapshotSize))
	if err != nil {
		return nil, err
	}
	defer dec.Close()
	raw, err := io.ReadAll(io.LimitReader(dec, maxSnapshotSize+1))
	if err != nil {
		return nil, fmt.Errorf("consensus: snapshot decompress: %w", err)
	}
	if len(raw) > maxSnapshotSize {
		return nil, errors.New("consensus: snapshot too large")
	}
	var st messages.VertexState
	if err := proto.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("consensus: snapshot unmarshal: %w", err)
	}
	return &st, nil
}
