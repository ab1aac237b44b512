package flex

// Clockwork is the Clockwork-like baseline of paper 004 Sec. 7: an online
// global scheduler over all GPUs of its group that serves the tightest
// deadline first and never preempts. When a GPU is free it takes the queued
// request with the earliest deadline (over all models) and batches with it
// as many requests of the same model, in deadline order, as still let that
// earliest deadline be met: the largest k with now + alpha*k + beta <= d_head.
//
// Reading chosen: Clockwork itself plans actions ahead on per-worker action
// queues with its own latency predictions; paper 004 characterises it only as
// "prioritizes requests based on how close their deadline is" and as
// non-preemptive, which is what this reproduces.
type Clockwork struct {
	cfg   Config
	q     []queue
	g     []gpuState
	out   []Decision
	arena []Request
	id    uint64
}

var _ Scheduler = (*Clockwork)(nil)

// NewClockwork returns the Clockwork-like scheduler. Lambda and Preemption
// of cfg are ignored.
func NewClockwork(cfg Config) (*Clockwork, error) {
	cfg.Lambda = 1
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Models = append([]Model(nil), cfg.Models...)
	c := &Clockwork{cfg: cfg, q: make([]queue, len(cfg.Models)), g: make([]gpuState, cfg.GPUs)}
	for i := range c.g {
		c.g[i].batch = make([]Request, 0, cfg.MaxBatch)
	}
	return c, nil
}

// Name is "clockwork".
func (c *Clockwork) Name() string { return "clockwork" }

// Decisions returns the decisions of the last event.
func (c *Clockwork) Decisions() []Decision { return c.out }

// Queued returns the number of queued requests.
func (c *Clockwork) Queued() int {
	n := 0
	for i := range c.q {
		n += c.q[i].len()
	}
	return n
}

// Arrive enqueues r and fills idle GPUs.
func (c *Clockwork) Arrive(r Request, now float64) {
	c.reset()
	if now+c.cfg.Models[r.Model].Latency(1) > r.Deadline {
		c.dropReq(r, now)
		return
	}
	c.q[r.Model].insert(r)
	c.fill(now)
}

// Complete frees the GPU and fills idle GPUs.
func (c *Clockwork) Complete(gpu int, batchID uint64, now float64) {
	c.reset()
	if gpu < 0 || gpu >= len(c.g) || !c.g[gpu].busy || c.g[gpu].id != batchID {
		return
	}
	c.g[gpu].busy = false
	c.g[gpu].batch = c.g[gpu].batch[:0]
	c.fill(now)
}

// Tick drops expired requests.
func (c *Clockwork) Tick(now float64) {
	c.reset()
	c.fill(now)
}

func (c *Clockwork) reset() { c.out = c.out[:0]; c.arena = c.arena[:0] }

func (c *Clockwork) dropReq(r Request, now float64) {
	c.arena = append(c.arena, r)
	n := len(c.arena)
	c.out = append(c.out, Decision{Kind: Drop, GPU: -1, Model: int(r.Model), At: now, Batch: c.arena[n-1 : n : n]})
}

func (c *Clockwork) fill(now float64) {
	for m := range c.q {
		q := &c.q[m]
		lat1 := c.cfg.Models[m].Latency(1)
		for q.len() > 0 && now+lat1 > q.at(0).Deadline {
			c.dropReq(q.popFront(), now)
		}
	}
	for n := range c.g {
		g := &c.g[n]
		if g.busy {
			continue
		}
		best := -1
		for m := range c.q {
			if c.q[m].len() > 0 && (best < 0 || c.q[m].at(0).Deadline < c.q[best].at(0).Deadline) {
				best = m
			}
		}
		if best < 0 {
			return
		}
		q := &c.q[best]
		mod := &c.cfg.Models[best]
		dh := q.at(0).Deadline
		k := int((dh - now - mod.Beta) / mod.Alpha)
		if k > q.len() {
			k = q.len()
		}
		if k > c.cfg.MaxBatch {
			k = c.cfg.MaxBatch
		}
		for k > 1 && now+mod.Latency(k) > dh { // guard against rounding
			k--
		}
		if k < 1 {
			k = 1
		}
		g.batch = q.take(g.batch[:0], q.head, k)
		c.id++
		fin := now + mod.Latency(k)
		g.busy, g.model, g.id, g.start, g.finish = true, best, c.id, now, fin
		c.arena = append(c.arena, g.batch...)
		a := len(c.arena)
		c.out = append(c.out, Decision{Kind: Start, GPU: n, Model: best, BatchID: c.id, At: now, Finish: fin, Batch: c.arena[a-k : a : a]})
	}
}
