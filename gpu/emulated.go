package gpu

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"time"
)

// EmulatedConfig configures an emulated executor.
type EmulatedConfig struct {
	// ID names the executor.
	ID string
	// MemoryMB is the memory budget (> 0).
	MemoryMB float64
	// LoadDelayPerMB is the emulated load time per MB of model (0 = instant).
	LoadDelayPerMB time.Duration
	// ExitPoints is the number of points, evenly spaced over a batch, at which
	// Run checks its context (>= 1; 0 means 4).
	ExitPoints int
	// LatencyScale multiplies every profiled latency (1 = as profiled,
	// 0 = zero-latency executor for benchmarks). Negative is invalid.
	LatencyScale float64
	// Clock is the time source; nil = RealClock.
	Clock Clock
	// Rand draws the per-request outcomes; nil = a PCG source seeded from ID.
	// It is used under the executor's lock.
	Rand *rand.Rand
}

// Validate checks the configuration; errors name the field.
func (c EmulatedConfig) Validate() error {
	switch {
	case c.ID == "":
		return fmt.Errorf("%w: id: empty", ErrInvalid)
	case c.MemoryMB <= 0 || math.IsNaN(c.MemoryMB) || math.IsInf(c.MemoryMB, 0):
		return fmt.Errorf("%w: memory_mb: %v must be positive and finite", ErrInvalid, c.MemoryMB)
	case c.LoadDelayPerMB < 0:
		return fmt.Errorf("%w: load_delay_per_mb: %v is negative", ErrInvalid, c.LoadDelayPerMB)
	case c.ExitPoints < 0:
		return fmt.Errorf("%w: exit_points: %d is negative", ErrInvalid, c.ExitPoints)
	case c.LatencyScale < 0 || math.IsNaN(c.LatencyScale) || math.IsInf(c.LatencyScale, 0):
		return fmt.Errorf("%w: latency_scale: %v must be finite and >= 0", ErrInvalid, c.LatencyScale)
	}
	return nil
}

// Emulated is an Executor that sleeps the profiled batch latency on its clock.
type Emulated struct {
	cfg EmulatedConfig

	mu      sync.Mutex
	models  map[string]Model
	loading map[string]bool
	usedMB  float64
	running bool
	closed  bool
	rng     *rand.Rand
}

var _ Executor = (*Emulated)(nil)

// NewEmulated returns an emulated executor.
func NewEmulated(cfg EmulatedConfig) (*Emulated, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.ExitPoints == 0 {
		cfg.ExitPoints = 4
	}
	if cfg.Clock == nil {
		cfg.Clock = RealClock{}
	}
	rng := cfg.Rand
	if rng == nil {
		var seed uint64 = 1469598103934665603
		for _, b := range []byte(cfg.ID) {
			seed = (seed ^ uint64(b)) * 1099511628211
		}
		rng = rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	}
	return &Emulated{cfg: cfg, models: map[string]Model{}, loading: map[string]bool{}, rng: rng}, nil
}

// ID names the executor.
func (e *Emulated) ID() string { return e.cfg.ID }

// MemoryMB is the memory capacity.
func (e *Emulated) MemoryMB() float64 { return e.cfg.MemoryMB }

// UsedMB is the memory taken by loaded (and loading) models.
func (e *Emulated) UsedMB() float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.usedMB
}

