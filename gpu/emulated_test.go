package gpu

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// fakeClock advances instantly on Sleep and cancels a context after a number of sleeps.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
	cancel func()
	after  int
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.sleeps = append(c.sleeps, d)
	n := len(c.sleeps)
	cancel := c.cancel
	c.mu.Unlock()
	if cancel != nil && n == c.after {
		cancel()
	}
	return ctx.Err()
}

func newExec(t *testing.T, clk Clock, mem float64) *Emulated {
	t.Helper()
	e, err := NewEmulated(EmulatedConfig{ID: "gpu0", MemoryMB: mem, LoadDelayPerMB: time.Millisecond, LatencyScale: 1, Clock: clk, Rand: rand.New(rand.NewPCG(1, 2))})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestLoadBudgetAndDelay(t *testing.T) {
	clk := &fakeClock{}
	e := newExec(t, clk, 500)
	m := Model{Name: "a", SizeMB: 300, Accuracy: 0.5, Profile: Profile{AlphaMs: 2, BetaMs: 10}}
	if err := e.Load(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if got := clk.sleeps[0]; got != 300*time.Millisecond {
		t.Fatalf("load delay %v, want 300ms", got)
	}
	err := e.Load(context.Background(), Model{Name: "b", SizeMB: 300, Accuracy: 0.5})
	if !errors.Is(err, ErrOverBudget) {
		t.Fatalf("over-budget load: %v", err)
	}
	if e.UsedMB() != 300 {
		t.Fatalf("used %v", e.UsedMB())
	}
	if err := e.Unload("a"); err != nil {
		t.Fatal(err)
	}
	if err := e.Unload("a"); !errors.Is(err, ErrNotLoaded) {
		t.Fatalf("double unload: %v", err)
	}
	if err := e.Load(context.Background(), Model{Name: "b", SizeMB: 300, Accuracy: 0.5}); err != nil {
		t.Fatal(err)
	}
}

func TestRunLatencyAndAccuracy(t *testing.T) {
	clk := &fakeClock{}
	e := newExec(t, clk, 1000)
	m := Model{Name: "a", SizeMB: 0, Accuracy: 0.7, Profile: Profile{AlphaMs: 2, BetaMs: 10}}
	if err := e.Load(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	res, err := e.Run(context.Background(), "a", 8)
	if err != nil {
		t.Fatal(err)
	}
	if res.Latency != 26*time.Millisecond {
		t.Fatalf("latency %v, want 26ms (2*8+10)", res.Latency)
	}
	correct, total := 0, 0
	for i := 0; i < 2000; i++ {
		r, err := e.Run(context.Background(), "a", 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range r.Correct {
			total++
			if c {
				correct++
			}
		}
	}
	if acc := float64(correct) / float64(total); acc < 0.68 || acc > 0.72 {
		t.Fatalf("empirical accuracy %v, want ~0.7", acc)
	}
	if _, err := e.Run(context.Background(), "zzz", 1); !errors.Is(err, ErrNotLoaded) {
		t.Fatalf("unknown model: %v", err)
	}
}

func TestRunPreemptedAtExitPoint(t *testing.T) {
	clk := &fakeClock{after: 2}
	e := newExec(t, clk, 1000)
	if err := e.Load(context.Background(), Model{Name: "a", Accuracy: 1, Profile: Profile{AlphaMs: 1, BetaMs: 4}}); err != nil {
		t.Fatal(err)
	}
	clk.mu.Lock()
	clk.sleeps = nil
	clk.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	clk.cancel = cancel
	_, err := e.Run(ctx, "a", 4)
	if !errors.Is(err, ErrPreempted) || !errors.Is(err, context.Canceled) {
		t.Fatalf("want preempted, got %v", err)
	}
	if len(clk.sleeps) != 2 {
		t.Fatalf("ran %d slices before preemption, want 2", len(clk.sleeps))
	}
	// The executor is free again.
	if _, err := e.Run(context.Background(), "a", 1); err != nil {
		t.Fatal(err)
	}
}

func TestConfigValidate(t *testing.T) {
	if _, err := NewEmulated(EmulatedConfig{ID: "x", MemoryMB: 0}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("want ErrInvalid, got %v", err)
	}
	if _, err := NewEmulated(EmulatedConfig{ID: "x", MemoryMB: 1, LatencyScale: -1}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("want ErrInvalid, got %v", err)
	}
}
