package gossip

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/idn-net/idn/internal/hostport"
)

// MaxMetaSize is memberlist's limit on encoded node metadata (memberlist
// panics at Create above it; New returns an error instead).
const MaxMetaSize = 512

// Config configures one node's gossip membership. Build it from DefaultConfig
// (LAN) or DefaultLocalConfig (loopback tests) and override fields.
type Config struct {
	// NodeName is the unique name of this node in the cluster. memberlist
	// refuses two live nodes with the same name; it is also the Raft node id.
	NodeName string

	// BindAddr is the host:port memberlist listens on for UDP and TCP (same
	// port for both). Port 0 picks a free port; Addr reports the bound one.
	BindAddr string

	// AdvertiseAddr is the host:port other nodes use to reach this node; empty
	// means the bound address. Needed when BindAddr is 0.0.0.0 or behind NAT.
	// Its port may be 0 to mean the bound port.
	AdvertiseAddr string

	// Seeds are host:port addresses of nodes to join through. Join succeeds as
	// soon as any one answers. Empty: this node starts a new cluster.
	Seeds []string

	// SecretKey optionally encrypts all gossip (AES-GCM, memberlist keyring).
	// Must be 16, 24 or 32 bytes; every node of a cluster needs the same key.
	// Nodes with a different key cannot join.
	SecretKey []byte

	// Meta is this node's metadata, gossiped to every node. Encoded it must
	// fit MaxMetaSize bytes (checked by New and UpdateMeta).
	Meta Meta

	// JoinBackoffMin and JoinBackoffMax bound the wait between rounds of join
	// attempts while no seed answers: it starts at Min, doubles each round
	// (with jitter) and is capped at Max, so a node started before its seeds
	// joins soon after they come up without hammering them.
	JoinBackoffMin time.Duration
	JoinBackoffMax time.Duration

	// ProbeInterval is how often each node probes one random peer; with
	// ProbeTimeout and SuspicionMult it sets the failure-detection time
	// (roughly SuspicionMult * log10(N+1) * ProbeInterval after a crash,
	// shortened when several peers confirm the suspicion).
	ProbeInterval time.Duration
	// ProbeTimeout is how long to wait for a probe's ack before indirect probes.
	// Must exceed the network RTT.
	ProbeTimeout time.Duration
	// SuspicionMult scales how long a suspected node has to refute before it is
	// declared dead (EventFail).
	SuspicionMult int
	// GossipInterval is how often state changes are gossiped to random peers;
	// it sets how fast join/leave/update news spreads.
	GossipInterval time.Duration
	// PushPullInterval is how often a full state sync with a random peer runs;
	// it repairs anything gossip missed (and speeds convergence after a join).
	PushPullInterval time.Duration
	// TCPTimeout bounds TCP connections used for push/pull and joins.
	TCPTimeout time.Duration
	// DeadNodeReclaimTime lets a dead node's name be reused by a new address
	// after this long (a restarted node with a new port). 0 = never.
	DeadNodeReclaimTime time.Duration

	// ReconnectInterval is how often a node tries to rejoin one recently
	// failed member (and its seeds when it is alone), so the cluster heals by
	// itself after a partition: memberlist alone never contacts a member it
	// declared dead again. 0 disables reconnection.
	ReconnectInterval time.Duration
	// ReconnectTimeout is how long a failed member is retried before it is
	// forgotten (a node restarted on a new port is never back at the old one).
	ReconnectTimeout time.Duration

	// Logger receives memberlist's and this package's logs; nil discards them.
	// Nothing is ever printed to stdout. Its handler runs on memberlist's
	// goroutines (some holding memberlist's locks): it must not block.
	Logger *slog.Logger

	// Drop is an optional fault-injection hook (partitions in scenarios): when
	// it returns true for a peer address, packets and streams to that address
	// are dropped, and so is traffic received from it. Incoming TCP streams are
	// checked against the connection's remote address (host:ephemeral port).
	// Called on memberlist's hot path: it must be fast and must not block.
	// nil = never drop.
	Drop func(peerAddr string) bool
}

// DefaultConfig returns the LAN preset (memberlist's DefaultLANConfig tuning):
// probe every 1 s with a 500 ms timeout, SuspicionMult 4 -> a crashed node is
// declared failed after about 6-7 s in a small cluster (6.2-7.2 s measured
// for 3 nodes on loopback, TestLANPresetFailureDetection); push/pull every
// 30 s; a partition heals within ReconnectInterval (10 s) of its end.
func DefaultConfig() Config {
	return Config{
		BindAddr:            "0.0.0.0:7946",
		JoinBackoffMin:      500 * time.Millisecond,
		JoinBackoffMax:      30 * time.Second,
		ProbeInterval:       time.Second,
		ProbeTimeout:        500 * time.Millisecond,
		SuspicionMult:       4,
		GossipInterval:      200 * time.Millisecond,
		PushPullInterval:    30 * time.Second,
		TCPTimeout:          10 * time.Second,
		DeadNodeReclaimTime: 10 * time.Second,
		ReconnectInterval:   10 * time.Second,
		ReconnectTimeout:    time.Hour,
	}
}

