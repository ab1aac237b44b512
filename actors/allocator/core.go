// Package allocator runs INFIDA (paper 000, Si Salem et al., "Towards
// Inference Delivery Networks", Algorithm 1) for one vertex of the IDN as an
// actor: each slot it takes part in the distributed subgradient computation
// of Sec. IV-B by exchanging control messages (messages/control.proto) with
// the allocators of the other vertices on its request types' routing paths,
// accumulates its subgradient g^v (eq. 18, as the sum of the h_m of eq. 19)
// and takes the mirror-ascent step with projection of policy/infida.
//
// Core is the pure per-vertex protocol state machine (no goroutines, no
// clock); Actor is the thin protoactor shell that batches a step's outgoing
// messages per neighbour, compresses large batches with zstd, and enforces
// the slot timeout. Both delegate the arithmetic to policy/infida
// (LocalEntries, UpstreamStep, DownstreamStep, VertexState.Step), so the
// result equals the centralised infida.Subgradient on the same inputs.
package allocator

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/idn-net/idn/messages"
	"github.com/idn-net/idn/policy/idn"
	"github.com/idn-net/idn/policy/infida"
)

// ErrMalformed marks a control message that fails validation.
var ErrMalformed = errors.New("allocator: malformed control message")

// Out is one batch to send to the allocator of vertex To.
type Out struct {
	To    int
	Batch *messages.ControlBatch
}

// Result is what a vertex reports at the end of a slot.
type Result struct {
	// Slot is the slot number.
	Slot int64
	// Vertex is the vertex index.
	Vertex int
	// G is g^v indexed by model (length in.NM).
	G []float64
	// Y is y^v after the step, aligned with State.Models.
	Y []float64
	// X is x^v after the step when it was re-sampled (Sampled), aligned
	// with State.Models.
	X       []float64
	Sampled bool
	// Missing is the number of request types through this vertex whose
	// gamma^{K*} did not arrive before the timeout (0 on a complete slot).
	Missing int
}

// Core is the per-vertex protocol of paper 000 Sec. IV-B for one vertex.
type Core struct {
	in    *idn.Instance
	v     int
	eta   float64
	state *infida.VertexState
	// pos[rho] is v's position on type rho's path, -1 if not on it.
	pos   []int
	ntype int // types through v

	slot    int64
	started bool
	r       []float64
	l       idn.Loads
	yflat   []float64
	g       []float64
	got     []bool
	ngot    int
	pending []*messages.ControlBatch // batches of the current/next slot received before Start
	out     map[int]*messages.ControlBatch
}

// NewCore returns the protocol state of vertex v with learning rate eta and
// INFIDA state initialised per Lemma E.5 (infida.NewVertexState).
func NewCore(in *idn.Instance, v int, eta float64) *Core {
	c := &Core{in: in, v: v, eta: eta, state: infida.NewVertexState(in, v), slot: -1}
	c.pos = make([]int, len(in.Types))
	for rho, t := range in.Types {
		c.pos[rho] = -1
		for j, u := range t.Path {
			if u == v {
				c.pos[rho] = j
				c.ntype++
				break
			}
		}
	}
	c.yflat = in.OmegaAlloc()
	c.g = make([]float64, in.NM)
	c.got = make([]bool, len(in.Types))
	return c
}

// State returns the vertex's INFIDA state (y^v, x^v).
func (c *Core) State() *infida.VertexState { return c.state }

// Slot returns the current slot, -1 before the first.
func (c *Core) Slot() int64 { return c.slot }

// Done reports whether every type through the vertex has completed in the
// current slot (the vertex may step).
func (c *Core) Done() bool { return c.started && c.ngot == c.ntype }

// Start begins slot s with the vertex's measurements: r[rho] (used for the
// types entering at v) and l[rho][k] (used for v's candidates), i.e. r_rho
// and l^{t,v}_{rho,m} of paper 000 Sec. III-D. It starts the upstream
// messages of the types entering at v and processes batches of s received
// early. It returns the batches to send.
func (c *Core) Start(s int64, r []float64, l idn.Loads) ([]Out, error) {
	if len(r) != len(c.in.Types) || len(l) != len(c.in.Types) {
		return nil, fmt.Errorf("allocator: start slot %d: r has %d types, l %d, want %d", s, len(r), len(l), len(c.in.Types))
	}
	for rho, t := range c.in.Types {
		if len(l[rho]) != len(t.Cands) {
			return nil, fmt.Errorf("allocator: start slot %d: l[%d] has %d candidates, want %d", s, rho, len(l[rho]), len(t.Cands))
		}
	}
	if s <= c.slot {
		return nil, fmt.Errorf("allocator: start slot %d: not after current slot %d", s, c.slot)
	}
	c.slot, c.started, c.r, c.l, c.ngot = s, true, r, l, 0
	for i := range c.g {
		c.g[i] = 0
	}
	for i := range c.got {
		c.got[i] = false
	}
	base := c.in.Index(c.v, 0)
	for i, m := range c.state.Models {
		c.yflat[base+m] = c.state.Y[i]
	}
	c.out = map[int]*messages.ControlBatch{}
	for rho := range c.in.Types {
		if c.pos[rho] == 0 {
			c.upstream(&infida.UpMsg{Type: rho, R: r[rho]}, 0)
		}
	}
	early := c.pending
	c.pending = nil
	for _, b := range early {
		if b.Slot == s {
			c.handle(b)
		} else if b.Slot > s {
			c.pending = append(c.pending, b)
		}
	}
	return c.flush(), nil
}

