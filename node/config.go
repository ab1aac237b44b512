package node

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// ErrInvalidConfig marks a configuration error; the message names the field.
var ErrInvalidConfig = errors.New("node: invalid config")

// Allocation modes (Config.Allocation).
const (
	// AllocationStatic hosts Config.Hosted (or its default) for the node's life.
	AllocationStatic = "static"
	// AllocationInfida runs the INFIDA allocator on the vertex's Raft leader.
	AllocationInfida = "infida"
)

// Defaults of the INFIDA allocation settings.
const (
	// DefaultSlot is the INFIDA slot of paper 000 Sec. VI (1 minute).
	DefaultSlot = time.Minute
	// DefaultEta is policy/infida.DefaultConfig's learning rate (tuned for
	// the paper's 7,500 rps x 60 s slots).
	DefaultEta = 3e-3
	// DefaultRefresh is the refresh period B (slots) of policy/infida.DefaultConfig.
	DefaultRefresh = 1
	// MaxRefresh bounds Config.Refresh.
	MaxRefresh = 1 << 20
)

// Timing presets for gossip and consensus.
const (
	// ProfileLAN uses gossip.DefaultConfig and consensus.DefaultConfig.
	ProfileLAN = "lan"
	// ProfileLocal uses the loopback presets (fast failure detection and elections).
	ProfileLocal = "local"
)

