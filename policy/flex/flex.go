package flex

import (
	"fmt"
	"math"
)

// Config configures FLEX (paper 004 Algorithm 1) and SHEPHERD-NP.
type Config struct {
	// Models is the serving group's model list; Request.Model indexes it.
	Models []Model
	// GPUs is the number of GPU workers in the serving group.
	GPUs int
	// Lambda is the preemption threshold: a running batch B_c is preempted
	// when a candidate batch has |B_g| >= Lambda*|B_c| (Algorithm 1 line 16).
	// Paper 004 Theorem 5.2: Lambda ~ 3.03.
	Lambda float64
	// MaxBatch caps every batch (paper 004 Sec. 5.2: 128 by default).
	MaxBatch int
	// Preemption enables the preemption rule; false gives SHEPHERD-NP.
	Preemption bool
}

// DefaultConfig returns Lambda = 3.03, MaxBatch = 128, preemption on and one
// GPU; Models must still be set.
func DefaultConfig() Config {
	return Config{GPUs: 1, Lambda: 3.03, MaxBatch: 128, Preemption: true}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if len(c.Models) == 0 {
		return fmt.Errorf("%w: models: need at least one model", ErrConfig)
	}
	for i, m := range c.Models {
		if err := m.Validate(); err != nil {
			return fmt.Errorf("%w: models[%d]: %w", ErrConfig, i, err)
		}
	}
	if c.GPUs <= 0 {
		return fmt.Errorf("%w: gpus = %d must be positive", ErrConfig, c.GPUs)
	}
	if !(c.Lambda >= 1) || math.IsInf(c.Lambda, 0) {
		return fmt.Errorf("%w: lambda = %v must be finite and >= 1", ErrConfig, c.Lambda)
	}
	if c.MaxBatch <= 0 {
		return fmt.Errorf("%w: max batch = %d must be positive", ErrConfig, c.MaxBatch)
	}
	return nil
}

type gpuState struct {
	busy   bool
	model  int
	id     uint64
	start  float64
	finish float64
	batch  []Request // deadline-sorted, cap MaxBatch
}

// nextExit is the earliest time >= now at which the batch running on g can
// stop: its next exit point (paper 004 Sec. 6), evenly spaced over the batch
// duration; with no exit points it stops at once.
func (g *gpuState) nextExit(m *Model, now float64) float64 {
	if now <= g.start {
		return g.start
	}
	if m.ExitPoints <= 0 {
		return now
	}
	seg := (g.finish - g.start) / float64(m.ExitPoints)
	x := g.start + math.Ceil((now-g.start)/seg-1e-12)*seg
	return math.Min(x, g.finish)
}

// Flex is the FLEX online scheduler of paper 004 Algorithm 1 (or, with
// Config.Preemption false, SHEPHERD-NP) for one serving group.
type Flex struct {
	cfg    Config
	q      []queue
	g      []gpuState
	out    []Decision
	arena  []Request
	nextID uint64
	k      []int // per-model largest feasible batch at the current event time
	kValid bool
}

var _ Scheduler = (*Flex)(nil)

// NewFlex returns a FLEX scheduler.
func NewFlex(cfg Config) (*Flex, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Models = append([]Model(nil), cfg.Models...)
	f := &Flex{cfg: cfg, q: make([]queue, len(cfg.Models)), g: make([]gpuState, cfg.GPUs), k: make([]int, len(cfg.Models))}
	for i := range f.g {
		f.g[i].batch = make([]Request, 0, cfg.MaxBatch)
	}
	return f, nil
}

// Name is "flex" or "flex-np".
func (f *Flex) Name() string {
	if f.cfg.Preemption {
		return "flex"
	}
	return "flex-np"
}

// Decisions returns the decisions of the last event.
func (f *Flex) Decisions() []Decision { return f.out }

// Queued returns the number of queued requests.
func (f *Flex) Queued() int {
	n := 0
	for i := range f.q {
		n += f.q[i].len()
	}
	return n
}

// Running reports the batch running on gpu (nil when idle). The slice is
// the scheduler's own storage: read only, valid until the next event.
func (f *Flex) Running(gpu int) (model int, batch []Request, busy bool) {
	g := &f.g[gpu]
	return g.model, g.batch, g.busy
}

// Arrive is the arrival event of paper 004 Algorithm 1 (lines 9-19).
func (f *Flex) Arrive(r Request, now float64) {
	f.reset()
	m := &f.cfg.Models[r.Model]
	if now+m.Latency(1) > r.Deadline {
		f.drop(r, now)
		return
	}
	f.q[r.Model].insert(r)
	f.schedule(now, f.cfg.Preemption)
}

// Complete is the completion event of paper 004 Algorithm 1 (lines 4-8).
func (f *Flex) Complete(gpu int, batchID uint64, now float64) {
	f.reset()
	if gpu < 0 || gpu >= len(f.g) {
		return
	}
	g := &f.g[gpu]
	if !g.busy || g.id != batchID {
		return
	}
	g.busy = false
	g.batch = g.batch[:0]
	f.schedule(now, false)
}

// Tick drops requests that can no longer meet their deadline.
func (f *Flex) Tick(now float64) {
	f.reset()
	f.schedule(now, false)
}

func (f *Flex) reset() {
	f.out = f.out[:0]
	f.arena = f.arena[:0]
	f.kValid = false
}

func (f *Flex) drop(r Request, now float64) {
	f.arena = append(f.arena, r)
	n := len(f.arena)
	f.out = append(f.out, Decision{Kind: Drop, GPU: -1, Model: int(r.Model), At: now, Batch: f.arena[n-1 : n : n]})
}

