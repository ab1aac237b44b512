package allocator

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/klauspost/compress/zstd"
	"google.golang.org/protobuf/proto"

	"github.com/idn-net/idn/actors/scheduler"
	"github.com/idn-net/idn/messages"
	"github.com/idn-net/idn/policy/idn"
	"github.com/idn-net/idn/policy/infida"
)

// Metrics counts the control traffic of one allocator; safe for concurrent
// reads (exposed on /metrics by the node).
type Metrics struct {
	// Messages counts UpstreamControl and DownstreamControl messages sent.
	Messages atomic.Uint64
	// Batches counts ControlEnvelopes sent (one per neighbour per step).
	Batches atomic.Uint64
	// RawBytes and WireBytes are the marshalled batch sizes before and
	// after compression (WireBytes counts the envelope payload).
	RawBytes, WireBytes atomic.Uint64
	// PendingCarried counts out-of-order (z, gamma) entries sent upstream.
	PendingCarried atomic.Uint64
	// Compressed counts batches sent zstd-compressed.
	Compressed atomic.Uint64
	// Received counts envelopes received; Malformed and Stale those dropped.
	Received, Malformed, Stale atomic.Uint64
	// Timeouts counts slots stepped before every gamma^{K*} arrived;
	// MissingTypes the request types missing at those steps.
	Timeouts, MissingTypes atomic.Uint64
	// Slots counts the slots this allocator stepped.
	Slots atomic.Uint64
	// NoPeer counts batches not sent for lack of a live member at the
	// destination vertex.
	NoPeer atomic.Uint64
	// CostBatches, CostEntries, CostRawBytes and CostWireBytes count the
	// serving-cost announcements sent (Sec. III-E), kept apart from the
	// subgradient traffic above; CostMalformed those received and refused.
	CostBatches, CostEntries, CostRawBytes, CostWireBytes, CostMalformed atomic.Uint64
}

// DefaultSlotLength is the INFIDA slot of paper 000 Sec. VI (1 minute),
// the default a node configuration gives SlotLength.
const DefaultSlotLength = time.Minute

// Config configures an allocator actor.
type Config struct {
	// Instance is the IDN problem (topology, catalog, request types).
	Instance *idn.Instance
	// Vertex is this allocator's vertex index.
	Vertex int
	// Eta is the INFIDA learning rate.
	Eta float64
	// Timeout bounds how long a slot waits for control messages before the
	// vertex steps with what it has (default 5 s).
	Timeout time.Duration
	// CompressAbove is the marshalled batch size above which a batch is
	// zstd-compressed (default 512 bytes; negative: never).
	CompressAbove int
	// Y, when non-nil, restores y^v (aligned with the vertex's
	// infida.VertexState.Models) instead of the Lemma E.5 initial state.
	Y []float64
	// Committer, when set, is the vertex's Raft group: after each step the
	// actor commits y^v and the slot counter (FSMSetAllocation, a
	// compare-and-set on the slot) from a goroutine it owns, so a new
	// leader continues from the last committed state (restore it with
	// RestoreY). Nil: nothing is committed.
	Committer Committer
	// CommittedSlot is the FSM slot counter at start (the number of slots
	// committed), the expect_slot of the first commit.
	CommittedSlot uint64
	// SlotLength, when > 0, makes the actor run its own slot timer: slot s
	// starts at Epoch + s*SlotLength (a common clock, so vertices agree on
	// slot numbers), with the measurements returned by Measure. 0: slots
	// are started by StartSlot messages only (tests, simulators).
	SlotLength time.Duration
	Epoch      time.Time
	// Measure returns r_rho and l_{rho,m} of the slot that just ended; it
	// is called from the actor and must not block.
	Measure func(slot int64) ([]float64, idn.Loads)
	// SampleEvery is the refresh period B of Algorithm 1 (x^v = DepRound(y^v)
	// after every SampleEvery-th slot, committed with y^v); 0 never samples.
	// Rand is the DepRound randomness (required when SampleEvery > 0) and
	// Residual its residual mode.
	SampleEvery int
	Rand        *rand.Rand
	Residual    infida.ResidualMode
	// Metrics receives the counters (may be nil).
	Metrics *Metrics
	// OnSlot is called from the actor with each slot's result (may be nil).
	OnSlot func(Result)
	// Log receives warnings (may be nil).
	Log *slog.Logger
	// Hosted is x^v at start (catalog names), the allocation the vertex
	// announces downstream until HostedModels replaces it.
	Hosted []string
	// Scheduler, when set, receives scheduler.UpstreamCosts whenever the
	// cheapest upstream alternatives change (the vertex's own scheduler).
	Scheduler *actor.PID
}