// DefaultLocalConfig returns the loopback preset used by tests and the
// scenario runner: bind 127.0.0.1 on a free port, probe every 200 ms with a
// 100 ms timeout, SuspicionMult 2, gossip every 50 ms and push/pull every 1 s.
// A crashed node is declared failed in about 1 s on loopback (0.8-0.9 s over
// 10 runs of TestMeasureFailureDetection with 5 nodes; up to 2.6 s seen under
// -race load: a few probe rounds until a peer probes it, then a 0.4-2.4 s
// suspicion timeout shortened by confirmations, then the 100 ms leave-intent
// grace); a graceful leave is seen in ~0.1 s; a partition heals ~0.3 s after
// it ends (reconnect every 500 ms).
// These timings are too tight for a real network.
func DefaultLocalConfig() Config {
	return Config{
		BindAddr:            "127.0.0.1:0",
		JoinBackoffMin:      50 * time.Millisecond,
		JoinBackoffMax:      time.Second,
		ProbeInterval:       200 * time.Millisecond,
		ProbeTimeout:        100 * time.Millisecond,
		SuspicionMult:       2,
		GossipInterval:      50 * time.Millisecond,
		PushPullInterval:    time.Second,
		TCPTimeout:          time.Second,
		DeadNodeReclaimTime: time.Second,
		ReconnectInterval:   500 * time.Millisecond,
		ReconnectTimeout:    2 * time.Minute,
	}
}

// Validate checks the configuration without side effects (no socket is
// opened); each error names the field.
func (c Config) Validate() error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("gossip: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.NodeName == "" {
		add("NodeName", "must not be empty")
	} else if len(c.NodeName) > 128 {
		add("NodeName", "longer than 128 bytes")
	}
	if h, _, err := hostport.Split(c.BindAddr); err != nil {
		add("BindAddr", "%v", err)
	} else if net.ParseIP(h) == nil {
		add("BindAddr", "host %q must be an IP address", h)
	}
	if c.AdvertiseAddr != "" {
		if h, _, err := hostport.Split(c.AdvertiseAddr); err != nil {
			add("AdvertiseAddr", "%v", err)
		} else if ip := net.ParseIP(h); ip == nil || ip.IsUnspecified() {
			add("AdvertiseAddr", "host %q must be a concrete IP address", h)
		}
	}
	for i, s := range c.Seeds {
		if _, p, err := hostport.Split(s); err != nil {
			add(fmt.Sprintf("Seeds[%d]", i), "%v", err)
		} else if p == 0 {
			add(fmt.Sprintf("Seeds[%d]", i), "port must not be 0")
		}
	}
	switch len(c.SecretKey) {
	case 0, 16, 24, 32:
	default:
		add("SecretKey", "must be 16, 24 or 32 bytes, got %d", len(c.SecretKey))
	}
	if b, err := c.Meta.Encode(); err != nil {
		add("Meta", "%v", err)
	} else if len(b) > MaxMetaSize {
		add("Meta", "encodes to %d bytes, over the %d-byte limit", len(b), MaxMetaSize)
	}
	if c.JoinBackoffMin <= 0 {
		add("JoinBackoffMin", "must be positive")
	}
	if c.JoinBackoffMax < c.JoinBackoffMin {
		add("JoinBackoffMax", "must be >= JoinBackoffMin")
	}
	if c.ProbeInterval <= 0 {
		add("ProbeInterval", "must be positive")
	}
	if c.ProbeTimeout <= 0 {
		add("ProbeTimeout", "must be positive")
	} else if c.ProbeTimeout >= c.ProbeInterval && c.ProbeInterval > 0 {
		add("ProbeTimeout", "must be shorter than ProbeInterval")
	}
	if c.SuspicionMult < 1 {
		add("SuspicionMult", "must be >= 1")
	}
	if c.GossipInterval <= 0 {
		add("GossipInterval", "must be positive")
	}
	if c.PushPullInterval < 0 {
		add("PushPullInterval", "must not be negative (0 disables push/pull)")
	}
	if c.TCPTimeout <= 0 {
		add("TCPTimeout", "must be positive")
	}
	if c.ReconnectInterval < 0 {
		add("ReconnectInterval", "must not be negative (0 disables reconnection)")
	}
	if c.ReconnectInterval > 0 && c.ReconnectTimeout <= 0 {
		add("ReconnectTimeout", "must be positive when ReconnectInterval is set")
	}
	if c.DeadNodeReclaimTime < 0 {
		add("DeadNodeReclaimTime", "must not be negative")
	}
	return errors.Join(errs...)
}
