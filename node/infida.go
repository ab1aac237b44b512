package node

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/idn-net/idn/actors/allocator"
	"github.com/idn-net/idn/actors/scheduler"
	"github.com/idn-net/idn/actors/view"
	"github.com/idn-net/idn/gossip"
	"github.com/idn-net/idn/gpu"
	"github.com/idn-net/idn/messages"
	"github.com/idn-net/idn/policy/idn"
	"github.com/idn-net/idn/policy/infida"
	"github.com/idn-net/idn/policy/sim"
	"github.com/idn-net/idn/policy/sim/slot"
)

// infidaState is the node's part of live INFIDA (paper 000): the shared
// problem instance, the slot meter the vertex scheduler feeds, the
// allocator actor while this node leads its vertex, and the executors'
// reconciliation with x^v. Fields are owned by the control loop unless
// noted.
type infidaState struct {
	inst   *idn.Instance
	vertex int
	meter  *allocator.Meter
	// metrics survive leadership changes (counters on /metrics).
	metrics allocator.Metrics

	pid      *actor.PID
	peers    map[int]string // vertex -> router address given to the allocator
	lastHost []string       // x^v last pushed to the allocator and executors
	// lastServable is the serving set last given to the scheduler,
	// announced the one last given to the allocator.
	lastServable, announced []string
	fetchedMB               atomicFloat

	mu           sync.Mutex // guards the status fields below
	running      bool
	restoredSlot uint64
	restoredY    []float64
	stepped      uint64
	lastSlot     int64

	reconcile chan []string // latest x^v for the executors (capacity 1)
}

// atomicFloat is a float64 counter guarded by a mutex (rarely written).
type atomicFloat struct {
	mu sync.Mutex
	v  float64
}

func (f *atomicFloat) add(d float64) {
	f.mu.Lock()
	f.v += d
	f.mu.Unlock()
}

func (f *atomicFloat) load() float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.v
}

// buildInstance returns the problem instance every node of an INFIDA
// cluster shares: the request types policy/sim/slot.Prepare draws for the
// same seed and entries per task (so `idn experiment infida` simulates the
// same instance), alpha, and capacities for cfg.Slot.
func buildInstance(cfg Config, g *idn.Graph, cat *idn.Catalog) (*idn.Instance, error) {
	entries := cfg.EntriesPerTask
	if entries == 0 {
		entries = len(g.BaseStations())
	}
	keys := slot.BuildTypes(g, cat, slot.WorkloadConfig{EntriesPerTask: entries}, sim.NewRand(sim.SplitSeed(cfg.TypesSeed, 0)))
	icfg := idn.InstanceConfig{Alpha: cfg.Alpha, InaccuracyScale: 100, SlotSeconds: cfg.Slot.Seconds()}
	in, err := idn.NewInstance(g, cat, icfg, keys)
	if err != nil {
		return nil, fmt.Errorf("%w: infida instance: %w", ErrInvalidConfig, err)
	}
	return in, nil
}

// newInfida prepares the INFIDA state of a node of vertex id.
func newInfida(cfg Config, g *idn.Graph, cat *idn.Catalog, id string) (*infidaState, error) {
	in, err := buildInstance(cfg, g, cat)
	if err != nil {
		return nil, err
	}
	v, ok := g.VertexIndex(id)
	if !ok {
		return nil, fmt.Errorf("%w: vertex: %q is not a vertex of the topology", ErrInvalidConfig, id)
	}
	return &infidaState{inst: in, vertex: v, meter: allocator.NewMeter(in, v, cfg.Slot), lastSlot: -1,
		reconcile: make(chan []string, 1)}, nil
}

// repositoryModels returns the models vertex id hosts as a repository
// (omega of eq. 3): always hosted, whatever INFIDA decides.
func repositoryModels(g *idn.Graph, cat *idn.Catalog, id string) []string {
	var out []string
	for _, t := range cat.Tasks {
		if r, err := g.Repository(t); err == nil && r == id {
			for _, i := range cat.ModelsFor(t) {
				out = append(out, cat.Models[i].Name)
			}
		}
	}
	return out
}

