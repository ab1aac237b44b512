// Package executor is the actor fronting one gpu.Executor. It runs one batch
// at a time (dispatched by the vertex scheduler as messages.RunBatch) in a
// goroutine it owns, sends each request's InferReply straight to the
// request's entry node, and reports messages.BatchDone to the scheduler. A
// batch whose every request has missed its deadline is preempted at the
// executor's next exit point; Preempt cancels the running batch.
package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/idn-net/idn/actors/wire"
	"github.com/idn-net/idn/gpu"
	"github.com/idn-net/idn/messages"
)

// Preempt cancels the running batch (its requests get deadline_exceeded).
type Preempt struct{}

// Config configures an executor actor.
type Config struct {
	// Node and Vertex name the node and its vertex (reported in replies).
	Node, Vertex string
	// Exec is the fronted executor.
	Exec gpu.Executor
	// Root sends replies from the batch goroutine (the system's root context).
	Root actor.SenderContext
	// Base is cancelled when the node stops; running batches are preempted.
	Base context.Context
	// WG tracks the batch goroutines (the node waits for it on Stop).
	WG *sync.WaitGroup
	// Logger receives diagnostics; nil = discard.
	Logger *slog.Logger
}

// Actor is the executor actor.
type Actor struct {
	cfg    Config
	mu     sync.Mutex
	busy   bool
	cancel context.CancelFunc
}

var _ actor.Actor = (*Actor)(nil)

// Props returns the props of an executor actor.
func Props(cfg Config) *actor.Props {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Base == nil {
		cfg.Base = context.Background()
	}
	if cfg.WG == nil {
		cfg.WG = &sync.WaitGroup{}
	}
	return actor.PropsFromProducer(func() actor.Actor { return &Actor{cfg: cfg} })
}

// ValidateBatch checks a RunBatch from the wire; errors wrap wire.ErrMalformed.
func ValidateBatch(b *messages.RunBatch) error {
	if b == nil {
		return fmt.Errorf("%w: run_batch: nil", wire.ErrMalformed)
	}
	switch {
	case b.Model == "" || len(b.Model) > wire.MaxIDLen:
		return fmt.Errorf("%w: run_batch.model: %d bytes, want 1..%d", wire.ErrMalformed, len(b.Model), wire.MaxIDLen)
	case len(b.Items) == 0 || len(b.Items) > 4096:
		return fmt.Errorf("%w: run_batch.items: %d, want 1..4096", wire.ErrMalformed, len(b.Items))
	case b.DoneTo != nil && !wire.ValidRef(b.DoneTo):
		return fmt.Errorf("%w: run_batch.done_to: missing address or id", wire.ErrMalformed)
	}
	for i, it := range b.Items {
		if it == nil {
			return fmt.Errorf("%w: run_batch.items[%d]: nil", wire.ErrMalformed, i)
		}
		if err := wire.ValidateRequest(it.Request); err != nil {
			return fmt.Errorf("run_batch.items[%d].request: %w", i, err)
		}
	}
	return nil
}

// Receive handles one message.
func (a *Actor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.RunBatch:
		a.run(ctx, m)
	case *Preempt:
		a.mu.Lock()
		if a.cancel != nil {
			a.cancel()
		}
		a.mu.Unlock()
	}
}

func (a *Actor) done(to *actor.PID, d *messages.BatchDone) {
	if to != nil {
		d.Executor = a.cfg.Exec.ID()
		d.Loaded = a.cfg.Exec.Loaded()
		a.cfg.Root.Send(to, d)
	}
}

func (a *Actor) run(ctx actor.Context, b *messages.RunBatch) {
	doneTo := wire.PID(b.GetDoneTo())
	if err := ValidateBatch(b); err != nil {
		a.cfg.Logger.Debug("executor: malformed batch", "err", err)
		if b != nil {
			a.done(doneTo, &messages.BatchDone{BatchId: b.BatchId, Ok: false, Error: err.Error()})
		}
		return
	}
	a.mu.Lock()
	if a.busy {
		a.mu.Unlock()
		a.done(doneTo, &messages.BatchDone{BatchId: b.BatchId, Ok: false, Error: gpu.ErrBusy.Error()})
		return
	}
	var deadline int64
	for _, it := range b.Items {
		d := it.Request.DeadlineUnixNano
		if d == 0 {
			deadline = 0
			break
		}
		if d > deadline {
			deadline = d
		}
	}
	var rctx context.Context
	var cancel context.CancelFunc
	if deadline > 0 {
		rctx, cancel = context.WithDeadline(a.cfg.Base, time.Unix(0, deadline))
	} else {
		rctx, cancel = context.WithCancel(a.cfg.Base)
	}
	a.busy, a.cancel = true, cancel
	a.mu.Unlock()
	a.cfg.WG.Add(1)
	go func() {
		defer a.cfg.WG.Done()
		defer func() {
			cancel()
			a.mu.Lock()
			a.busy, a.cancel = false, nil
			a.mu.Unlock()
		}()
		a.execute(rctx, b, doneTo)
	}()
}

func (a *Actor) execute(ctx context.Context, b *messages.RunBatch, doneTo *actor.PID) {
	res, err := a.cfg.Exec.Run(ctx, b.Model, len(b.Items))
	now := time.Now()
	if err != nil {
		if errors.Is(err, gpu.ErrPreempted) {
			for _, it := range b.Items {
				if to := wire.PID(it.Request.ReplyTo); to != nil {
					a.cfg.Root.Send(to, wire.ErrorReply(it.Request, messages.ErrorKind_ERROR_KIND_DEADLINE_EXCEEDED,
						"batch of model %q preempted on %s of node %q: %v", b.Model, a.cfg.Exec.ID(), a.cfg.Node, err))
				}
			}
			a.done(doneTo, &messages.BatchDone{BatchId: b.BatchId, Ok: true, Error: err.Error()})
			return
		}
		// Not loaded, busy, closed: the scheduler re-queues the batch.
		a.done(doneTo, &messages.BatchDone{BatchId: b.BatchId, Ok: false, Error: err.Error()})
		return
	}
	serviceMs := float64(res.Latency) / float64(time.Millisecond)
	for i, it := range b.Items {
		r := it.Request
		to := wire.PID(r.ReplyTo)
		if to == nil {
			continue
		}
		queueMs := 0.0
		if it.EnqueuedUnixNano > 0 {
			queueMs = float64(now.UnixNano()-it.EnqueuedUnixNano)/float64(time.Millisecond) - serviceMs
			if queueMs < 0 {
				queueMs = 0
			}
		}
		a.cfg.Root.Send(to, &messages.InferReply{
			Id: r.Id, Ok: true, Model: b.Model, ServedByVertex: a.cfg.Vertex, ServedByNode: a.cfg.Node,
			Correct: res.Correct[i], Accuracy: res.Accuracy, ServiceMs: serviceMs, QueueMs: queueMs,
			BatchSize: int32(len(b.Items)), RttMs: r.RttMs,
		})
	}
	a.done(doneTo, &messages.BatchDone{BatchId: b.BatchId, Ok: true, ServiceMs: serviceMs})
}
