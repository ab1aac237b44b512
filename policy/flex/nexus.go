package flex

import (
	"fmt"
	"math"
	"sort"
)

// Session is a Nexus session: the requests of one model with one latency
// SLO (ms). Nexus (Shen et al., SOSP 2019) plans per session; paper 004
// calls these request streams.
type Session struct {
	Model int
	SLO   float64
}

// NexusSlot is one entry of a GPU's static duty cycle: a batch of at most
// Batch requests of session Session.
type NexusSlot struct {
	Session int
	Batch   int
}

// NexusPlan is a static per-session execution plan: the slots of each GPU,
// executed round-robin, and the rate (req/ms) each session was provisioned
// for (0: not served).
type NexusPlan struct {
	GPUs    [][]NexusSlot
	Planned []float64
	// Scale is the fraction of the peak rates the plan provisions for.
	Scale float64
}

// PlanNexus is the Nexus-like planner of paper 004 Sec. 7 ("we adapt their
// algorithm to provision for the peak demand in every 60-second window"),
// a simplified squishy bin packing (Nexus Sec. 6.1):
//
//   - a session with SLO L uses batch b = the largest b <= maxBatch with
//     2*l(b) <= L (a request may wait one batch and then run in the next),
//     so one saturated GPU serves T = b/l(b); floor(rate/T) GPUs are
//     dedicated to it;
//   - the residual rate r' gets a duty cycle d = (L - beta)/(1 + alpha*r'),
//     a batch b' = max(1, floor(r'*d)) and occupancy l(b')/min(d, b'/r');
//     residuals are packed first-fit decreasing onto shared GPUs whose
//     common duty cycle D is the smallest of their members', each member's
//     batch rescaled to max(1, ceil(r*D)), under sum l(b_i) <= D and
//     D + l(b_i) <= L_i;
//   - with a fixed number of GPUs, every peak rate is scaled by the largest
//     s in (0, 1] (bisection) for which the plan fits; if nothing fits, the
//     sessions with the smallest peaks are left unserved.
//
// peak[i] is session i's peak rate in requests per ms. GPUs beyond what the
// plan needs stay idle, as a per-stream planner sized to the peak would.
func PlanNexus(models []Model, sessions []Session, peak []float64, gpus, maxBatch int) (NexusPlan, error) {
	if len(peak) != len(sessions) {
		return NexusPlan{}, fmt.Errorf("%w: peak rates: %d values for %d sessions", ErrConfig, len(peak), len(sessions))
	}
	if gpus <= 0 {
		return NexusPlan{}, fmt.Errorf("%w: gpus = %d must be positive", ErrConfig, gpus)
	}
	for i, s := range sessions {
		if s.Model < 0 || s.Model >= len(models) {
			return NexusPlan{}, fmt.Errorf("%w: sessions[%d].model = %d out of range", ErrConfig, i, s.Model)
		}
	}
	active := make([]bool, len(sessions))
	for i := range sessions {
		m := models[sessions[i].Model]
		active[i] = peak[i] > 0 && m.Latency(1) <= sessions[i].SLO
	}
	try := func(scale float64) (NexusPlan, bool) {
		p := packNexus(models, sessions, peak, active, scale, maxBatch)
		return p, len(p.GPUs) <= gpus
	}
	for {
		if p, ok := try(1); ok {
			p.Scale = 1
			return p, nil
		}
		lo, hi := 0.0, 1.0
		var best NexusPlan
		found := false
		for it := 0; it < 40; it++ {
			mid := (lo + hi) / 2
			if p, ok := try(mid); ok {
				lo, best, found = mid, p, true
			} else {
				hi = mid
			}
		}
		if found && lo > 0 {
			best.Scale = lo
			return best, nil
		}
		// Nothing fits: leave the smallest active session unserved.
		worst := -1
		for i := range sessions {
			if active[i] && (worst < 0 || peak[i] < peak[worst]) {
				worst = i
			}
		}
		if worst < 0 {
			return NexusPlan{Planned: make([]float64, len(sessions))}, nil
		}
		active[worst] = false
	}
}

type nexusResidual struct {
	session int
	rate    float64
	duty    float64
	occ     float64
}

