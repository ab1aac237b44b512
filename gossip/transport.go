package gossip

import (
	"errors"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// dropTransport wraps memberlist's NetTransport to implement Config.Drop:
// outgoing packets/streams to a dropped address vanish, incoming packets and
// streams from a dropped address are discarded.
type dropTransport struct {
	inner    *memberlist.NetTransport
	drop     func(string) bool
	packetCh chan *memberlist.Packet
	streamCh chan net.Conn
	done     chan struct{}
	once     sync.Once
	wg       sync.WaitGroup
}

var _ memberlist.NodeAwareTransport = (*dropTransport)(nil)

var errDropped = errors.New("gossip: traffic to peer dropped by fault hook")

func newDropTransport(inner *memberlist.NetTransport, drop func(string) bool) *dropTransport {
	t := &dropTransport{
		inner:    inner,
		drop:     drop,
		packetCh: make(chan *memberlist.Packet),
		streamCh: make(chan net.Conn),
		done:     make(chan struct{}),
	}
	t.wg.Add(2)
	go t.forwardPackets()
	go t.forwardStreams()
	return t
}

func (t *dropTransport) forwardPackets() {
	defer t.wg.Done()
	for {
		select {
		case <-t.done:
			return
		case p := <-t.inner.PacketCh():
			if p.From != nil && t.drop(p.From.String()) {
				continue
			}
			select {
			case t.packetCh <- p:
			case <-t.done:
				return
			}
		}
	}
}

func (t *dropTransport) forwardStreams() {
	defer t.wg.Done()
	for {
		select {
		case <-t.done:
			return
		case c := <-t.inner.StreamCh():
			if t.drop(c.RemoteAddr().String()) {
				_ = c.Close()
				continue
			}
			select {
			case t.streamCh <- c:
			case <-t.done:
				_ = c.Close()
				return
			}
		}
	}
}

func (t *dropTransport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	return t.inner.FinalAdvertiseAddr(ip, port)
}

func (t *dropTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	if t.drop(addr) {
		return time.Now(), nil // lost in the network
	}
	return t.inner.WriteTo(b, addr)
}

func (t *dropTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	return t.WriteTo(b, a.Addr)
}

func (t *dropTransport) PacketCh() <-chan *memberlist.Packet { return t.packetCh }

func (t *dropTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	if t.drop(addr) {
		return nil, errDropped
	}
	return t.inner.DialTimeout(addr, timeout)
}

func (t *dropTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return t.DialTimeout(a.Addr, timeout)
}

func (t *dropTransport) StreamCh() <-chan net.Conn { return t.streamCh }

func (t *dropTransport) Shutdown() error {
	err := t.inner.Shutdown()
	t.once.Do(func() { close(t.done) })
	t.wg.Wait()
	return err
}
