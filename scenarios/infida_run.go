package scenarios

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/idn-net/idn/policy/idn"
	"github.com/idn-net/idn/policy/sim/slot"
)

// slotStart returns the start of the first slot boundary (slot s covers
// Unix [s*S, (s+1)*S)) at least lead after now, and its slot number.
func slotStart(now time.Time, S, lead time.Duration) (time.Time, int64) {
	s := now.Add(lead).UnixNano()/int64(S) + 1
	return time.Unix(0, s*int64(S)), s
}

// runInfida issues the planned requests of the infida workload: each to a
// live node of its type's entry vertex, round robin per vertex. Like run it
// waits for every outstanding request before it returns.
func (l *loader) runInfida(ctx context.Context, start time.Time, plan []plannedRequest, in *idn.Instance) {
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		l.client.CloseIdleConnections()
	}()
	rr := map[string]int{}
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for i, p := range plan {
		timer.Reset(time.Until(start.Add(p.at)))
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		typ := in.Types[p.rho]
		entry := in.Graph.Vertices[typ.Path[0]].ID
		sentAt := time.Now()
		s := Sample{Start: sentAt.Sub(start), Task: typ.Key.Task, Slot: p.slot, Type: p.rho}
		if l.inFlight.Load() >= int64(l.w.MaxInFlight) {
			s.Outcome, s.Kind = OutcomeSkipped, "max_in_flight"
			l.record(s)
			continue
		}
		nodes := l.c.vertexNodes(entry)
		name, ready, ok := "", ReadyLine{}, false
		for k := 0; k < len(nodes) && !ok; k++ {
			name = nodes[(rr[entry]+k)%len(nodes)]
			ready, ok = l.c.live(name)
		}
		rr[entry]++
		if !ok {
			s.Outcome, s.Kind = OutcomeNotAccepted, "no_live_entry"
			l.record(s)
			continue
		}
		l.inFlight.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer l.inFlight.Add(-1)
			l.record(l.sendTo(ctx, s, sentAt, i, name, ready))
		}()
	}
}

// waitAllocators waits until every vertex with live nodes has a node whose
// /v1/status reports allocation mode infida and running.
func waitAllocators(ctx context.Context, c *cluster, timeout time.Duration, logf func(string, ...any)) error {
	deadline := time.Now().Add(timeout)
	began := time.Now()
	for {
		var problems []string
		running := map[string]bool{}
		vertices := map[string]bool{}
		for _, name := range liveNames(c) {
			v := c.nodes[name].spec.Vertex
			vertices[v] = true
			st, err := c.status(ctx, name, statusTimeout)
			switch {
			case err != nil:
				problems = append(problems, err.Error())
			case st.Allocation == nil:
				problems = append(problems, fmt.Sprintf("%s: /v1/status has no allocation object (an idn node without --allocation infida support?)", name))
			case st.Allocation.Mode != "infida":
				problems = append(problems, fmt.Sprintf("%s: allocation.mode is %q, want infida", name, st.Allocation.Mode))
			case st.Allocation.Running:
				running[v] = true
			}
		}
		for _, v := range sortedKeys(vertices) {
			if !running[v] {
				problems = append(problems, fmt.Sprintf("vertex %s: no node reports allocation.running", v))
			}
		}
		if len(problems) == 0 {
			logf("INFIDA allocators running at all %d vertices after %.1fs", len(vertices), time.Since(began).Seconds())
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("scenario: INFIDA allocators not running within %s (timeouts.startup):\n  %s", timeout, strings.Join(problems, "\n  "))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("scenario: waiting for the allocators: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// incarnation returns a key naming node name's current process.
func (c *cluster) incarnation(name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("%s#%d", name, c.nodes[name].starts)
}

// infidaPoller reads, once per load slot, the FSM x^v of every vertex
// (from one live node) and the /metrics of every live node.
type infidaPoller struct {
	c        *cluster
	vertices []string // vertex index order of the instance
	slotLen  time.Duration
	slots    int

	mu       sync.Mutex
	hosted   [][][]string                  // [slot][vertex] (nil: not observed)
	missed   int                           // failed allocation polls
	scrapes  map[string]map[string]float64 // incarnation -> last control counters
	vertexOf map[string]string             // incarnation -> vertex
}

func newInfidaPoller(c *cluster, in *idn.Instance, slotLen time.Duration, slots int) *infidaPoller {
	p := &infidaPoller{c: c, slotLen: slotLen, slots: slots, hosted: make([][][]string, slots),
		scrapes: map[string]map[string]float64{}, vertexOf: map[string]string{}}
	for _, v := range in.Graph.Vertices {
		p.vertices = append(p.vertices, v.ID)
	}
	for t := range p.hosted {
		p.hosted[t] = make([][]string, len(p.vertices))
	}
	return p
}

// run polls in the middle of every load slot, then scrapes once more after
// loadDone (the final counters).
func (p *infidaPoller) run(ctx context.Context, start time.Time, loadDone <-chan struct{}) {
	for t := 0; t < p.slots; t++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(start.Add(time.Duration(t)*p.slotLen + p.slotLen/2))):
		}
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); p.pollHosted(ctx, t) }()
		go func() { defer wg.Done(); p.scrape(ctx) }()
		wg.Wait()
	}
	select {
	case <-ctx.Done():
		return
	case <-loadDone:
	}
	p.scrape(ctx)
}