// HostedModels replaces x^v (catalog names, from the replicated state): the
// vertex's serving-cost announcements follow it.
type HostedModels struct {
	Models []string
}

// Peers tells the allocator where the allocators of the other vertices are.
type Peers struct {
	// ByVertex maps vertex index to allocator PID.
	ByVertex map[int]*actor.PID
}

// StartSlot starts slot Slot with the vertex's measurements (see Core.Start).
type StartSlot struct {
	Slot int64
	R    []float64
	L    idn.Loads
}

type slotTimeout struct{ slot int64 }

type slotTick struct{}

type committed struct {
	slot    uint64
	sampled *Result // the x^v this commit carried, if any
	err     error
}

// Committer is what the actor needs of the vertex's Raft group
// (consensus.Group implements it).
type Committer interface {
	Apply(cmd *messages.FSMCommand, timeout time.Duration) error
}

// ModelNames returns the catalog names of vertex v's non-repository
// models, aligned with infida.NewVertexState(in, v).Models: the keys y^v is
// committed under.
func ModelNames(in *idn.Instance, v int) []string {
	st := infida.NewVertexState(in, v)
	out := make([]string, len(st.Models))
	for i, m := range st.Models {
		out[i] = in.Catalog.Models[m].Name
	}
	return out
}

func repoModels(in *idn.Instance, v int) []string {
	var out []string
	for m := 0; m < in.NM; m++ {
		if in.Omega[in.Index(v, m)] {
			out = append(out, in.Catalog.Models[m].Name)
		}
	}
	return out
}

// RestoreY returns y^v of vertex v from a committed VertexState (nil when
// nothing was committed yet or the models do not match the instance).
func RestoreY(in *idn.Instance, v int, st *messages.VertexState) []float64 {
	names := ModelNames(in, v)
	if st == nil || len(st.GetFractional()) != len(names) || len(st.GetFractionalModels()) != len(names) {
		return nil
	}
	y := make([]float64, len(names))
	for i, n := range names {
		if st.FractionalModels[i] != n || !(st.Fractional[i] > 0 && st.Fractional[i] <= 1) {
			return nil
		}
		y[i] = st.Fractional[i]
	}
	return y
}

// Actor is the allocator actor of one vertex: a thin shell over Core.
type Actor struct {
	cfg   Config
	core  *Core
	peers map[int]*actor.PID
	timer *time.Timer
	enc   *zstd.Encoder
	dec   *zstd.Decoder
	log   *slog.Logger

	names     []string
	repo      []string // repository models of the vertex (always hosted)
	committed uint64   // FSM slot counter as last known
	inflight  bool
	queued    *Result // latest result waiting for the in-flight commit
	sampled   *Result // latest sampled x^v not yet committed
	commits   sync.WaitGroup
	tick      *time.Timer
	stopped   bool

	ann      *Announcer
	lastBest map[string]float64
}

// maxDecoded bounds a decompressed control batch.
const maxDecoded = 16 << 20