// Config is one node's configuration. Build it with DefaultConfig or
// DefaultLocalConfig, load a YAML file over it with LoadConfigFile, override
// fields (flags) and check it with Validate. YAML keys are the field tags.
type Config struct {
	// Name is the node name, unique in the cluster (gossip name and Raft id).
	Name string `yaml:"name"`
	// DataDir holds the node's persistent state (raft/ subdirectory).
	DataDir string `yaml:"data_dir"`
	// Vertex is the IDN vertex the node belongs to (a vertex of the topology).
	Vertex string `yaml:"vertex"`
	// Tier is the vertex tier gossiped in the node metadata; -1 = the topology's.
	Tier int `yaml:"tier"`
	// Join lists seed gossip addresses (host:port); empty = first node.
	Join []string `yaml:"join"`
	// GPUs is the number of executors (>= 0).
	GPUs int `yaml:"gpus"`
	// GPUMemMB is the memory of each GPU; 0 = the vertex budget divided by GPUs.
	GPUMemMB int `yaml:"gpu_mem_mb"`
	// Executor is the executor kind; only "emulated" exists.
	Executor string `yaml:"executor"`
	// LatencyScale multiplies the emulated batch latencies (0 = zero-latency executors).
	LatencyScale float64 `yaml:"latency_scale"`
	// LoadDelayPerMB is the emulated model load time per MB.
	LoadDelayPerMB time.Duration `yaml:"load_delay_per_mb"`
	// BindGossip, BindRemote, BindRaft and BindAPI are host:port listen
	// addresses (port 0 = any free port; the bound ports are reported).
	BindGossip string `yaml:"bind_gossip"`
	BindRemote string `yaml:"bind_remote"`
	BindRaft   string `yaml:"bind_raft"`
	BindAPI    string `yaml:"bind_api"`
	// BootstrapExpect is the number of Raft voters of the vertex group to wait for (>= 1).
	BootstrapExpect int `yaml:"bootstrap_expect"`
	// Topology and Catalog are YAML files in policy/idn's formats; empty = embedded defaults.
	Topology string `yaml:"topology"`
	Catalog  string `yaml:"catalog"`
	// Hosted is the static allocation x^v (catalog model names); empty = a default
	// (every model of the tasks whose repository is this vertex; elsewhere the most
	// accurate model of each task that fits an equal share of the GPU memory).
	Hosted []string `yaml:"hosted"`
	// SecretKey encrypts gossip: 16, 24 or 32 bytes, hex or base64 encoded; empty = none.
	SecretKey string `yaml:"secret_key"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `yaml:"log_level"`
	// Profile selects gossip/consensus timings: "lan" or "local".
	Profile string `yaml:"profile"`
	// RaftTimeout, when positive, overrides the profile's Raft heartbeat and
	// election timeouts (and caps the leader lease), e.g. to keep a loaded or
	// -race test machine from flapping leaders. 0 = the profile's.
	RaftTimeout time.Duration `yaml:"raft_timeout"`
	// GossipProbe, when positive, overrides the profile's gossip probe
	// interval (probe timeout = half of it, suspicion multiplier >= 3): slower
	// failure detection, fewer false suspicions on a loaded machine. 0 = the profile's.
	GossipProbe time.Duration `yaml:"gossip_probe"`
	// EmulateRTT delays each inter-vertex forward by the edge RTT (loopback realism).
	EmulateRTT bool `yaml:"emulate_rtt"`
	// DefaultDeadline applies to requests without slo_ms.
	DefaultDeadline time.Duration `yaml:"default_deadline"`
	// MaxDeadline bounds slo_ms.
	MaxDeadline time.Duration `yaml:"max_deadline"`
	// AckTimeout is how long a forward waits for its ack before a retry elsewhere.
	AckTimeout time.Duration `yaml:"ack_timeout"`
	// MaxBatch bounds a batch; MaxQueue bounds each model's queue at the scheduler.
	MaxBatch int `yaml:"max_batch"`
	MaxQueue int `yaml:"max_queue"`
	// SyncInterval is how often the node re-syncs membership, leader and x^v into its actors.
	SyncInterval time.Duration `yaml:"sync_interval"`
	// LeaveTimeout bounds the graceful gossip leave on Stop.
	LeaveTimeout time.Duration `yaml:"leave_timeout"`

	// Allocation selects how x^v is decided: AllocationStatic (Hosted, fixed
	// for the node's life; the default) or AllocationInfida (the vertex's
	// Raft leader runs INFIDA every Slot; paper 000): its allocator actor
	// exchanges control messages with the other vertices' allocators, commits
	// y^v and x^v to the vertex's Raft group, and the executors follow x^v.
	// Every node of the cluster must use the same Slot, Eta, Alpha,
	// TypesSeed and EntriesPerTask (they define the shared problem instance).
	Allocation string `yaml:"allocation"`
	// Slot is the INFIDA slot length (paper 000: 1 minute; demos: seconds).
	// Used only when Allocation is AllocationInfida; must be positive.
	Slot time.Duration `yaml:"slot"`
	// Refresh is the refresh period B of Algorithm 1 in slots: x^v is
	// re-sampled (DepRound of y^v) every Refresh slots; >= 1. Used only when
	// Allocation is AllocationInfida.
	Refresh int `yaml:"refresh"`
	// Eta is INFIDA's learning rate (paper 000 Algorithm 1). The gain's
	// subgradient scales with the number of requests per slot, so a cluster
	// with fewer requests per slot than the paper's 450,000 needs a larger eta.
	Eta float64 `yaml:"eta"`
	// Alpha is the latency/accuracy trade-off of paper 000 eq. 6 (ms per
	// percentage point of inaccuracy); every vertex must use the same.
	Alpha float64 `yaml:"alpha"`
	// TypesSeed and EntriesPerTask fix the request types rho = (task, entry
	// base station) the allocators track: each task enters at
	// EntriesPerTask base stations drawn with TypesSeed (paper 000 Sec. VI;
	// the same draw as `idn experiment infida --seed`); 0 entries = every
	// base station. Requests of other types are served but not learned from.
	TypesSeed      uint64 `yaml:"types_seed"`
	EntriesPerTask int    `yaml:"entries_per_task"`
	// ControlTimeout bounds how long a slot waits for control messages
	// before the vertex steps with what it has (0 = half the slot).
	ControlTimeout time.Duration `yaml:"control_timeout"`

	// FaultAPI enables POST /v1/fault (partition injection for scenarios and
	// tests): {"drop":["host:port",...]} drops gossip and Raft traffic to and
	// from those peer addresses; {"drop":[]} heals. Never enable in production.
	FaultAPI bool `yaml:"fault_api"`

	// Logger receives the node's logs (never stdout); nil = a text logger on
	// stderr at LogLevel. Not loadable from YAML.
	Logger *slog.Logger `yaml:"-"`
	// Drop is an optional fault hook passed to gossip and consensus (partitions).
	Drop func(peerAddr string) bool `yaml:"-"`
}

// DefaultConfig returns the LAN defaults: bind all interfaces on the usual
// ports (gossip 7946, remote 7950, raft 7947, API 8080), one emulated GPU,
// gossip failure detection ~5 s and Raft failover ~1-3 s (gossip and
// consensus DefaultConfig), 10 s default deadline, forwards acknowledged within 500 ms.
func DefaultConfig() Config {
	host, _ := os.Hostname()
	if host == "" {
		host = "idn-node"
	}
	return Config{
		Name:            host,
		DataDir:         "idn-data",
		Tier:            -1,
		GPUs:            1,
		Executor:        "emulated",
		LatencyScale:    1,
		LoadDelayPerMB:  time.Microsecond,
		BindGossip:      "0.0.0.0:7946",
		BindRemote:      "0.0.0.0:7950",
		BindRaft:        "0.0.0.0:7947",
		BindAPI:         "0.0.0.0:8080",
		BootstrapExpect: 1,
		LogLevel:        "info",
		Profile:         ProfileLAN,
		EmulateRTT:      true,
		DefaultDeadline: 10 * time.Second,
		MaxDeadline:     5 * time.Minute,
		AckTimeout:      500 * time.Millisecond,
		MaxBatch:        8,
		MaxQueue:        256,
		SyncInterval:    250 * time.Millisecond,
		LeaveTimeout:    2 * time.Second,
		Allocation:      AllocationStatic,
		Slot:            DefaultSlot,
		Refresh:         DefaultRefresh,
		Eta:             DefaultEta,
		Alpha:           1,
		TypesSeed:       1,
		EntriesPerTask:  2,
	}
}

// DefaultLocalConfig returns defaults for loopback tests and scenarios: every
// listener on 127.0.0.1 with port 0, the "local" timing profile (failure
// detection ~1 s, Raft re-election ~0.2-0.5 s), a 300 ms forward ack timeout.
func DefaultLocalConfig() Config {
	c := DefaultConfig()
	c.BindGossip, c.BindRemote, c.BindRaft, c.BindAPI = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	c.Profile = ProfileLocal
	c.AckTimeout = 300 * time.Millisecond
	c.SyncInterval = 100 * time.Millisecond
	c.LeaveTimeout = time.Second
	return c
}

// LoadConfigFile reads a YAML file over base (unknown keys are errors).
func LoadConfigFile(path string, base Config) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return base, fmt.Errorf("%w: config file %q: %w", ErrInvalidConfig, path, err)
	}
	return ParseConfigYAML(data, base)
}

// ParseConfigYAML decodes YAML over base (unknown keys are errors).
func ParseConfigYAML(data []byte, base Config) (Config, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	c := base
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return base, fmt.Errorf("%w: yaml: %w", ErrInvalidConfig, err)
	}
	return c, nil
}

func checkHostPort(field, v string) error {
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return fmt.Errorf("%w: %s: %q: %w", ErrInvalidConfig, field, v, err)
	}
	if host == "" {
		return fmt.Errorf("%w: %s: %q: empty host (use 0.0.0.0 or an IP)", ErrInvalidConfig, field, v)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("%w: %s: %q: port must be 0..65535", ErrInvalidConfig, field, v)
	}
	return nil
}

// DecodeSecretKey decodes a hex or base64 key of 16, 24 or 32 bytes (empty = nil).
func DecodeSecretKey(s string) ([]byte, error) {
	if s == "" {
		return nil, nil
	}
	var key []byte
	if b, err := hex.DecodeString(s); err == nil {
		key = b
	} else if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		key = b
	} else {
		return nil, fmt.Errorf("%w: secret_key: neither hex nor base64", ErrInvalidConfig)
	}
	switch len(key) {
	case 16, 24, 32:
		return key, nil
	}
	return nil, fmt.Errorf("%w: secret_key: %d bytes, want 16, 24 or 32", ErrInvalidConfig, len(key))
}

// ParseLogLevel maps debug/info/warn/error to a slog level.
func ParseLogLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "", "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("%w: log_level: %q, want debug, info, warn or error", ErrInvalidConfig, s)
}

// Validate checks every field that can be checked without the topology
// (the vertex and hosted models are checked against it by New). Errors wrap
// ErrInvalidConfig and name the field and value.
func (c Config) Validate() error {
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	bad := func(field string, format string, args ...any) {
		add(fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...)))
	}
	if c.Name == "" || len(c.Name) > 128 {
		bad("name", "%q must be 1..128 bytes", c.Name)
	} else if strings.ContainsAny(c.Name, " \t\n/") {
		bad("name", "%q must not contain spaces or '/'", c.Name)
	}
	if c.DataDir == "" {
		bad("data_dir", "empty")
	}
	if c.Vertex == "" {
		bad("vertex", "empty (a vertex id of the topology)")
	}
	if c.Tier < -1 {
		bad("tier", "%d must be >= 0 (or -1 for the topology's)", c.Tier)
	}
	for i, s := range c.Join {
		if err := checkHostPort(fmt.Sprintf("join[%d]", i), s); err != nil {
			add(err)
		}
	}
	if c.GPUs < 0 || c.GPUs > 64 {
		bad("gpus", "%d must be 0..64", c.GPUs)
	}
	if c.GPUMemMB < 0 {
		bad("gpu_mem_mb", "%d must be >= 0", c.GPUMemMB)
	}
	if c.Executor != "emulated" {
		bad("executor", "%q: only \"emulated\" is supported", c.Executor)
	}
	if c.LatencyScale < 0 || math.IsNaN(c.LatencyScale) || math.IsInf(c.LatencyScale, 0) {
		bad("latency_scale", "%v must be finite and >= 0", c.LatencyScale)
	}
	if c.LoadDelayPerMB < 0 {
		bad("load_delay_per_mb", "%v is negative", c.LoadDelayPerMB)
	}
	for _, f := range []struct{ name, v string }{{"bind_gossip", c.BindGossip}, {"bind_remote", c.BindRemote}, {"bind_raft", c.BindRaft}, {"bind_api", c.BindAPI}} {
		if err := checkHostPort(f.name, f.v); err != nil {
			add(err)
		}
	}
	if c.BootstrapExpect < 1 || c.BootstrapExpect > 15 {
		bad("bootstrap_expect", "%d must be 1..15", c.BootstrapExpect)
	}
	for i, m := range c.Hosted {
		if m == "" {
			bad(fmt.Sprintf("hosted[%d]", i), "empty model name")
		}
	}
	if _, err := DecodeSecretKey(c.SecretKey); err != nil {
		add(err)
	}
	if _, err := ParseLogLevel(c.LogLevel); err != nil {
		add(err)
	}
	if c.Profile != ProfileLAN && c.Profile != ProfileLocal {
		bad("profile", "%q, want %q or %q", c.Profile, ProfileLAN, ProfileLocal)
	}
	durs := []struct {
		name string
		v    time.Duration
	}{{"default_deadline", c.DefaultDeadline}, {"max_deadline", c.MaxDeadline}, {"ack_timeout", c.AckTimeout},
		{"sync_interval", c.SyncInterval}, {"leave_timeout", c.LeaveTimeout}}
	for _, d := range durs {
		if d.v <= 0 {
			bad(d.name, "%v must be positive", d.v)
		}
	}
	if c.DefaultDeadline > c.MaxDeadline && c.MaxDeadline > 0 {
		bad("default_deadline", "%v exceeds max_deadline %v", c.DefaultDeadline, c.MaxDeadline)
	}
	if c.GossipProbe < 0 {
		bad("gossip_probe", "%v is negative", c.GossipProbe)
	}
	if c.RaftTimeout < 0 {
		bad("raft_timeout", "%v is negative", c.RaftTimeout)
	}
	if c.MaxBatch < 1 || c.MaxBatch > 4096 {
		bad("max_batch", "%d must be 1..4096", c.MaxBatch)
	}
	if c.MaxQueue < 1 {
		bad("max_queue", "%d must be >= 1", c.MaxQueue)
	}
	if c.Allocation != AllocationStatic && c.Allocation != AllocationInfida {
		bad("allocation", "%q, want %q or %q", c.Allocation, AllocationStatic, AllocationInfida)
	}
	if c.Slot <= 0 {
		bad("slot", "%v must be positive", c.Slot)
	}
	if c.Refresh < 1 || c.Refresh > MaxRefresh {
		bad("refresh", "%d must be 1..%d (slots)", c.Refresh, MaxRefresh)
	}
	if !(c.Eta > 0) || math.IsInf(c.Eta, 0) {
		bad("eta", "%v must be finite and > 0", c.Eta)
	}
	if !(c.Alpha >= 0) || math.IsInf(c.Alpha, 0) {
		bad("alpha", "%v must be finite and >= 0", c.Alpha)
	}
	if c.EntriesPerTask < 0 {
		bad("entries_per_task", "%d must be >= 0", c.EntriesPerTask)
	}
	if c.ControlTimeout < 0 {
		bad("control_timeout", "%v is negative", c.ControlTimeout)
	}
	if c.Allocation == AllocationInfida && c.Slot < 100*time.Millisecond {
		bad("slot", "%v is below 100ms (control messages need a few RTTs per slot)", c.Slot)
	}
	return errors.Join(errs...)
}
