package consensus

import (
	"errors"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// streamLayer is raft's TCP stream layer with a concrete advertise address
// (port 0 resolved to the bound port) and the optional Drop fault hook.
// It tracks every connection and closes them all on Close: raft's
// NetworkTransport leaves accepted connections (and their goroutines) open
// after Close otherwise.
type streamLayer struct {
	ln        net.Listener
	advertise net.Addr
	drop      func(string) bool

	mu     sync.Mutex
	conns  map[*trackedConn]struct{}
	closed bool
}

var _ raft.StreamLayer = (*streamLayer)(nil)

var errDropped = errors.New("consensus: traffic to peer dropped by fault hook")

func newStreamLayer(bind, advertise string, drop func(string) bool) (*streamLayer, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	bound := ln.Addr().(*net.TCPAddr)
	adv := &net.TCPAddr{IP: bound.IP, Port: bound.Port}
	if advertise != "" {
		h, p, _ := net.SplitHostPort(advertise)
		adv.IP = net.ParseIP(h)
		if p != "0" {
			a, err := net.ResolveTCPAddr("tcp", advertise)
			if err != nil {
				_ = ln.Close()
				return nil, err
			}
			adv.Port = a.Port
		}
	}
	if adv.IP == nil || adv.IP.IsUnspecified() {
		_ = ln.Close()
		return nil, errors.New("advertise address must be a concrete IP (set AdvertiseAddr when binding 0.0.0.0)")
	}
	return &streamLayer{ln: ln, advertise: adv, drop: drop, conns: map[*trackedConn]struct{}{}}, nil
}

func (s *streamLayer) Accept() (net.Conn, error) {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return nil, err
		}
		if s.drop == nil {
			return s.track(c)
		}
		remote := c.RemoteAddr().String()
		if s.drop(remote) {
			_ = c.Close()
			continue
		}
		return s.track(&dropConn{Conn: c, peer: remote, drop: s.drop})
	}
}

func (s *streamLayer) track(c net.Conn) (net.Conn, error) {
	tc := &trackedConn{Conn: c, s: s}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = c.Close()
		return nil, net.ErrClosed
	}
	s.conns[tc] = struct{}{}
	return tc, nil
}

// Close stops accepting and closes every connection of this layer.
func (s *streamLayer) Close() error {
	err := s.ln.Close()
	s.mu.Lock()
	s.closed = true
	conns := s.conns
	s.conns = map[*trackedConn]struct{}{}
	s.mu.Unlock()
	for c := range conns {
		_ = c.Conn.Close()
	}
	return err
}

type trackedConn struct {
	net.Conn
	s *streamLayer
}

func (c *trackedConn) Close() error {
	c.s.mu.Lock()
	delete(c.s.conns, c)
	c.s.mu.Unlock()
	return c.Conn.Close()
}
func (s *streamLayer) Addr() net.Addr { return s.advertise }

func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	addr := string(address)
	if s.drop != nil && s.drop(addr) {
		return nil, errDropped
	}
	d := net.Dialer{Timeout: timeout}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	if s.drop == nil {
		return s.track(c)
	}
	return s.track(&dropConn{Conn: c, peer: addr, drop: s.drop})
}

// dropConn closes itself once the fault hook starts dropping its peer, so
// pooled connections do not outlive a partition.
type dropConn struct {
	net.Conn
	peer string
	drop func(string) bool
	once sync.Once
}

func (c *dropConn) check() error {
	if c.drop(c.peer) {
		c.once.Do(func() { _ = c.Conn.Close() })
		return errDropped
	}
	return nil
}

func (c *dropConn) Read(p []byte) (int, error) {
	if err := c.check(); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

func (c *dropConn) Write(p []byte) (int, error) {
	if err := c.check(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}
