package scheduler

import (
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/idn-net/idn/actors/wire"
)

// GetStats asks the scheduler actor for its Stats (answered with ctx.Respond).
type GetStats struct{}

// Handover asks the scheduler to give its queued requests back to the local
// router for redelivery (sent with a request; answered when done), before it
// is stopped on leadership loss.
type Handover struct{}

// Actor is the protoactor shell around Core.
type Actor struct {
	core  *Core
	root  actor.SenderContext
	delay wire.Delayer
	init  []any
	gen   uint64
}

// generations numbers scheduler incarnations (see Tick.Gen).
var generations atomic.Uint64

var _ actor.Actor = (*Actor)(nil)

// Props returns the props of a scheduler actor; init messages (e.g. a
// view.MembersSnapshot and view.LeaderChanged) are applied when it starts.
func Props(cfg Config, root actor.SenderContext, delay wire.Delayer, init ...any) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &Actor{core: NewCore(cfg), root: root, delay: delay, init: init, gen: generations.Add(1)}
	})
}

// Receive handles one message. Everything but the lifecycle, GetStats and
// Handover goes to Core.Handle: requests, BatchDone, Tick, HostedChanged,
// view updates and, in INFIDA mode, UpstreamCosts from the allocator.
func (a *Actor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		for _, m := range a.init {
			wire.Send(ctx, a.root, a.delay, a.core.Handle(time.Now(), m))
		}
		a.scheduleTick(ctx.Self())
		return
	case *actor.Stopping:
		wire.Send(ctx, a.root, nil, a.core.Drain())
		return
	case *actor.Stopped, *actor.Restarting:
		return
	case *GetStats:
		ctx.Respond(a.core.Stats())
		return
	case *Handover:
		wire.Send(ctx, a.root, nil, a.core.Handover())
		ctx.Respond(&Handover{})
		return
	case *Tick:
		if m.Gen != a.gen {
			return
		}
		a.scheduleTick(ctx.Self())
	}
	wire.Send(ctx, a.root, a.delay, a.core.Handle(time.Now(), ctx.Message()))
}

func (a *Actor) scheduleTick(self *actor.PID) {
	if a.delay == nil {
		return
	}
	root, gen := a.root, a.gen
	a.delay.After(a.core.cfg.TickEvery, func() { root.Send(self, &Tick{Gen: gen}) })
}
