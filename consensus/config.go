package consensus

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/idn-net/idn/internal/hostport"
)

// Config configures one node's membership in its vertex's Raft group.
type Config struct {
	// NodeID is this node's Raft server id; the node name (unique in the
	// cluster). Bootstrap-expect picks the lowest NodeID to bootstrap.
	NodeID string

	// Vertex is the vertex this group replicates; recorded in the state.
	Vertex string

	// BindAddr is the host:port of the Raft TCP transport; port 0 picks a free
	// port (Addr reports the advertised one).
	BindAddr string

	// AdvertiseAddr is the host:port peers dial; empty = the bound address
	// (BindAddr must then be a concrete IP, not 0.0.0.0). Port 0 = bound port.
	AdvertiseAddr string

	// DataDir holds the persistent Raft state: DataDir/wal (raft-wal log and
	// stable store) and DataDir/snapshots (zstd-compressed FSM snapshots). A
	// node restarted with the same DataDir keeps its state and never
	// bootstraps again. Owned by this package: give it its own directory.
	DataDir string

	// BootstrapExpect is the number of voters the group waits for before it
	// is created: once UpdatePeers shows at least this many peers (self
	// included), the peer with the lowest NodeID bootstraps the group with all
	// of them, after checking over the Raft transport that none of them already
	// has Raft state. The others wait to be added. 1 = a group of one (bootstraps
	// at once). 0 = never bootstrap; wait to be added by an existing leader.
	BootstrapExpect int

	// BootstrapStable is how long the bootstrap condition must hold
	// (unchanged peer set) before the lowest node bootstraps, so that slightly
	// different gossip views right after start do not let two nodes bootstrap.
	BootstrapStable time.Duration

	// RemoveAfter is how long a voter may be missing from UpdatePeers before
	// the leader removes it from the group (a node restarted later is added
	// back). It trades quorum size after a permanent loss against churn on a
	// brief outage: keep it well above gossip failure detection time.
	RemoveAfter time.Duration

	// ReconcileInterval is how often the group re-checks bootstrap, adds and
	// removals even without an UpdatePeers call.
	ReconcileInterval time.Duration

	// HeartbeatTimeout and ElectionTimeout: a follower that hears nothing from
	// the leader for this long starts an election (raft randomises 1-2x). They
	// set the failover time.
	HeartbeatTimeout time.Duration
	ElectionTimeout  time.Duration
	// LeaderLeaseTimeout: a leader that cannot reach a quorum for this long
	// steps down. Must be <= HeartbeatTimeout.
	LeaderLeaseTimeout time.Duration
	// CommitTimeout: longest delay before a heartbeat carries the commit index
	// to followers when nothing else is sent.
	CommitTimeout time.Duration

	// SnapshotThreshold: number of new log entries that triggers a snapshot
	// (checked every SnapshotInterval); keeps the log and restart time small.
	SnapshotThreshold uint64
	// SnapshotInterval: how often raft checks whether to snapshot.
	SnapshotInterval time.Duration
	// TrailingLogs: entries kept after a snapshot so slow followers can catch
	// up without a snapshot install.
	TrailingLogs uint64
	// SnapshotRetain: snapshots kept on disk.
	SnapshotRetain int

	// Logger receives raft's, raft-wal's and this package's logs; nil discards
	// them. Nothing is printed to stdout. Its handler runs on raft's
	// goroutines (including the main raft loop): it must not block.
	Logger *slog.Logger

	// Drop is an optional fault-injection hook (partitions): when it returns
	// true for a peer address, dials to it fail and established connections to
	// it are closed; incoming connections are checked against their remote
	// address (host:ephemeral port). Must be fast and must not block. nil =
	// never drop.
	Drop func(peerAddr string) bool
}

// DefaultConfig returns the LAN preset: raft's 1 s heartbeat/election
// timeouts (failover in ~1-3 s), a bootstrap settle of 1 s, dead voters removed
// after 2 minutes.
func DefaultConfig() Config {
	return Config{
		BindAddr:           "0.0.0.0:7947",
		BootstrapExpect:    1,
		BootstrapStable:    time.Second,
		RemoveAfter:        2 * time.Minute,
		ReconcileInterval:  time.Second,
		HeartbeatTimeout:   time.Second,
		ElectionTimeout:    time.Second,
		LeaderLeaseTimeout: 500 * time.Millisecond,
		CommitTimeout:      50 * time.Millisecond,
		SnapshotThreshold:  8192,
		SnapshotInterval:   2 * time.Minute,
		TrailingLogs:       10240,
		SnapshotRetain:     2,
	}
}