// localCosts returns d_m^v + alpha*100*(1-a_m) per catalog model (the
// vertex-local part of eq. 6) for the scheduler's serving rule.
func (s *infidaState) localCosts() map[string]float64 {
	out := make(map[string]float64, s.inst.NM)
	for m := 0; m < s.inst.NM; m++ {
		out[s.inst.Catalog.Models[m].Name] = s.inst.Cost([]int{s.vertex}, 0, m)
	}
	return out
}

// schedulerInfida returns the scheduler's INFIDA configuration, or nil in
// static mode.
func (n *Node) schedulerInfida() *scheduler.Infida {
	if n.inf == nil {
		return nil
	}
	return &scheduler.Infida{Meter: n.inf.meter, LocalCost: n.inf.localCosts(),
		Allocator: actor.NewPID(n.addrs.Remote, view.AllocatorID)}
}

// syncInfida is the control loop's INFIDA step: start or stop the allocator
// with leadership (a new leader resumes from the committed y^v and slot),
// tell it where the other vertices are, and make x^v changes reach the
// allocator's announcements and the executors.
func (n *Node) syncInfida(isLeader bool, members []gossip.Member, st *messages.VertexState) {
	s := n.inf
	if s == nil {
		return
	}
	running := s.pid != nil
	switch {
	case isLeader && !running && n.scheduler() != nil:
		n.startAllocator(st)
	case !isLeader && running:
		n.stopAllocator()
	}
	hosted := n.hostedFrom(st)
	if !slices.Equal(hosted, s.lastHost) {
		if s.pid != nil && s.lastHost != nil {
			s.fetchedMB.add(n.sizeOfNew(s.lastHost, hosted))
		}
		s.lastHost = hosted
		select { // keep only the latest x^v for the reconciler
		case <-s.reconcile:
		default:
		}
		s.reconcile <- hosted
	}
	if s.pid == nil {
		return
	}
	if sv := n.servable(st); !slices.Equal(sv, s.announced) {
		s.announced = sv
		n.system.Root.Send(s.pid, &allocator.HostedModels{Models: sv})
	}
	// Peers: any live member of each other vertex; its router relays to
	// the vertex leader's allocator.
	byAddr := map[int]string{}
	sorted := slices.Clone(members)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, m := range sorted {
		if (m.State != gossip.MemberAlive && m.State != gossip.MemberSuspect) || m.Meta.RemoteAddr == "" {
			continue
		}
		u, ok := n.graph.VertexIndex(m.Meta.Vertex)
		if !ok || u == s.vertex {
			continue
		}
		if _, seen := byAddr[u]; !seen {
			byAddr[u] = m.Meta.RemoteAddr
		}
	}
	if !maps.Equal(byAddr, s.peers) {
		s.peers = byAddr
		pids := make(map[int]*actor.PID, len(byAddr))
		for u, a := range byAddr {
			pids[u] = actor.NewPID(a, view.RouterID)
		}
		n.system.Root.Send(s.pid, &allocator.Peers{ByVertex: pids})
	}
}