// New returns the actor for cfg.
func New(cfg Config) (*Actor, error) {
	if cfg.Instance == nil || cfg.Vertex < 0 || cfg.Vertex >= cfg.Instance.NV {
		return nil, fmt.Errorf("allocator: vertex: %d outside the instance", cfg.Vertex)
	}
	if !(cfg.Eta > 0) {
		return nil, fmt.Errorf("allocator: eta: %v must be > 0", cfg.Eta)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.CompressAbove == 0 {
		cfg.CompressAbove = 512
	}
	if cfg.Metrics == nil {
		cfg.Metrics = &Metrics{}
	}
	lg := cfg.Log
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	core := NewCore(cfg.Instance, cfg.Vertex, cfg.Eta)
	if cfg.Y != nil {
		if len(cfg.Y) != len(core.state.Y) {
			return nil, fmt.Errorf("allocator: y: %d entries, vertex %d has %d models", len(cfg.Y), cfg.Vertex, len(core.state.Y))
		}
		for i, y := range cfg.Y {
			if !(y > 0 && y <= 1) {
				return nil, fmt.Errorf("allocator: y[%d]: %v outside (0,1]", i, y)
			}
		}
		copy(core.state.Y, cfg.Y)
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, fmt.Errorf("allocator: zstd encoder: %w", err)
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxDecoded))
	if err != nil {
		enc.Close()
		return nil, fmt.Errorf("allocator: zstd decoder: %w", err)
	}
	if cfg.SampleEvery < 0 || (cfg.SampleEvery > 0 && cfg.Rand == nil) {
		enc.Close()
		dec.Close()
		return nil, fmt.Errorf("allocator: sample_every: %d needs a rand source and must be >= 0", cfg.SampleEvery)
	}
	if cfg.SlotLength > 0 && cfg.Measure == nil {
		enc.Close()
		dec.Close()
		return nil, errors.New("allocator: measure: required with a slot length")
	}
	ann, err := NewAnnouncer(cfg.Instance, cfg.Vertex)
	if err != nil {
		enc.Close()
		dec.Close()
		return nil, err
	}
	ann.SetHosted(modelIndices(cfg.Instance, cfg.Hosted))
	return &Actor{cfg: cfg, core: core, enc: enc, dec: dec, log: lg, ann: ann,
		names: ModelNames(cfg.Instance, cfg.Vertex), repo: repoModels(cfg.Instance, cfg.Vertex), committed: cfg.CommittedSlot}, nil
}

// Receive implements actor.Actor.
func (a *Actor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.armTick(ctx)
		a.initialSample(ctx)
	case *actor.Stopping:
		a.stopped = true
		a.stopTimer()
		if a.tick != nil {
			a.tick.Stop()
		}
	case *actor.Stopped:
		a.commits.Wait()
		a.enc.Close()
		a.dec.Close()
	case *slotTick:
		a.armTick(ctx)
		s := a.slotAt(time.Now()) - 1 // the slot that just ended
		if s >= 0 && s > a.core.Slot() {
			r, l := a.cfg.Measure(s)
			ctx.Send(ctx.Self(), &StartSlot{Slot: s, R: r, L: l})
		}
	case *committed:
		a.inflight = false
		if m.err != nil {
			a.log.Warn("allocator: commit", "err", m.err)
		} else {
			a.committed = m.slot
			if m.sampled != nil && a.sampled == m.sampled {
				a.sampled = nil // committed; a newer sample stays pending
			}
		}
		if q := a.queued; q != nil {
			a.queued = nil
			a.commit(ctx, *q)
		}
		return
	case *Peers:
		a.peers = m.ByVertex
		a.announce(ctx, true)
	case *HostedModels:
		a.ann.SetHosted(modelIndices(a.cfg.Instance, m.Models))
		a.announce(ctx, false)
	case *scheduler.Exhausted:
		a.ann.SetExhausted(modelIndices(a.cfg.Instance, m.Models))
		a.announce(ctx, false)
	case *StartSlot:
		if a.core.started {
			a.step(ctx) // previous slot never completed: step with what it has
		}
		outs, err := a.core.Start(m.Slot, m.R, m.L)
		if err != nil {
			a.log.Warn("allocator: start slot", "err", err)
			return
		}
		a.stopTimer()
		self, sys, slot := ctx.Self(), ctx.ActorSystem(), m.Slot
		a.timer = time.AfterFunc(a.cfg.Timeout, func() { sys.Root.Send(self, &slotTimeout{slot: slot}) })
		a.send(ctx, outs)
		a.announce(ctx, true) // once per slot: heals lost announcements and new leaders
	case *slotTimeout:
		if m.slot == a.core.Slot() && a.core.started {
			a.step(ctx)
		}
	case *messages.ControlEnvelope:
		a.cfg.Metrics.Received.Add(1)
		b, err := a.decode(m)
		if err == nil && b.CostsUpdate {
			if cerr := a.ann.FromParent(int(b.FromVertex), b); cerr != nil {
				a.cfg.Metrics.CostMalformed.Add(1)
				a.log.Warn("allocator: serving-cost announcement dropped", "err", cerr)
			} else {
				a.announce(ctx, false)
			}
			b.CostsUpdate, b.Costs = false, nil
			if len(b.Up)+len(b.Down) == 0 {
				return
			}
		}
		if err == nil {
			var outs []Out
			outs, err = a.core.Handle(b)
			a.send(ctx, outs)
		}
		if err != nil {
			if errors.Is(err, ErrStale) {
				a.cfg.Metrics.Stale.Add(1)
			} else {
				a.cfg.Metrics.Malformed.Add(1)
			}
			a.log.Warn("allocator: control batch dropped", "err", err)
			return
		}
	}
	if a.core.Done() {
		a.step(ctx)
	}
}

