package router

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/idn-net/idn/actors/wire"
)

// GetStats asks the router actor for its Stats (answered with ctx.Respond).
type GetStats struct{}

// Actor is the protoactor shell around Core.
type Actor struct {
	core  *Core
	root  actor.SenderContext
	delay wire.Delayer
}

var _ actor.Actor = (*Actor)(nil)

// Props returns the props of a router actor. root is the actor system's
// root context and delay the node's delayer (RTT emulation and ticks).
func Props(cfg Config, root actor.SenderContext, delay wire.Delayer) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &Actor{core: NewCore(cfg), root: root, delay: delay}
	})
}

// Receive handles one message.
func (a *Actor) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		a.scheduleTick(ctx.Self())
		return
	case *actor.Stopping, *actor.Stopped, *actor.Restarting:
		return
	case *GetStats:
		ctx.Respond(a.core.Stats())
		return
	case *Tick:
		a.scheduleTick(ctx.Self())
	}
	wire.Send(ctx, a.root, a.delay, a.core.Handle(time.Now(), ctx.Message()))
}

func (a *Actor) scheduleTick(self *actor.PID) {
	if a.delay == nil {
		return
	}
	root := a.root
	a.delay.After(a.core.cfg.TickEvery, func() { root.Send(self, &Tick{}) })
}