func (p *infidaPoller) pollHosted(ctx context.Context, t int) {
	var wg sync.WaitGroup
	for vi, v := range p.vertices {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, name := range p.c.vertexNodes(v) {
				if _, ok := p.c.live(name); !ok {
					continue
				}
				st, err := p.c.status(ctx, name, p.slotLen/3)
				if err != nil || st.Allocation == nil {
					continue
				}
				h := append([]string{}, st.Allocation.Hosted...)
				p.mu.Lock()
				p.hosted[t][vi] = h
				p.mu.Unlock()
				return
			}
			if len(p.c.vertexNodes(v)) > 0 {
				p.mu.Lock()
				p.missed++
				p.mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

func (p *infidaPoller) scrape(ctx context.Context) {
	var wg sync.WaitGroup
	for _, name := range liveNames(p.c) {
		r, ok := p.c.live(name)
		if !ok {
			continue
		}
		key := p.c.incarnation(name)
		v := p.c.nodes[name].spec.Vertex
		wg.Add(1)
		go func() {
			defer wg.Done()
			body, err := p.c.get(ctx, "http://"+r.API+"/metrics", max(statusTimeout, p.slotLen/3))
			if err != nil {
				return
			}
			m := parseMetrics(body, controlMetrics)
			p.mu.Lock()
			p.scrapes[key], p.vertexOf[key] = m, v
			p.mu.Unlock()
		}()
	}
	wg.Wait()
}

// yWatcher records committed_slot -> y^v of one vertex from every live
// node every 100 ms, and checks each leader kill (see YCheck).
type yWatcher struct {
	c        *cluster
	vertex   string
	failover time.Duration
	logf     func(string, ...any)

	mu       sync.Mutex
	recorded map[uint64][]float64
	lastSeen map[string]uint64 // node -> last committed_slot it reported
	pending  []pendingKill
	checks   []YCheck
}

type pendingKill struct {
	node string
	at   time.Time
	last uint64
}

func newYWatcher(c *cluster, vertex string, failover time.Duration, logf func(string, ...any)) *yWatcher {
	return &yWatcher{c: c, vertex: vertex, failover: failover, logf: logf,
		recorded: map[uint64][]float64{}, lastSeen: map[string]uint64{}}
}

// killed tells the watcher that node, its leader, was hit at at.
func (w *yWatcher) killed(node string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending = append(w.pending, pendingKill{node: node, at: at, last: w.lastSeen[node]})
}

// run polls until loadDone is closed and no kill is pending.
func (w *yWatcher) run(ctx context.Context, loadDone <-chan struct{}) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	done := false
	for {
		w.poll(ctx)
		w.mu.Lock()
		idle := len(w.pending) == 0
		w.mu.Unlock()
		if done && idle {
			return
		}
		select {
		case <-ctx.Done():
			w.expire(time.Now().Add(w.failover + time.Hour))
			return
		case <-loadDone:
			done = true
			loadDone = nil
		case <-tick.C:
		}
	}
}

func (w *yWatcher) poll(ctx context.Context) {
	type reply struct {
		name string
		at   time.Time
		st   *Status
	}
	var mu sync.Mutex
	var replies []reply
	var wg sync.WaitGroup
	for _, name := range w.c.vertexNodes(w.vertex) {
		if _, ok := w.c.live(name); !ok {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := w.c.status(ctx, name, time.Second)
			if err != nil || st.Allocation == nil {
				return
			}
			mu.Lock()
			replies = append(replies, reply{name: name, at: time.Now(), st: st})
			mu.Unlock()
		}()
	}
	wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range replies {
		a := r.st.Allocation
		if _, ok := w.recorded[a.CommittedSlot]; !ok && a.Y != nil {
			w.recorded[a.CommittedSlot] = append([]float64(nil), a.Y...)
		}
		if a.CommittedSlot > w.lastSeen[r.name] {
			w.lastSeen[r.name] = a.CommittedSlot
		}
	}
	var still []pendingKill
	for _, k := range w.pending {
		var found *reply
		for i, r := range replies {
			// The new leader, or, at a vertex of one node, the node
			// itself once restarted (polls reach live nodes only).
			if (r.name != k.node || len(w.c.vertexNodes(w.vertex)) == 1) && r.st.Allocation.Running && r.at.After(k.at) {
				found = &replies[i]
				break
			}
		}
		if found == nil {
			still = append(still, k)
			continue
		}
		a := found.st.Allocation
		yc := checkY(YCheck{Vertex: w.vertex, OldLeader: k.node, NewLeader: found.name, LastCommittedSeen: k.last,
			RestoredSlot: a.RestoredSlot}, w.recorded, a.RestoredY)
		w.checks = append(w.checks, yc)
		if yc.Preserved {
			w.logf("y^v check %s: new leader %s restored committed_slot %d (old leader %s last seen at %d): y^v equal (max |diff| 0)",
				w.vertex, found.name, a.RestoredSlot, k.node, k.last)
		} else {
			w.logf("y^v check %s FAILED: %s", w.vertex, yc.Problem)
		}
	}
	w.pending = still
	w.expireLocked(time.Now())
}

func (w *yWatcher) expire(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.expireLocked(now)
}

// expireLocked fails the kills with no running new leader after failover.
func (w *yWatcher) expireLocked(now time.Time) {
	var still []pendingKill
	for _, k := range w.pending {
		if now.Sub(k.at) <= w.failover {
			still = append(still, k)
			continue
		}
		yc := checkY(YCheck{Vertex: w.vertex, OldLeader: k.node, LastCommittedSeen: k.last}, w.recorded, nil)
		w.checks = append(w.checks, yc)
		w.logf("y^v check %s FAILED: %s", w.vertex, yc.Problem)
	}
	w.pending = still
}

func (w *yWatcher) results() []YCheck {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]YCheck(nil), w.checks...)
}

