// Package gpu defines the Executor interface the serving actors drive (one
// executor per GPU) and an emulated executor whose batch latency follows the
// profile alpha*|B|+beta of paper 004 (Table 4), with exit points at which a
// running batch can be preempted, a memory budget and a model load delay.
//
// The emulated executor takes its clock and its randomness from the caller,
// so tests are deterministic; per request it returns a correct/incorrect
// outcome drawn with the model's accuracy, which makes accuracy measurable
// end to end.
package gpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Sentinel errors callers branch on with errors.Is.
var (
	// ErrOverBudget is returned by Load when the model does not fit the free memory.
	ErrOverBudget = errors.New("gpu: model does not fit memory budget")
	// ErrNotLoaded is returned when a model is used before it is loaded.
	ErrNotLoaded = errors.New("gpu: model not loaded")
	// ErrBusy is returned by Run while another batch is running on the executor.
	ErrBusy = errors.New("gpu: executor busy")
	// ErrPreempted is returned by Run when its context ended at an exit point.
	ErrPreempted = errors.New("gpu: batch preempted")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("gpu: executor closed")
	// ErrInvalid marks invalid arguments or configuration.
	ErrInvalid = errors.New("gpu: invalid")
)

// Profile gives the batch latency of a model on one GPU: alpha*|B|+beta
// milliseconds for a batch B (paper 004, Table 4).
type Profile struct {
	// AlphaMs is the per-request latency slope in milliseconds.
	AlphaMs float64
	// BetaMs is the fixed per-batch latency in milliseconds.
	BetaMs float64
}

// BatchLatency returns alpha*n+beta as a duration (0 for n <= 0).
func (p Profile) BatchLatency(n int) time.Duration {
	if n <= 0 {
		return 0
	}
	ms := p.AlphaMs*float64(n) + p.BetaMs
	return time.Duration(ms * float64(time.Millisecond))
}

// Validate reports negative or non-finite coefficients.
func (p Profile) Validate() error {
	if p.AlphaMs < 0 || math.IsNaN(p.AlphaMs) || math.IsInf(p.AlphaMs, 0) {
		return fmt.Errorf("%w: alpha_ms: %v must be finite and >= 0", ErrInvalid, p.AlphaMs)
	}
	if p.BetaMs < 0 || math.IsNaN(p.BetaMs) || math.IsInf(p.BetaMs, 0) {
		return fmt.Errorf("%w: beta_ms: %v must be finite and >= 0", ErrInvalid, p.BetaMs)
	}
	return nil
}

// Model describes a model to load on an executor.
type Model struct {
	// Name identifies the model (catalog name).
	Name string
	// SizeMB is the GPU memory the loaded model occupies.
	SizeMB float64
	// Accuracy in [0,1] is the probability an answer is correct.
	Accuracy float64
	// Profile is the model's batch latency on this executor's GPU.
	Profile Profile
}

// Validate checks the model's fields.
func (m Model) Validate() error {
	switch {
	case m.Name == "":
		return fmt.Errorf("%w: model name: empty", ErrInvalid)
	case m.SizeMB < 0 || math.IsNaN(m.SizeMB) || math.IsInf(m.SizeMB, 0):
		return fmt.Errorf("%w: model %q size_mb: %v must be finite and >= 0", ErrInvalid, m.Name, m.SizeMB)
	case m.Accuracy < 0 || m.Accuracy > 1 || math.IsNaN(m.Accuracy):
		return fmt.Errorf("%w: model %q accuracy: %v outside [0,1]", ErrInvalid, m.Name, m.Accuracy)
	}
	if err := m.Profile.Validate(); err != nil {
		return fmt.Errorf("model %q profile: %w", m.Name, err)
	}
	return nil
}

// Result is the outcome of one batch.
type Result struct {
	// Correct holds, per request of the batch in order, whether its answer is correct.
	Correct []bool
	// Latency is the batch's service time.
	Latency time.Duration
	// Accuracy is the model's accuracy.
	Accuracy float64
}

// Executor is one GPU serving loaded models one batch at a time.
type Executor interface {
	// ID names the executor (unique within a node).
	ID() string
	// MemoryMB is the memory capacity.
	MemoryMB() float64
	// UsedMB is the memory taken by loaded models.
	UsedMB() float64
	// Loaded lists the loaded model names, sorted.
	Loaded() []string
	// Load loads a model after the load delay; ErrOverBudget when it does not fit.
	// Loading an already loaded model is a no-op.
	Load(ctx context.Context, m Model) error
	// Unload frees a model's memory; ErrNotLoaded when absent.
	Unload(name string) error
	// Profile returns a loaded model's latency profile.
	Profile(name string) (Profile, error)
	// Run executes a batch of n requests of a loaded model. The context is
	// checked at every exit point; when it has ended Run returns an error
	// wrapping ErrPreempted and the context's error.
	Run(ctx context.Context, model string, n int) (Result, error)
	// Close releases the executor; later calls return ErrClosed.
	Close() error
}

// Clock is the time source of an emulated executor.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Sleep waits d or until ctx ends (then it returns ctx.Err()).
	Sleep(ctx context.Context, d time.Duration) error
}

// RealClock is the wall clock.
type RealClock struct{}

var _ Clock = RealClock{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// Sleep waits d or until ctx ends.
func (RealClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