// Handle processes one received batch and returns the batches to send. A
// batch of an older slot is dropped (ErrStale); one of a later slot, or
// one arriving before Start, is kept until that slot starts.
func (c *Core) Handle(b *messages.ControlBatch) ([]Out, error) {
	if err := Validate(c.in, b); err != nil {
		return nil, err
	}
	switch {
	case b.Slot < c.slot || (b.Slot == c.slot && !c.started):
		return nil, fmt.Errorf("%w: batch of slot %d from vertex %d, current slot %d", ErrStale, b.Slot, b.FromVertex, c.slot)
	case b.Slot > c.slot || !c.started:
		if len(c.pending) >= maxEarly {
			return nil, fmt.Errorf("%w: slot %d: more than %d early batches", ErrStale, b.Slot, maxEarly)
		}
		c.pending = append(c.pending, b)
		return nil, nil
	}
	c.out = map[int]*messages.ControlBatch{}
	c.handle(b)
	return c.flush(), nil
}

// ErrStale marks a control batch that arrived too late (or too early) to be used.
var ErrStale = errors.New("allocator: stale control batch")

const maxEarly = 1024

func (c *Core) handle(b *messages.ControlBatch) {
	for _, u := range b.Up {
		rho := int(u.Type)
		if c.pos[rho] != int(u.Hop) || c.got[rho] {
			continue // not for us (Validate checked the path) or duplicate
		}
		msg := &infida.UpMsg{Type: rho, R: u.R, Z: u.Z}
		for _, e := range u.Pending {
			msg.Pending = append(msg.Pending, infida.Entry{Z: e.Z, Gamma: e.Gamma, Pos: int(e.Pos), M: int(e.Model)})
		}
		c.upstream(msg, int(u.Hop))
	}
	for _, d := range b.Down {
		rho := int(d.Type)
		if c.pos[rho] != int(d.Hop) || c.got[rho] {
			continue
		}
		c.complete(rho, int(d.Hop), int(d.DoneHop), d.GammaK)
	}
}

// upstream is step 2 at position j: merge local entries, add to Z in cost
// order, then either forward upstream or turn the message around.
func (c *Core) upstream(msg *infida.UpMsg, j int) {
	rho := msg.Type
	// l^v_{rho,m} <= r_rho (eq. 7): a vertex measures its models' spare
	// capacity without knowing r_rho of types entering elsewhere; r_rho
	// arrives here, with the upstream message.
	for k, cd := range c.in.Types[rho].Cands {
		if cd.V == c.v && c.l[rho][k] > msg.R {
			c.l[rho][k] = msg.R
		}
	}
	infida.UpstreamStep(msg, infida.LocalEntries(c.in, rho, j, c.l[rho], c.yflat), c.in.UpstreamMinCost(rho, j))
	path := c.in.Types[rho].Path
	if !msg.Done && j == len(path)-1 {
		// Cannot happen on a valid instance (the repository's z = r); close
		// the type with the last pending cost so nobody waits forever.
		msg.Done = true
		msg.GammaK = math.Inf(1)
		if n := len(msg.Pending); n > 0 {
			msg.GammaK = msg.Pending[n-1].Gamma
		}
	}
	if !msg.Done {
		u := &messages.UpstreamControl{Type: int32(rho), R: msg.R, Z: msg.Z, Hop: int32(j + 1)}
		for _, e := range msg.Pending {
			u.Pending = append(u.Pending, &messages.ControlEntry{Z: e.Z, Gamma: e.Gamma, Pos: int32(e.Pos), Model: int32(e.M)})
		}
		c.batch(path[j+1]).Up = append(c.batch(path[j+1]).Up, u)
		return
	}
	c.complete(rho, j, j, msg.GammaK)
}

// complete is steps 3-4 at position j: add h_m (eq. 19) when j <= doneHop
// and pass gamma^{K*} on, toward the entry below doneHop and toward the
// repository above it.
func (c *Core) complete(rho, j, doneHop int, gammaK float64) {
	c.got[rho] = true
	c.ngot++
	if j <= doneHop {
		infida.DownstreamStep(c.in, rho, j, c.l[rho], gammaK, c.g)
	}
	path := c.in.Types[rho].Path
	if j <= doneHop && j > 0 {
		b := c.batch(path[j-1])
		b.Down = append(b.Down, &messages.DownstreamControl{Type: int32(rho), GammaK: gammaK, Hop: int32(j - 1), DoneHop: int32(doneHop)})
	}
	if j >= doneHop && j < len(path)-1 {
		b := c.batch(path[j+1])
		b.Down = append(b.Down, &messages.DownstreamControl{Type: int32(rho), GammaK: gammaK, Hop: int32(j + 1), DoneHop: int32(doneHop)})
	}
}