func packNexus(models []Model, sessions []Session, peak []float64, active []bool, scale float64, maxBatch int) NexusPlan {
	p := NexusPlan{Planned: make([]float64, len(sessions))}
	var res []nexusResidual
	for i, s := range sessions {
		if !active[i] {
			continue
		}
		m := models[s.Model]
		rate := peak[i] * scale
		p.Planned[i] = rate
		b := maxBatch
		for b > 1 && 2*m.Latency(b) > s.SLO {
			b--
		}
		tput := float64(b) / m.Latency(b)
		full := int(math.Floor(rate / tput))
		for j := 0; j < full; j++ {
			p.GPUs = append(p.GPUs, []NexusSlot{{Session: i, Batch: b}})
		}
		r := rate - float64(full)*tput
		if r <= 1e-12 {
			continue
		}
		d := (s.SLO - m.Beta) / (1 + m.Alpha*r)
		bb := math.Max(1, math.Floor(r*d))
		duty := math.Min(d, bb/r)
		res = append(res, nexusResidual{session: i, rate: r, duty: duty, occ: m.Latency(int(bb)) / duty})
	}
	sort.SliceStable(res, func(a, b int) bool { return res[a].occ > res[b].occ })
	type bin struct {
		duty    float64
		members []nexusResidual
	}
	var bins []bin
	fits := func(members []nexusResidual, duty float64) bool {
		sum := 0.0
		for _, x := range members {
			s := sessions[x.session]
			m := models[s.Model]
			b := int(math.Max(1, math.Ceil(x.rate*duty)))
			if b > maxBatch {
				return false
			}
			l := m.Latency(b)
			if duty+l > s.SLO+1e-9 {
				return false
			}
			sum += l
		}
		return sum <= duty+1e-9
	}
	for _, x := range res {
		placed := false
		for bi := range bins {
			d := math.Min(bins[bi].duty, x.duty)
			cand := append(append([]nexusResidual(nil), bins[bi].members...), x)
			if fits(cand, d) {
				bins[bi].duty, bins[bi].members, placed = d, cand, true
				break
			}
		}
		if !placed {
			bins = append(bins, bin{duty: x.duty, members: []nexusResidual{x}})
		}
	}
	for _, b := range bins {
		slots := make([]NexusSlot, 0, len(b.members))
		for _, x := range b.members {
			slots = append(slots, NexusSlot{Session: x.session, Batch: int(math.Max(1, math.Ceil(x.rate*b.duty)))})
		}
		p.GPUs = append(p.GPUs, slots)
	}
	return p
}

// NexusConfig configures the Nexus-like scheduler.
type NexusConfig struct {
	Models   []Model
	Sessions []Session
	GPUs     int
	MaxBatch int
}

// DefaultNexusConfig returns one GPU and MaxBatch 128; Models and Sessions
// must be set.
func DefaultNexusConfig() NexusConfig { return NexusConfig{GPUs: 1, MaxBatch: 128} }

// Validate checks the configuration.
func (c NexusConfig) Validate() error {
	if err := (Config{Models: c.Models, GPUs: c.GPUs, Lambda: 1, MaxBatch: c.MaxBatch}).Validate(); err != nil {
		return err
	}
	if len(c.Sessions) == 0 {
		return fmt.Errorf("%w: sessions: need at least one session", ErrConfig)
	}
	for i, s := range c.Sessions {
		if s.Model < 0 || s.Model >= len(c.Models) {
			return fmt.Errorf("%w: sessions[%d].model = %d out of range [0,%d)", ErrConfig, i, s.Model, len(c.Models))
		}
		if !(s.SLO > 0) {
			return fmt.Errorf("%w: sessions[%d].slo = %v must be positive", ErrConfig, i, s.SLO)
		}
	}
	return nil
}

// Nexus is the Nexus-like baseline of paper 004 Sec. 7: a static per-session
// plan (SetPlan, recomputed by the caller every period, 60 s in the paper)
// executed without preemption. Each GPU cycles through its slots; at a slot
// it runs the largest feasible batch of at most the slot's size from that
// session's queue (earliest deadlines first), skipping empty sessions. A
// request of a session with no slot is dropped on arrival.
//
// Request.Stream must be the session index (0..len(Sessions)-1).
type Nexus struct {
	cfg     NexusConfig
	plan    NexusPlan
	q       []queue
	g       []gpuState
	ptr     []int
	served  [][]int // session -> GPUs with a slot for it
	out     []Decision
	arena   []Request
	id      uint64
	planned bool
}

var _ Scheduler = (*Nexus)(nil)

// NewNexus returns a Nexus-like scheduler with an empty plan.
func NewNexus(cfg NexusConfig) (*Nexus, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := &Nexus{cfg: cfg, q: make([]queue, len(cfg.Sessions)), g: make([]gpuState, cfg.GPUs), ptr: make([]int, cfg.GPUs)}
	for i := range n.g {
		n.g[i].batch = make([]Request, 0, cfg.MaxBatch)
	}
	n.served = make([][]int, len(cfg.Sessions))
	return n, nil
}

// Name is "nexus".
func (n *Nexus) Name() string { return "nexus" }

// Decisions returns the decisions of the last event.
func (n *Nexus) Decisions() []Decision { return n.out }

// Queued returns the number of queued requests.
func (n *Nexus) Queued() int {
	c := 0
	for i := range n.q {
		c += n.q[i].len()
	}
	return c
}

// Plan returns the plan in force.
func (n *Nexus) Plan() NexusPlan { return n.plan }

