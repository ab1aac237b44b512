package node

import (
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	_ "github.com/idn-net/idn/messages" // registers the wire types by full name
)

// wirePackage is the only protobuf package accepted from the network.
const wirePackage = "idn.messages."

// guardStats counts what the wire guard dropped.
type guardStats struct {
	dropped  atomic.Uint64
	panicked atomic.Uint64
}

// allowedType reports whether a type name received from the wire may be
// deserialized: a message of package idn.messages known to this binary.
func allowedType(name string) (protoreflect.MessageType, bool) {
	if !strings.HasPrefix(name, wirePackage) || len(name) > 256 {
		return nil, false
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(name))
	if err != nil {
		return nil, false
	}
	return mt, true
}

// SanitizeRemoteMessage makes a message received by the protoactor remote
// endpoint safe for its reader, which indexes slices and dereferences
// pointers unchecked and panics on an unknown type name: envelopes with an
// out-of-range index, a serializer other than protobuf, a type outside
// package idn.messages, nil PIDs or undecodable data are removed; nil
// batches and connection requests are emptied. It returns the number of
// envelopes removed and never panics.
func SanitizeRemoteMessage(m *remote.RemoteMessage) (dropped int) {
	if m == nil {
		return 0
	}
	switch t := m.MessageType.(type) {
	case nil:
	case *remote.RemoteMessage_MessageBatch:
		if t.MessageBatch == nil {
			t.MessageBatch = &remote.MessageBatch{}
		}
		return sanitizeBatch(t.MessageBatch)
	case *remote.RemoteMessage_ConnectRequest:
		c := t.ConnectRequest
		ok := false
		if c != nil {
			switch ct := c.ConnectionType.(type) {
			case *remote.ConnectRequest_ServerConnection:
				ok = ct.ServerConnection != nil
			case *remote.ConnectRequest_ClientConnection:
				ok = ct.ClientConnection != nil
			}
		}
		if !ok {
			m.MessageType = nil
			return 1
		}
	case *remote.RemoteMessage_ConnectResponse, *remote.RemoteMessage_DisconnectRequest:
		// Only meaningful to the client side; the reader ignores them.
	default:
		m.MessageType = nil
		return 1
	}
	return 0
}

func sanitizeBatch(b *remote.MessageBatch) int {
	types := make([]protoreflect.MessageType, len(b.TypeNames))
	for i, n := range b.TypeNames {
		if mt, ok := allowedType(n); ok {
			types[i] = mt
		}
	}
	for i, p := range b.Targets {
		if p == nil || p.Id == "" {
			b.Targets[i] = nil
		}
	}
	keep := b.Envelopes[:0]
	dropped := 0
	for _, e := range b.Envelopes {
		if e == nil || e.SerializerId != 0 ||
			e.TypeId < 0 || int(e.TypeId) >= len(types) || types[e.TypeId] == nil ||
			e.Target < 0 || int(e.Target) >= len(b.Targets) || b.Targets[e.Target] == nil ||
			e.Sender < 0 || int(e.Sender) > len(b.Senders) || (e.Sender > 0 && b.Senders[e.Sender-1] == nil) {
			dropped++
			continue
		}
		if err := proto.Unmarshal(e.MessageData, types[e.TypeId].New().Interface()); err != nil {
			dropped++
			continue
		}
		keep = append(keep, e)
	}
	for i := len(keep); i < len(b.Envelopes); i++ {
		b.Envelopes[i] = nil
	}
	b.Envelopes = keep
	return dropped
}

// guardedStream sanitizes every message the remote endpoint reader receives.
type guardedStream struct {
	grpc.ServerStream
	stats *guardStats
	log   *slog.Logger
}

// RecvMsg receives and sanitizes one message.
func (s *guardedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if rm, ok := m.(*remote.RemoteMessage); ok {
		if n := SanitizeRemoteMessage(rm); n > 0 {
			s.stats.dropped.Add(uint64(n))
			s.log.Warn("remote: dropped malformed wire messages", "count", n)
		}
	}
	return nil
}

// guardInterceptor wraps the remote's gRPC streams: messages are sanitized
// before the endpoint reader sees them, and a panic in the reader closes the
// stream with an error instead of crashing the node.
func guardInterceptor(stats *guardStats, log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		defer func() {
			if r := recover(); r != nil {
				stats.panicked.Add(1)
				log.Error("remote: recovered panic in endpoint reader", "method", info.FullMethod, "panic", fmt.Sprint(r))
				err = status.Error(codes.Internal, "malformed message")
			}
		}()
		return handler(srv, &guardedStream{ServerStream: ss, stats: stats, log: log})
	}
}