func (c *Core) batch(to int) *messages.ControlBatch {
	b := c.out[to]
	if b == nil {
		b = &messages.ControlBatch{Slot: c.slot, FromVertex: int32(c.v)}
		c.out[to] = b
	}
	return b
}

func (c *Core) flush() []Out {
	var outs []Out
	for to := 0; to < c.in.NV; to++ {
		if b := c.out[to]; b != nil {
			outs = append(outs, Out{To: to, Batch: b})
		}
	}
	c.out = nil
	return outs
}

// Step ends the slot: the mirror-ascent step with projection (Algorithm 1
// lines 3-6) with the accumulated g^v, complete or not (after a timeout the
// vertex steps with what it has). It returns the slot's result.
func (c *Core) Step() Result {
	return c.StepSample(nil, 0)
}

// StepSample is Step followed, when rng is non-nil, by x^v = DepRound(y^v)
// (Algorithm 1 line 7, Sec. IV-C) with the residual mode and the score
// policy/infida.Infida uses (g^v, ties by y^v).
func (c *Core) StepSample(rng *rand.Rand, mode infida.ResidualMode) Result {
	missing := c.ntype - c.ngot
	c.state.Step(c.g, c.eta)
	c.started = false
	res := Result{Slot: c.slot, Vertex: c.v, G: append([]float64(nil), c.g...),
		Y: append([]float64(nil), c.state.Y...), Missing: missing}
	if rng != nil {
		st, g := c.state, c.g
		st.Sample(rng, mode, func(i int) float64 { return g[st.Models[i]] + st.Y[i]*1e-12 })
		res.X, res.Sampled = append([]float64(nil), st.X...), true
	}
	return res
}

// Validate checks a control batch received from the wire against the
// instance: indices in range, the recipient on the type's path, finite
// non-negative quantities. Errors wrap ErrMalformed and name the field.
func Validate(in *idn.Instance, b *messages.ControlBatch) error {
	if b == nil {
		return fmt.Errorf("%w: batch: nil", ErrMalformed)
	}
	if b.Slot < 0 {
		return fmt.Errorf("%w: slot: %d is negative", ErrMalformed, b.Slot)
	}
	if b.FromVertex < 0 || int(b.FromVertex) >= in.NV {
		return fmt.Errorf("%w: from_vertex: %d outside [0,%d)", ErrMalformed, b.FromVertex, in.NV)
	}
	fin := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) && x >= 0 }
	typeHop := func(field string, i int, typ, hop int32) error {
		if typ < 0 || int(typ) >= len(in.Types) {
			return fmt.Errorf("%w: %s[%d].type: %d outside [0,%d)", ErrMalformed, field, i, typ, len(in.Types))
		}
		if hop < 0 || int(hop) >= len(in.Types[typ].Path) {
			return fmt.Errorf("%w: %s[%d].hop: %d outside path of %d vertices", ErrMalformed, field, i, hop, len(in.Types[typ].Path))
		}
		return nil
	}
	for i, u := range b.Up {
		if u == nil {
			return fmt.Errorf("%w: up[%d]: nil", ErrMalformed, i)
		}
		if err := typeHop("up", i, u.Type, u.Hop); err != nil {
			return err
		}
		if !fin(u.R) || !fin(u.Z) {
			return fmt.Errorf("%w: up[%d].r/z: %v/%v must be finite and >= 0", ErrMalformed, i, u.R, u.Z)
		}
		if len(u.Pending) > len(in.Types[u.Type].Cands) {
			return fmt.Errorf("%w: up[%d].pending: %d entries, type has %d candidates", ErrMalformed, i, len(u.Pending), len(in.Types[u.Type].Cands))
		}
		for k, e := range u.Pending {
			if e == nil || !fin(e.Z) || !fin(e.Gamma) || e.Pos < 0 || int(e.Pos) >= len(in.Types[u.Type].Path) || e.Model < 0 || int(e.Model) >= in.NM {
				return fmt.Errorf("%w: up[%d].pending[%d]: invalid entry", ErrMalformed, i, k)
			}
		}
	}
	for i, d := range b.Down {
		if d == nil {
			return fmt.Errorf("%w: down[%d]: nil", ErrMalformed, i)
		}
		if err := typeHop("down", i, d.Type, d.Hop); err != nil {
			return err
		}
		if d.DoneHop < 0 || int(d.DoneHop) >= len(in.Types[d.Type].Path) {
			return fmt.Errorf("%w: down[%d].done_hop: %d outside path", ErrMalformed, i, d.DoneHop)
		}
		if math.IsNaN(d.GammaK) || d.GammaK < 0 {
			return fmt.Errorf("%w: down[%d].gamma_k: %v must be >= 0", ErrMalformed, i, d.GammaK)
		}
	}
	return nil
}