// DefaultLocalConfig returns the loopback preset for tests and scenarios:
// 100 ms heartbeat/election timeouts (a loopback re-election takes a few
// hundred ms), 200 ms bootstrap settle, dead voters removed after 30 s.
// Too tight for a real network.
func DefaultLocalConfig() Config {
	c := DefaultConfig()
	c.BindAddr = "127.0.0.1:0"
	c.BootstrapStable = 200 * time.Millisecond
	c.RemoveAfter = 30 * time.Second
	c.ReconcileInterval = 200 * time.Millisecond
	c.HeartbeatTimeout = 100 * time.Millisecond
	c.ElectionTimeout = 100 * time.Millisecond
	c.LeaderLeaseTimeout = 100 * time.Millisecond
	c.CommitTimeout = 10 * time.Millisecond
	c.SnapshotThreshold = 1024
	c.SnapshotInterval = 5 * time.Second
	c.TrailingLogs = 1024
	return c
}

// Validate checks the configuration without side effects (nothing is
// created or opened); each error names the field.
func (c Config) Validate() error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("consensus: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.NodeID == "" {
		add("NodeID", "must not be empty")
	}
	if c.Vertex == "" {
		add("Vertex", "must not be empty")
	}
	bindHost := ""
	if h, _, err := hostport.Split(c.BindAddr); err != nil {
		add("BindAddr", "%v", err)
	} else if net.ParseIP(h) == nil {
		add("BindAddr", "host %q must be an IP address", h)
	} else {
		bindHost = h
	}
	if c.AdvertiseAddr != "" {
		if h, _, err := hostport.Split(c.AdvertiseAddr); err != nil {
			add("AdvertiseAddr", "%v", err)
		} else if ip := net.ParseIP(h); ip == nil || ip.IsUnspecified() {
			add("AdvertiseAddr", "host %q must be a concrete IP address", h)
		}
	} else if ip := net.ParseIP(bindHost); ip != nil && ip.IsUnspecified() {
		add("AdvertiseAddr", "required when BindAddr is %s (raft needs a concrete address)", c.BindAddr)
	}
	if c.DataDir == "" {
		add("DataDir", "must not be empty")
	}
	if c.BootstrapExpect < 0 {
		add("BootstrapExpect", "must be >= 0")
	}
	if c.BootstrapStable < 0 {
		add("BootstrapStable", "must not be negative")
	}
	if c.RemoveAfter <= 0 {
		add("RemoveAfter", "must be positive")
	}
	if c.ReconcileInterval <= 0 {
		add("ReconcileInterval", "must be positive")
	}
	if c.HeartbeatTimeout < 5*time.Millisecond {
		add("HeartbeatTimeout", "must be >= 5ms")
	}
	if c.ElectionTimeout < 5*time.Millisecond {
		add("ElectionTimeout", "must be >= 5ms")
	}
	if c.LeaderLeaseTimeout < 5*time.Millisecond {
		add("LeaderLeaseTimeout", "must be >= 5ms")
	} else if c.LeaderLeaseTimeout > c.HeartbeatTimeout {
		add("LeaderLeaseTimeout", "must be <= HeartbeatTimeout")
	}
	if c.ElectionTimeout < c.HeartbeatTimeout {
		add("ElectionTimeout", "must be >= HeartbeatTimeout")
	}
	if c.CommitTimeout <= 0 {
		add("CommitTimeout", "must be positive")
	}
	if c.SnapshotThreshold == 0 {
		add("SnapshotThreshold", "must be positive")
	}
	if c.SnapshotInterval < 5*time.Millisecond {
		add("SnapshotInterval", "must be >= 5ms")
	}
	if c.SnapshotRetain < 1 {
		add("SnapshotRetain", "must be >= 1")
	}
	return errors.Join(errs...)
}