// servable returns the models the vertex serves with: in static mode x^v;
// with INFIDA the models of x^v loaded on at least one of this node's
// executors (the nodes of a vertex load the same x^v), sorted.
func (n *Node) servable(st *messages.VertexState) []string {
	hosted := n.hostedFrom(st)
	if n.inf == nil {
		return hosted
	}
	loaded := map[string]bool{}
	for _, e := range n.execs {
		for _, m := range e.Loaded() {
			loaded[m] = true
		}
	}
	out := make([]string, 0, len(hosted))
	for _, m := range hosted {
		if loaded[m] {
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return out
}

func (n *Node) sizeOfNew(old, cur []string) float64 {
	had := map[string]bool{}
	for _, m := range old {
		had[m] = true
	}
	mb := 0.0
	for _, m := range cur {
		if !had[m] {
			if i, ok := n.catalog.ModelIndex(m); ok {
				mb += n.catalog.Models[i].SizeMB
			}
		}
	}
	return mb
}

func (n *Node) startAllocator(st *messages.VertexState) {
	s := n.inf
	y := allocator.RestoreY(s.inst, s.vertex, st)
	timeout := n.cfg.ControlTimeout
	if timeout <= 0 {
		timeout = n.cfg.Slot / 2
	}
	seed := uint64(time.Now().UnixNano()) ^ uint64(s.vertex)<<32
	// DepRound with the budget residual, as the simulator: x^v never
	// exceeds the GPU memory.
	cfg := allocator.Config{Instance: s.inst, Vertex: s.vertex, Eta: n.cfg.Eta, Timeout: timeout, Y: y,
		Committer: n.group, CommittedSlot: st.GetSlot(), SlotLength: n.cfg.Slot, Epoch: time.Unix(0, 0),
		Measure: s.meter.Measure, SampleEvery: n.cfg.Refresh, Rand: sim.NewRand(seed), Metrics: &s.metrics,
		Residual: infida.DefaultConfig().Residual, Log: n.log, Hosted: n.servable(st), Scheduler: actor.NewPID(n.addrs.Remote, view.SchedulerID),
		OnSlot: func(r allocator.Result) {
			s.mu.Lock()
			s.stepped++
			s.lastSlot = r.Slot
			s.mu.Unlock()
		}}
	a, err := allocator.New(cfg)
	if err != nil {
		n.log.Error("allocator", "err", err)
		return
	}
	pid, err := n.system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return a }), view.AllocatorID)
	if err != nil {
		n.log.Error("spawn allocator", "err", err)
		return
	}
	s.pid, s.peers, s.announced = pid, nil, cfg.Hosted
	s.mu.Lock()
	s.running, s.restoredSlot, s.restoredY, s.stepped = true, st.GetSlot(), y, 0
	s.mu.Unlock()
	n.log.Info("INFIDA allocator started", "vertex", n.cfg.Vertex, "committed_slot", st.GetSlot(), "restored_y", y != nil)
}

func (n *Node) stopAllocator() {
	s := n.inf
	if s == nil || s.pid == nil {
		return
	}
	if err := n.system.Root.StopFuture(s.pid).Wait(); err != nil {
		n.log.Warn("stopping allocator", "err", err)
	}
	s.pid = nil
	s.mu.Lock()
	s.running = false
	s.mu.Unlock()
	n.log.Info("INFIDA allocator stopped", "vertex", n.cfg.Vertex)
}

// reconcileLoop makes the executors follow x^v (issue 7 item 3): models
// no longer hosted are unloaded (a batch already running finishes), new
// ones are loaded with the emulated load delay. Only the latest x^v is
// applied; it runs until the node stops.
func (n *Node) reconcileLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case want := <-n.inf.reconcile:
			n.reconcileExecutors(ctx, want)
			n.kick() // the serving set follows what is loaded now
		}
	}
}

func (n *Node) reconcileExecutors(ctx context.Context, want []string) {
	keep := map[string]bool{}
	for _, m := range want {
		keep[m] = true
	}
	for _, e := range n.execs {
		for _, m := range e.Loaded() {
			if !keep[m] {
				if err := e.Unload(m); err != nil {
					n.log.Debug("unload", "executor", e.ID(), "model", m, "err", err)
				}
			}
		}
	}
	for _, e := range n.execs {
		loaded := map[string]bool{}
		for _, m := range e.Loaded() {
			loaded[m] = true
		}
		for _, name := range want {
			if loaded[name] {
				continue
			}
			if ctx.Err() != nil {
				return
			}
			if len(n.inf.reconcile) > 0 {
				return // a newer x^v is waiting
			}
			i, ok := n.catalog.ModelIndex(name)
			if !ok {
				continue
			}
			md := n.catalog.Models[i]
			m := gpu.Model{Name: md.Name, SizeMB: md.SizeMB, Accuracy: md.Accuracy,
				Profile: scheduler.ProfileOf(n.catalog, i, n.vinfo.GPU)}
			if err := e.Load(ctx, m); err != nil {
				n.log.Debug("load", "executor", e.ID(), "model", name, "err", err)
			}
		}
	}
}