// infidaWatchedVertices lists the vertices whose leader a fault hits and
// that have other nodes to take over, and the vertices of one node that a
// kill or stop takes down and a later restart brings back (the restarted
// node must resume from the y^v it had committed).
func infidaWatchedVertices(sc *Scenario) []string {
	count := map[string]int{}
	vertexOf := map[string]string{}
	for _, n := range sc.nodeList {
		count[n.Vertex]++
		vertexOf[n.Name] = n.Vertex
	}
	restarted := map[string]bool{}
	for _, f := range sc.Faults {
		if f.Action == ActionRestart && f.Fault != "" {
			restarted[f.Fault] = true
		}
	}
	seen := map[string]bool{}
	var out []string
	for _, f := range sc.Faults {
		switch f.Action {
		case ActionKillLeader, ActionKill, ActionStop:
		default:
			continue
		}
		v := f.Vertex
		if v == "" {
			v = vertexOf[f.Node]
		}
		if v == "" || seen[v] || (count[v] <= 1 && !(f.ID != "" && restarted[f.ID])) {
			continue
		}
		seen[v] = true
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// infidaState is the infida part of one run.
type infidaState struct {
	sc        *Scenario
	in        *idn.Instance
	sim       slot.Result
	bound     float64
	plan      []plannedRequest
	slotLen   time.Duration
	firstSlot int64
	poller    *infidaPoller
	watchers  map[string]*yWatcher
}

// newInfidaState runs the slot simulator on the scenario's setup (before
// any node starts, so it does not compete with them) and plans the load.
func newInfidaState(sc *Scenario, logf func(string, ...any)) (*infidaState, error) {
	cfg, setup := sc.InfidaSetup()
	began := time.Now()
	sim, err := sc.SimulateInfida()
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	s := &infidaState{sc: sc, in: setup.Instance, sim: sim, bound: setup.NTAGBound(), slotLen: sc.Infida.Slot.D()}
	s.plan = infidaPlan(setup.Batches, s.slotLen, cfg.Seed)
	from := tailStart(cfg.Slots)
	logf("slot simulator (INFIDA, eta %g, %d types, %d slots of %s, %d requests) in %.1fs: NTAG %.3f over the last third, %.3f overall (upper bound %.3f), MU %.1f MB/slot",
		cfg.INFIDA.Eta, len(s.in.Types), cfg.Slots, s.slotLen, len(s.plan), time.Since(began).Seconds(),
		mean(sim.SlotNTAG[from:]), sim.NTAG, s.bound, sim.MU)
	return s, nil
}

// begin picks the first slot boundary of the load (at least 300 ms away),
// creates the pollers and hooks the y^v watchers to the fault runner.
func (s *infidaState) begin(c *cluster, fr *faultRunner, logf func(string, ...any)) time.Time {
	start, s0 := slotStart(time.Now(), s.slotLen, 300*time.Millisecond)
	s.firstSlot = s0
	s.poller = newInfidaPoller(c, s.in, s.slotLen, s.sc.Infida.Slots)
	s.watchers = map[string]*yWatcher{}
	for _, v := range infidaWatchedVertices(s.sc) {
		s.watchers[v] = newYWatcher(c, v, s.sc.Timeouts.Failover.D(), logf)
	}
	fr.onLeaderHit = func(v, node string, at time.Time) {
		if w := s.watchers[v]; w != nil {
			w.killed(node, at)
		}
	}
	logf("infida load starts at slot %d (Unix %.3f): %d requests over %d slots of %s", s0, float64(start.UnixNano())/1e9, len(s.plan), s.sc.Infida.Slots, s.slotLen)
	return start
}

// watch starts the pollers; they end after loadDone (the y^v watchers
// once their pending leader kills are checked or timed out).
func (s *infidaState) watch(ctx context.Context, wg *sync.WaitGroup, start time.Time, loadDone <-chan struct{}) {
	wg.Add(1 + len(s.watchers))
	go func() {
		defer wg.Done()
		s.poller.run(ctx, start, loadDone)
	}()
	for _, w := range s.watchers {
		go func() {
			defer wg.Done()
			w.run(ctx, loadDone)
		}()
	}
}

// report computes the infida report from the load samples and the polls.
func (s *infidaState) report(samples []Sample) *InfidaReport {
	n := s.sc.Infida.Slots
	replies := make([]InfidaReply, len(samples))
	for i, x := range samples {
		replies[i] = InfidaReply{Slot: x.Slot, Type: x.Type, Outcome: x.Outcome, Vertex: x.Vertex, Model: x.Model}
	}
	r := &InfidaReport{SlotMs: s.slotLen.Milliseconds(), Slots: n, FirstSlot: s.firstSlot, NTAGBound: s.bound,
		Live: LiveNTAG(s.in, n, replies), YChecks: []YCheck{}}
	size := map[string]float64{}
	for _, m := range s.in.Catalog.Models {
		size[m.Name] = m.SizeMB
	}
	s.poller.mu.Lock()
	r.LiveMUSeries = MUSeries(s.poller.hosted, func(m string) float64 { return size[m] })
	r.HostedMissed = s.poller.missed
	r.Control = ControlTable(s.poller.scrapes, s.poller.vertexOf)
	s.poller.mu.Unlock()
	for _, v := range sortedKeys(s.watchers) {
		r.YChecks = append(r.YChecks, s.watchers[v].results()...)
	}
	summarizeInfida(r, s.sim)
	return r
}