func (a *Actor) slotAt(t time.Time) int64 {
	return int64(t.Sub(a.cfg.Epoch) / a.cfg.SlotLength)
}

// armTick schedules the next slot boundary.
func (a *Actor) armTick(ctx actor.Context) {
	if a.cfg.SlotLength <= 0 || a.stopped {
		return
	}
	now := time.Now()
	next := a.cfg.Epoch.Add(time.Duration(a.slotAt(now)+1) * a.cfg.SlotLength)
	self, sys := ctx.Self(), ctx.ActorSystem()
	a.tick = time.AfterFunc(next.Sub(now), func() { sys.Root.Send(self, &slotTick{}) })
}

// commit hands the slot's y^v to Raft from an owned goroutine (Apply
// blocks; Receive never does); the outcome returns as a message.
// Only one commit is in flight; a newer result waits (replacing an older
// waiting one), and a sampled x^v is carried until it is committed.
func (a *Actor) commit(ctx actor.Context, res Result) {
	if a.cfg.Committer == nil || a.stopped {
		return
	}
	if res.Sampled {
		r := res
		a.sampled = &r
	}
	if a.inflight {
		a.queued = &res
		return
	}
	cmd := &messages.FSMCommand{Cmd: &messages.FSMCommand_SetAllocation{SetAllocation: &messages.FSMSetAllocation{
		ExpectSlot: a.committed, Slot: uint64(res.Slot) + 1, Models: a.names, Y: res.Y}}}
	sampled := a.sampled
	if sampled != nil {
		// x^v as model names: the sampled free models plus the repository
		// models, which are always hosted (omega, eq. 3).
		sa := cmd.GetSetAllocation()
		sa.SetHosted = true
		sa.Hosted = append([]string{}, a.repo...)
		for i, x := range sampled.X {
			if x > 0.5 {
				sa.Hosted = append(sa.Hosted, a.names[i])
			}
		}
	}
	if cmd.GetSetAllocation().Slot <= a.committed {
		return
	}
	a.inflight = true
	self, sys, c := ctx.Self(), ctx.ActorSystem(), a.cfg.Committer
	a.commits.Add(1)
	go func() {
		defer a.commits.Done()
		err := c.Apply(cmd, 5*time.Second)
		sys.Root.Send(self, &committed{slot: cmd.GetSetAllocation().Slot, sampled: sampled, err: err})
	}()
}

func (a *Actor) stopTimer() {
	if a.timer != nil {
		a.timer.Stop()
		a.timer = nil
	}
}

func (a *Actor) step(ctx actor.Context) {
	a.stopTimer()
	var rng *rand.Rand
	if a.cfg.SampleEvery > 0 && (a.core.Slot()+1)%int64(a.cfg.SampleEvery) == 0 {
		rng = a.cfg.Rand
	}
	res := a.core.StepSample(rng, a.cfg.Residual)
	a.cfg.Metrics.Slots.Add(1)
	a.commit(ctx, res)
	if res.Missing > 0 {
		a.cfg.Metrics.Timeouts.Add(1)
		a.cfg.Metrics.MissingTypes.Add(uint64(res.Missing))
	}
	if a.cfg.OnSlot != nil {
		a.cfg.OnSlot(res)
	}
}

func (a *Actor) decode(e *messages.ControlEnvelope) (*messages.ControlBatch, error) {
	data := e.Batch
	if e.Zstd {
		var err error
		if data, err = a.dec.DecodeAll(e.Batch, nil); err != nil {
			return nil, fmt.Errorf("%w: batch: zstd: %w", ErrMalformed, err)
		}
	}
	b := &messages.ControlBatch{}
	if err := proto.Unmarshal(data, b); err != nil {
		return nil, fmt.Errorf("%w: batch: %w", ErrMalformed, err)
	}
	if b.Slot != e.Slot || b.FromVertex != e.FromVertex {
		return nil, fmt.Errorf("%w: slot/from_vertex: envelope %d/%d, batch %d/%d", ErrMalformed, e.Slot, e.FromVertex, b.Slot, b.FromVertex)
	}
	return b, nil
}