// SetPlan installs a new plan (the periodic re-planning). Running batches
// finish; idle GPUs start under the new plan. Plans with more GPUs than
// configured are rejected.
func (n *Nexus) SetPlan(p NexusPlan, now float64) error {
	n.reset()
	if len(p.GPUs) > len(n.g) {
		return fmt.Errorf("%w: plan uses %d GPUs, scheduler has %d", ErrConfig, len(p.GPUs), len(n.g))
	}
	for gi, slots := range p.GPUs {
		for si, s := range slots {
			if s.Session < 0 || s.Session >= len(n.q) || s.Batch <= 0 {
				return fmt.Errorf("%w: plan gpu %d slot %d: session %d batch %d invalid", ErrConfig, gi, si, s.Session, s.Batch)
			}
		}
	}
	n.plan = p
	n.planned = true
	for i := range n.served {
		n.served[i] = n.served[i][:0]
	}
	for gi, slots := range p.GPUs {
		n.ptr[gi] = 0
		for _, s := range slots {
			l := n.served[s.Session]
			if len(l) == 0 || l[len(l)-1] != gi {
				n.served[s.Session] = append(l, gi)
			}
		}
	}
	for s := range n.q { // sessions that lost their slots
		if len(n.served[s]) == 0 {
			for n.q[s].len() > 0 {
				n.dropReq(n.q[s].popFront(), now)
			}
		}
	}
	for gi := range n.g {
		n.kick(gi, now)
	}
	return nil
}

// Arrive enqueues r in its session and wakes an idle GPU serving it.
func (n *Nexus) Arrive(r Request, now float64) {
	n.reset()
	s := int(r.Stream)
	if s < 0 || s >= len(n.q) || len(n.served[s]) == 0 ||
		now+n.cfg.Models[n.cfg.Sessions[s].Model].Latency(1) > r.Deadline {
		n.dropReq(r, now)
		return
	}
	n.q[s].insert(r)
	for _, gi := range n.served[s] {
		if !n.g[gi].busy {
			n.kick(gi, now)
			if n.q[s].len() == 0 {
				return
			}
		}
	}
}

// Complete frees the GPU and runs its next slot.
func (n *Nexus) Complete(gpu int, batchID uint64, now float64) {
	n.reset()
	if gpu < 0 || gpu >= len(n.g) || !n.g[gpu].busy || n.g[gpu].id != batchID {
		return
	}
	n.g[gpu].busy = false
	n.g[gpu].batch = n.g[gpu].batch[:0]
	n.kick(gpu, now)
}

// Tick drops expired requests everywhere.
func (n *Nexus) Tick(now float64) {
	n.reset()
	for s := range n.q {
		n.expire(s, now)
	}
	for gi := range n.g {
		n.kick(gi, now)
	}
}

func (n *Nexus) reset() { n.out = n.out[:0]; n.arena = n.arena[:0] }

func (n *Nexus) dropReq(r Request, now float64) {
	n.arena = append(n.arena, r)
	k := len(n.arena)
	n.out = append(n.out, Decision{Kind: Drop, GPU: -1, Model: int(r.Model), At: now, Batch: n.arena[k-1 : k : k]})
}

func (n *Nexus) expire(s int, now float64) {
	q := &n.q[s]
	lat1 := n.cfg.Models[n.cfg.Sessions[s].Model].Latency(1)
	for q.len() > 0 && now+lat1 > q.at(0).Deadline {
		n.dropReq(q.popFront(), now)
	}
}

// kick starts the next non-empty slot of idle GPU gi.
func (n *Nexus) kick(gi int, now float64) {
	g := &n.g[gi]
	if g.busy || gi >= len(n.plan.GPUs) {
		return
	}
	slots := n.plan.GPUs[gi]
	for t := 0; t < len(slots); t++ {
		si := (n.ptr[gi] + t) % len(slots)
		slot := slots[si]
		n.expire(slot.Session, now)
		q := &n.q[slot.Session]
		if q.len() == 0 {
			continue
		}
		mi := n.cfg.Sessions[slot.Session].Model
		mod := &n.cfg.Models[mi]
		maxB := slot.Batch
		if maxB > n.cfg.MaxBatch {
			maxB = n.cfg.MaxBatch
		}
		k, fin := largestFeasible(q, nil, mod, now, maxB)
		if k == 0 {
			continue
		}
		i := q.firstAtLeast(fin)
		g.batch = q.take(g.batch[:0], i, k)
		n.id++
		g.busy, g.model, g.id, g.start, g.finish = true, mi, n.id, now, fin
		n.ptr[gi] = (si + 1) % len(slots)
		n.arena = append(n.arena, g.batch...)
		a := len(n.arena)
		n.out = append(n.out, Decision{Kind: Start, GPU: gi, Model: mi, BatchID: n.id, At: now, Finish: fin, Batch: n.arena[a-k : a : a]})
		return
	}
}