// expire is paper 004 Algorithm 2 line 4: dequeue requests that can no longer meet
// their deadline even in a batch of one started now.
func (f *Flex) expire(now float64) {
	for m := range f.q {
		q := &f.q[m]
		lat1 := f.cfg.Models[m].Latency(1)
		for q.len() > 0 && now+lat1 > q.at(0).Deadline {
			f.drop(q.popFront(), now)
		}
	}
}

// refreshK computes k[m], the largest feasible batch of every model queue
// for a batch starting at now (paper 004 Algorithm 2 lines 5-13 without B_c).
func (f *Flex) refreshK(now float64) {
	for m := range f.q {
		f.k[m] = 0
		if f.q[m].len() > 0 {
			f.k[m], _ = largestFeasible(&f.q[m], nil, &f.cfg.Models[m], now, f.cfg.MaxBatch)
		}
	}
	f.kValid = true
}

// bestK returns the model with the largest k[m] (ties: lowest index), and
// the best among the models other than excl.
func (f *Flex) bestK(excl int) (best, bestK, other, otherK int) {
	best, other = -1, -1
	for m, k := range f.k {
		if k > bestK {
			best, bestK = m, k
		}
		if m != excl && k > otherK {
			other, otherK = m, k
		}
	}
	return
}

// schedule starts batches on idle GPUs and, when preempt is set, applies the
// preemption rule of paper 004 Algorithm 1 line 16 to busy GPUs; re-enqueued requests
// count as new arrivals (line 19), so it loops until nothing changes.
func (f *Flex) schedule(now float64, preempt bool) {
	f.expire(now)
	f.refreshK(now)
	for changed := true; changed; {
		changed = false
		for n := range f.g {
			g := &f.g[n]
			if !g.busy {
				m, k, _, _ := f.bestK(-1)
				if k == 0 {
					continue
				}
				f.start(n, m, k, now)
				f.k[m], _ = largestFeasible(&f.q[m], nil, &f.cfg.Models[m], now, f.cfg.MaxBatch)
				continue
			}
			if !preempt {
				continue
			}
			if f.tryPreempt(n, now) {
				changed = true
			}
		}
	}
}

// tryPreempt applies the preemption rule of paper 004 Algorithm 1 (line
// 16) to busy GPU n: B_g(n) is the
// largest feasible batch over all model queues, where the queue of the
// running model also offers the running batch's requests (Algorithm 2 lines
// 6-7), for a batch that would start at the next exit point s. It preempts
// when |B_g(n)| >= Lambda*|B_c(n)|.
func (f *Flex) tryPreempt(n int, now float64) bool {
	g := &f.g[n]
	c := len(g.batch)
	need := f.cfg.Lambda * float64(c)
	// Cheap upper bound at now (k only falls as the start time grows).
	_, _, _, otherK := f.bestK(g.model)
	sameUB := f.q[g.model].len() + c
	if sameUB > f.cfg.MaxBatch {
		sameUB = f.cfg.MaxBatch
	}
	if float64(otherK) < need && float64(sameUB) < need {
		return false
	}
	mc := &f.cfg.Models[g.model]
	s := g.nextExit(mc, now)
	if s >= g.finish {
		return false // it completes before it could stop
	}
	cand, _ := largestFeasible(&f.q[g.model], g.batch, mc, s, f.cfg.MaxBatch)
	if float64(cand) < need {
		for m := range f.q {
			if m == g.model || float64(f.k[m]) < need {
				continue
			}
			k, _ := largestFeasible(&f.q[m], nil, &f.cfg.Models[m], s, f.cfg.MaxBatch)
			if k > cand {
				cand = k
			}
		}
	}
	if float64(cand) < need {
		return false
	}
	// Preempt B_c(n) (line 17) and re-enqueue what can still meet its SLO.
	f.arena = append(f.arena, g.batch...)
	a := len(f.arena)
	f.out = append(f.out, Decision{Kind: Preempt, GPU: n, Model: g.model, BatchID: g.id, At: s, Finish: g.finish, Batch: f.arena[a-c : a : a]})
	lat1 := mc.Latency(1)
	for _, r := range g.batch {
		if s+lat1 > r.Deadline {
			f.drop(r, now)
		} else {
			f.q[g.model].insert(r)
		}
	}
	g.busy = false
	g.batch = g.batch[:0]
	// Execute B_g(n) at s (line 18): the largest feasible batch at s.
	bm, bk := -1, 0
	for m := range f.q {
		if f.q[m].len() <= bk {
			continue
		}
		k, _ := largestFeasible(&f.q[m], nil, &f.cfg.Models[m], s, f.cfg.MaxBatch)
		if k > bk {
			bm, bk = m, k
		}
	}
	f.start(n, bm, bk, s)
	f.k[g.model], _ = largestFeasible(&f.q[g.model], nil, mc, now, f.cfg.MaxBatch)
	if bm != g.model {
		f.k[bm], _ = largestFeasible(&f.q[bm], nil, &f.cfg.Models[bm], now, f.cfg.MaxBatch)
	}
	return true
}

// start dequeues the largest feasible batch of k requests of model m for a
// batch starting at s (the k earliest deadlines among those that can wait
// until s + l_m(k)) and runs it on GPU n.
func (f *Flex) start(n, m, k int, s float64) {
	mod := &f.cfg.Models[m]
	fin := s + mod.Latency(k)
	q := &f.q[m]
	i := q.firstAtLeast(fin)
	g := &f.g[n]
	g.batch = q.take(g.batch[:0], i, k)
	f.nextID++
	g.busy, g.model, g.id, g.start, g.finish = true, m, f.nextID, s, fin
	f.arena = append(f.arena, g.batch...)
	a := len(f.arena)
	f.out = append(f.out, Decision{Kind: Start, GPU: n, Model: m, BatchID: g.id, At: s, Finish: fin, Batch: f.arena[a-k : a : a]})
}
