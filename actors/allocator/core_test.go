package allocator

import (
	"errors"
	"math"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/idn-net/idn/messages"
	"github.com/idn-net/idn/policy/idn/idntest"
	"github.com/idn-net/idn/policy/sim"
)

func TestValidateNamesFields(t *testing.T) {
	in, _, _ := idntest.Random(sim.NewRand(1), 3, 1, 2, 5)
	cases := map[string]*messages.ControlBatch{
		"batch: nil":    nil,
		"from_vertex":   {FromVertex: 7},
		"slot":          {Slot: -1},
		"up[0].type":    {Up: []*messages.UpstreamControl{{Type: 99}}},
		"up[0].hop":     {Up: []*messages.UpstreamControl{{Hop: 99}}},
		"up[0].r/z":     {Up: []*messages.UpstreamControl{{R: math.NaN()}}},
		"up[0]: nil":    {Up: []*messages.UpstreamControl{nil}},
		"down[0].hop":   {Down: []*messages.DownstreamControl{{Hop: -1}}},
		"down[0].gamma": {Down: []*messages.DownstreamControl{{GammaK: math.NaN()}}},
		"pending[0]":    {Up: []*messages.UpstreamControl{{Pending: []*messages.ControlEntry{{Model: 1000}}}}},
	}
	for field, b := range cases {
		err := Validate(in, b)
		if !errors.Is(err, ErrMalformed) || !contains(err.Error(), field) {
			t.Errorf("%s: got %v", field, err)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// Arbitrary bytes decoded as a control batch never panic the core.
func FuzzHandle(f *testing.F) {
	in, r, l := idntest.Random(sim.NewRand(2), 3, 2, 2, 5)
	seed, _ := proto.Marshal(&messages.ControlBatch{Slot: 0, FromVertex: 1,
		Up:   []*messages.UpstreamControl{{Type: 0, R: 3, Z: 1, Hop: 1, Pending: []*messages.ControlEntry{{Z: 1, Gamma: 2}}}},
		Down: []*messages.DownstreamControl{{Type: 0, GammaK: 4, Hop: 0}}})
	f.Add(seed)
	f.Fuzz(func(t *testing.T, data []byte) {
		b := &messages.ControlBatch{}
		if proto.Unmarshal(data, b) != nil {
			return
		}
		for v := 0; v < in.NV; v++ {
			c := NewCore(in, v, 1e-3)
			if _, err := c.Start(0, r, l); err != nil {
				t.Fatal(err)
			}
			_, _ = c.Handle(b)
			_ = c.Step()
		}
	})
}

// A batch of an already stepped slot is stale; one of a later slot waits.
func TestStaleAndEarly(t *testing.T) {
	in, r, l := idntest.Random(sim.NewRand(3), 3, 1, 2, 5)
	c := NewCore(in, 0, 1e-3)
	if _, err := c.Handle(&messages.ControlBatch{Slot: 1, FromVertex: 1}); err != nil {
		t.Fatalf("early batch: %v", err)
	}
	if _, err := c.Start(0, r, l); err != nil {
		t.Fatal(err)
	}
	c.Step()
	if _, err := c.Handle(&messages.ControlBatch{Slot: 0, FromVertex: 1}); !errors.Is(err, ErrStale) {
		t.Fatalf("late batch: %v", err)
	}
	if _, err := c.Start(0, r, l); err == nil {
		t.Fatal("slot restarted")
	}
	if _, err := c.Start(1, r[:0], l); err == nil {
		t.Fatal("short r accepted")
	}
}