// AllocationStatus is the "allocation" part of GET /v1/status.
type AllocationStatus struct {
	// Mode is "static" or "infida".
	Mode string `json:"mode"`
	// SlotMs is the INFIDA slot length.
	SlotMs int64 `json:"slot_ms"`
	// CommittedSlot is the replicated slot counter (last stepped slot + 1).
	CommittedSlot uint64 `json:"committed_slot"`
	// Models and Y are the replicated y^v (aligned).
	Models []string  `json:"models"`
	Y      []float64 `json:"y"`
	// Hosted is the replicated x^v.
	Hosted []string `json:"hosted"`
	// Running is true when this node runs the vertex's allocator.
	Running bool `json:"running"`
	// RestoredSlot and RestoredY are the committed state the running
	// allocator started from (RestoredY nil: the Lemma E.5 initial state).
	RestoredSlot uint64    `json:"restored_slot"`
	RestoredY    []float64 `json:"restored_y"`
	// SlotsStepped counts the slots this node's allocator stepped since it started.
	SlotsStepped uint64 `json:"slots_stepped"`
	// LastSlot is the last slot it stepped (-1: none).
	LastSlot int64 `json:"last_slot"`
}

func (n *Node) allocationStatus() *AllocationStatus {
	out := &AllocationStatus{Mode: n.cfg.Allocation, SlotMs: n.cfg.Slot.Milliseconds(), LastSlot: -1}
	if n.group != nil {
		st := n.group.State()
		out.CommittedSlot = st.GetSlot()
		out.Models = st.GetFractionalModels()
		out.Y = st.GetFractional()
		out.Hosted = st.GetHostedModels()
	}
	if s := n.inf; s != nil {
		s.mu.Lock()
		out.Running, out.RestoredSlot, out.RestoredY = s.running, s.restoredSlot, s.restoredY
		out.SlotsStepped, out.LastSlot = s.stepped, s.lastSlot
		s.mu.Unlock()
	}
	return out
}

// writeMetrics renders the INFIDA counters (this node, counted while it
// led its vertex) in the Prometheus text format.
func (s *infidaState) writeMetrics(w io.Writer) {
	m := &s.metrics
	c := func(name, help string, v uint64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", name, help, name, name, v)
	}
	c("idn_control_messages_total", "INFIDA upstream and downstream control messages sent (paper 000 Sec. IV-B).", m.Messages.Load())
	c("idn_control_batches_total", "Control batches sent (one per neighbour per processing step).", m.Batches.Load())
	c("idn_control_raw_bytes_total", "Marshalled size of the control batches sent, before compression.", m.RawBytes.Load())
	c("idn_control_wire_bytes_total", "Size of the control batches sent as they went on the wire (zstd when large).", m.WireBytes.Load())
	c("idn_control_compressed_batches_total", "Control and announcement batches sent zstd-compressed.", m.Compressed.Load())
	c("idn_control_pending_entries_total", "Out-of-order (z, gamma) entries carried upstream.", m.PendingCarried.Load())
	c("idn_control_received_total", "Control envelopes received.", m.Received.Load())
	c("idn_control_malformed_total", "Control envelopes dropped as malformed.", m.Malformed.Load())
	c("idn_control_stale_total", "Control envelopes dropped as too late or too early for their slot.", m.Stale.Load())
	c("idn_control_timeouts_total", "Slots stepped before every request type completed (lost or late control messages).", m.Timeouts.Load())
	c("idn_control_missing_types_total", "Request types missing at those timed-out steps.", m.MissingTypes.Load())
	c("idn_control_no_peer_total", "Control and announcement batches not sent: no live member known at the destination vertex.", m.NoPeer.Load())
	c("idn_infida_slots_total", "INFIDA slots stepped by this node's allocator.", m.Slots.Load())
	c("idn_serving_cost_messages_total", "Serving-cost announcement batches sent downstream (paper 000 Sec. III-E).", m.CostBatches.Load())
	c("idn_serving_cost_entries_total", "Serving alternatives carried by those announcements.", m.CostEntries.Load())
	c("idn_serving_cost_bytes_total", "Marshalled size of the announcements sent, before compression.", m.CostRawBytes.Load())
	c("idn_serving_cost_wire_bytes_total", "Size of the announcements sent as they went on the wire.", m.CostWireBytes.Load())
	c("idn_serving_cost_malformed_total", "Announcements received and refused.", m.CostMalformed.Load())
	fmt.Fprintf(w, "# HELP idn_infida_fetched_mb_total MB of models newly hosted at this vertex while this node led it (MU, paper 000 eq. 24).\n# TYPE idn_infida_fetched_mb_total counter\nidn_infida_fetched_mb_total %g\n", s.fetchedMB.load())
}