// initialSample gives a vertex starting from the Lemma E.5 initial state
// (nothing committed yet) its first x^v = DepRound(y^v) at once, as
// policy/infida.New does, instead of hosting only the repository models
// until the first refresh period ends.
func (a *Actor) initialSample(ctx actor.Context) {
	if a.cfg.Y != nil || a.cfg.SampleEvery <= 0 || a.cfg.Committer == nil || a.cfg.Rand == nil {
		return
	}
	st := a.core.state
	st.Sample(a.cfg.Rand, a.cfg.Residual, func(i int) float64 { return st.Y[i] })
	hosted := append([]string{}, a.repo...)
	for i, x := range st.X {
		if x > 0.5 {
			hosted = append(hosted, a.names[i])
		}
	}
	cmd := &messages.FSMCommand{Cmd: &messages.FSMCommand_SetHosted{SetHosted: &messages.FSMSetHosted{Models: hosted}}}
	c := a.cfg.Committer
	lg := a.log
	a.commits.Add(1)
	go func() {
		defer a.commits.Done()
		if err := c.Apply(cmd, 5*time.Second); err != nil {
			lg.Warn("allocator: initial x^v", "err", err)
		}
	}()
}

// announce sends the serving-cost announcements that changed (all when
// force) to the children, and the cheapest upstream alternatives to the
// vertex's scheduler when they changed (or force).
func (a *Actor) announce(ctx actor.Context, force bool) {
	if a.stopped {
		return
	}
	a.send(ctx, a.ann.Announce(a.core.Slot(), force))
	if a.cfg.Scheduler == nil {
		return
	}
	best := a.ann.Best()
	if !force && maps.Equal(best, a.lastBest) {
		return
	}
	a.lastBest = best
	ctx.Send(a.cfg.Scheduler, &scheduler.UpstreamCosts{Best: best})
}

// modelIndices maps catalog names to indices, skipping unknown names.
func modelIndices(in *idn.Instance, names []string) []int {
	out := make([]int, 0, len(names))
	for _, n := range names {
		if i, ok := in.Catalog.ModelIndex(n); ok {
			out = append(out, i)
		}
	}
	return out
}

func (a *Actor) send(ctx actor.Context, outs []Out) {
	for _, o := range outs {
		pid := a.peers[o.To]
		if pid == nil {
			// No live member known at that vertex (yet): the receiver's
			// slot timeout absorbs a missing control batch, and
			// announcements are repeated every slot.
			a.log.Debug("allocator: no peer for vertex", "vertex", o.To)
			a.cfg.Metrics.NoPeer.Add(1)
			continue
		}
		raw, err := proto.Marshal(o.Batch)
		if err != nil {
			a.log.Warn("allocator: marshal", "err", err)
			continue
		}
		env := &messages.ControlEnvelope{Slot: o.Batch.Slot, FromVertex: o.Batch.FromVertex, Batch: raw, RawSize: int64(len(raw))}
		if a.cfg.CompressAbove > 0 && len(raw) > a.cfg.CompressAbove {
			if z := a.enc.EncodeAll(raw, nil); len(z) < len(raw) {
				env.Batch, env.Zstd = z, true
				a.cfg.Metrics.Compressed.Add(1)
			}
		}
		if o.Batch.CostsUpdate {
			a.cfg.Metrics.CostBatches.Add(1)
			a.cfg.Metrics.CostEntries.Add(uint64(len(o.Batch.Costs)))
			a.cfg.Metrics.CostRawBytes.Add(uint64(len(raw)))
			a.cfg.Metrics.CostWireBytes.Add(uint64(len(env.Batch)))
			ctx.Send(pid, env)
			continue
		}
		a.cfg.Metrics.Messages.Add(uint64(len(o.Batch.Up) + len(o.Batch.Down)))
		for _, u := range o.Batch.Up {
			a.cfg.Metrics.PendingCarried.Add(uint64(len(u.Pending)))
		}
		a.cfg.Metrics.Batches.Add(1)
		a.cfg.Metrics.RawBytes.Add(uint64(len(raw)))
		a.cfg.Metrics.WireBytes.Add(uint64(len(env.Batch)))
		ctx.Send(pid, env)
	}
}