// Loaded lists the loaded models, sorted.
func (e *Emulated) Loaded() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]string, 0, len(e.models))
	for n := range e.models {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Load reserves the model's memory, waits the load delay and marks it loaded.
func (e *Emulated) Load(ctx context.Context, m Model) error {
	if err := m.Validate(); err != nil {
		return err
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return ErrClosed
	}
	if _, ok := e.models[m.Name]; ok {
		e.mu.Unlock()
		return nil
	}
	if e.loading[m.Name] {
		e.mu.Unlock()
		return fmt.Errorf("%w: model %q: already loading", ErrBusy, m.Name)
	}
	if e.usedMB+m.SizeMB > e.cfg.MemoryMB+1e-9 {
		used := e.usedMB
		e.mu.Unlock()
		return fmt.Errorf("%w: model %q size_mb %v, used %v of %v MB on %s", ErrOverBudget, m.Name, m.SizeMB, used, e.cfg.MemoryMB, e.cfg.ID)
	}
	e.usedMB += m.SizeMB
	e.loading[m.Name] = true
	e.mu.Unlock()

	delay := time.Duration(m.SizeMB * float64(e.cfg.LoadDelayPerMB))
	err := e.cfg.Clock.Sleep(ctx, delay)

	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.loading, m.Name)
	if err != nil || e.closed {
		e.usedMB -= m.SizeMB
		if err == nil {
			return ErrClosed
		}
		return fmt.Errorf("gpu: load of model %q on %s interrupted: %w", m.Name, e.cfg.ID, err)
	}
	e.models[m.Name] = m
	return nil
}

// Unload frees the model's memory.
func (e *Emulated) Unload(name string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	m, ok := e.models[name]
	if !ok {
		return fmt.Errorf("%w: model %q on %s", ErrNotLoaded, name, e.cfg.ID)
	}
	delete(e.models, name)
	e.usedMB -= m.SizeMB
	if e.usedMB < 0 {
		e.usedMB = 0
	}
	return nil
}

// Profile returns the (scaled) profile of a loaded model.
func (e *Emulated) Profile(name string) (Profile, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	m, ok := e.models[name]
	if !ok {
		return Profile{}, fmt.Errorf("%w: model %q on %s", ErrNotLoaded, name, e.cfg.ID)
	}
	return Profile{AlphaMs: m.Profile.AlphaMs * e.cfg.LatencyScale, BetaMs: m.Profile.BetaMs * e.cfg.LatencyScale}, nil
}

// Run sleeps alpha*n+beta in ExitPoints slices, checking ctx before each,
// and draws one outcome per request with the model's accuracy.
func (e *Emulated) Run(ctx context.Context, model string, n int) (Result, error) {
	if n <= 0 {
		return Result{}, fmt.Errorf("%w: batch size %d must be positive", ErrInvalid, n)
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return Result{}, ErrClosed
	}
	m, ok := e.models[model]
	if !ok {
		e.mu.Unlock()
		return Result{}, fmt.Errorf("%w: model %q on %s", ErrNotLoaded, model, e.cfg.ID)
	}
	if e.running {
		e.mu.Unlock()
		return Result{}, fmt.Errorf("%w: %s", ErrBusy, e.cfg.ID)
	}
	e.running = true
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.running = false
		e.mu.Unlock()
	}()

	prof := Profile{AlphaMs: m.Profile.AlphaMs * e.cfg.LatencyScale, BetaMs: m.Profile.BetaMs * e.cfg.LatencyScale}
	total := prof.BatchLatency(n)
	start := e.cfg.Clock.Now()
	if total > 0 {
		k := e.cfg.ExitPoints
		slice := total / time.Duration(k)
		rest := total - slice*time.Duration(k)
		for i := 0; i < k; i++ {
			if err := ctx.Err(); err != nil {
				return Result{}, fmt.Errorf("%w: model %q at exit point %d/%d: %w", ErrPreempted, model, i, k, err)
			}
			d := slice
			if i == k-1 {
				d += rest
			}
			if err := e.cfg.Clock.Sleep(ctx, d); err != nil {
				return Result{}, fmt.Errorf("%w: model %q at exit point %d/%d: %w", ErrPreempted, model, i+1, k, err)
			}
		}
	} else if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("%w: model %q at exit point 0: %w", ErrPreempted, model, err)
	}
	res := Result{Correct: make([]bool, n), Accuracy: m.Accuracy}
	e.mu.Lock()
	for i := range res.Correct {
		res.Correct[i] = e.rng.Float64() < m.Accuracy
	}
	e.mu.Unlock()
	res.Latency = e.cfg.Clock.Now().Sub(start)
	if res.Latency < total {
		res.Latency = total
	}
	return res, nil
}

// Close marks the executor closed and unloads everything.
func (e *Emulated) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	e.models = map[string]Model{}
	e.usedMB = 0
	return nil
}
