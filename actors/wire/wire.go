// Package wire holds the helpers every serving actor uses on the wire types
// of package messages: validation of incoming requests (a malformed wire
// message is rejected with an error naming the field, never a panic),
// conversions between messages.ActorRef and actor PIDs, copies of requests
// (a request is immutable once sent), and error replies.
package wire

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/idn-net/idn/messages"
)

// ErrMalformed marks an incoming wire message that fails validation.
var ErrMalformed = errors.New("wire: malformed message")

// Limits on incoming requests.
const (
	// MaxPathLen bounds the routing path length.
	MaxPathLen = 64
	// MaxIDLen bounds request ids, task names and vertex names.
	MaxIDLen = 256
	// MaxPayload bounds the opaque payload.
	MaxPayload = 16 << 20
)

// PID converts a reference to a PID; nil for a nil or incomplete reference.
func PID(r *messages.ActorRef) *actor.PID {
	if r == nil || r.Address == "" || r.Id == "" {
		return nil
	}
	return actor.NewPID(r.Address, r.Id)
}

// Ref converts a PID to a reference.
func Ref(p *actor.PID) *messages.ActorRef {
	if p == nil {
		return nil
	}
	return &messages.ActorRef{Address: p.Address, Id: p.Id}
}

// ValidRef reports whether r names an actor.
func ValidRef(r *messages.ActorRef) bool {
	return r != nil && r.Address != "" && r.Id != "" && len(r.Address) <= MaxIDLen && len(r.Id) <= MaxIDLen
}

// ValidateRequest checks a request received from the wire (or built by the
// entry node once its path is fixed). Errors wrap ErrMalformed and name the field.
func ValidateRequest(r *messages.InferRequest) error {
	if r == nil {
		return fmt.Errorf("%w: request: nil", ErrMalformed)
	}
	switch {
	case r.Id == "" || len(r.Id) > MaxIDLen:
		return fmt.Errorf("%w: id: %d bytes, want 1..%d", ErrMalformed, len(r.Id), MaxIDLen)
	case r.Task == "" || len(r.Task) > MaxIDLen:
		return fmt.Errorf("%w: task: %d bytes, want 1..%d", ErrMalformed, len(r.Task), MaxIDLen)
	case math.IsNaN(r.MinAccuracy) || r.MinAccuracy < 0 || r.MinAccuracy > 1:
		return fmt.Errorf("%w: min_accuracy: %v outside [0,1]", ErrMalformed, r.MinAccuracy)
	case r.DeadlineUnixNano < 0:
		return fmt.Errorf("%w: deadline_unix_nano: %d is negative", ErrMalformed, r.DeadlineUnixNano)
	case len(r.Path) == 0 || len(r.Path) > MaxPathLen:
		return fmt.Errorf("%w: path: %d vertices, want 1..%d", ErrMalformed, len(r.Path), MaxPathLen)
	case r.Hop < 0 || int(r.Hop) >= len(r.Path):
		return fmt.Errorf("%w: hop: %d outside path of %d vertices", ErrMalformed, r.Hop, len(r.Path))
	case !ValidRef(r.ReplyTo):
		return fmt.Errorf("%w: reply_to: missing address or id", ErrMalformed)
	case r.AckTo != nil && !ValidRef(r.AckTo):
		return fmt.Errorf("%w: ack_to: missing address or id", ErrMalformed)
	case len(r.Payload) > MaxPayload:
		return fmt.Errorf("%w: payload: %d bytes exceeds %d", ErrMalformed, len(r.Payload), MaxPayload)
	case math.IsNaN(r.RttMs) || math.IsInf(r.RttMs, 0) || r.RttMs < 0:
		return fmt.Errorf("%w: rtt_ms: %v must be finite and >= 0", ErrMalformed, r.RttMs)
	}
	for i, v := range r.Path {
		if v == "" || len(v) > MaxIDLen {
			return fmt.Errorf("%w: path[%d]: %d bytes, want 1..%d", ErrMalformed, i, len(v), MaxIDLen)
		}
	}
	return nil
}

// Copy returns a new request equal to r (slices and refs shared: they are never mutated).
func Copy(r *messages.InferRequest) *messages.InferRequest {
	return &messages.InferRequest{
		Id: r.Id, Task: r.Task, MinAccuracy: r.MinAccuracy, DeadlineUnixNano: r.DeadlineUnixNano,
		Path: r.Path, Hop: r.Hop, ReplyTo: r.ReplyTo, AckTo: r.AckTo, ForwardId: r.ForwardId,
		EntryNode: r.EntryNode, AcceptedUnixNano: r.AcceptedUnixNano, Payload: r.Payload, RttMs: r.RttMs,
	}
}

// Expired reports whether the request's deadline has passed at now.
func Expired(r *messages.InferRequest, now time.Time) bool {
	return r.DeadlineUnixNano > 0 && now.UnixNano() >= r.DeadlineUnixNano
}

// ErrorReply builds the error reply to r.
func ErrorReply(r *messages.InferRequest, kind messages.ErrorKind, format string, args ...any) *messages.InferReply {
	return &messages.InferReply{Id: r.GetId(), Ok: false, ErrorKind: kind, Error: fmt.Sprintf(format, args...), RttMs: r.GetRttMs()}
}

// KindName is the name of an error kind used by the HTTP API and metrics.
func KindName(k messages.ErrorKind) string {
	switch k {
	case messages.ErrorKind_ERROR_KIND_BAD_REQUEST:
		return "bad_request"
	case messages.ErrorKind_ERROR_KIND_DEADLINE_EXCEEDED:
		return "deadline_exceeded"
	case messages.ErrorKind_ERROR_KIND_OVERLOADED:
		return "overloaded"
	case messages.ErrorKind_ERROR_KIND_UNREACHABLE:
		return "unreachable"
	default:
		return "internal"
	}
}

// Out is one message an actor core wants sent: to To, after Delay.
type Out struct {
	// To is the target.
	To *actor.PID
	// Msg is the message.
	Msg any
	// Delay postpones the send (edge RTT emulation, ticks); 0 = now.
	Delay time.Duration
}

// Delayer runs a function after a delay (timing.Delayer implements it).
type Delayer interface {
	// After runs fn once d has elapsed.
	After(d time.Duration, fn func())
}

// Send delivers outs: immediate ones through ctx, delayed ones through the
// delayer and root (the system's root context, safe from any goroutine).
func Send(ctx actor.SenderContext, root actor.SenderContext, d Delayer, outs []Out) {
	for _, o := range outs {
		if o.To == nil {
			continue
		}
		if o.Delay > 0 && d != nil {
			to, msg := o.To, o.Msg
			d.After(o.Delay, func() { root.Send(to, msg) })
			continue
		}
		ctx.Send(o.To, o.Msg)
	}
}
