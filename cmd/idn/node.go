package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"

	"github.com/idn-net/idn/node"
)

func init() {
	registerTop(&command{name: "node", summary: "run one IDN node (joins a cluster through --join seeds)", run: runNode})
}

// readyLine is the one JSON line `idn node` prints on stdout once started.
type readyLine struct {
	Event  string `json:"event"`
	Name   string `json:"name"`
	Vertex string `json:"vertex"`
	API    string `json:"api"`
	Gossip string `json:"gossip"`
	Remote string `json:"remote"`
	Raft   string `json:"raft"`
	PID    int    `json:"pid"`
}

// csvList is a comma-separated flag value.
type csvList []string

var _ flag.Value = (*csvList)(nil)

// String joins the list with commas.
func (c *csvList) String() string { return strings.Join(*c, ",") }

// Set parses a comma-separated list (empty items dropped).
func (c *csvList) Set(s string) error {
	*c = nil
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*c = append(*c, p)
		}
	}
	return nil
}

// nodeConfigFromArgs builds the node config: defaults, then --config FILE,
// then every flag given explicitly.
func nodeConfigFromArgs(args []string, stderr io.Writer) (node.Config, error) {
	fs := newFlagSet("idn node", "idn node [--config FILE] [--name N] [--vertex V] [--join host:port,...] [flags]\n\n"+
		"Runs one IDN node: HTTP API (KServe v2 inference, /metrics, /v1/status), gossip membership, the vertex's Raft\n"+
		"group and emulated GPU executors. Prints one JSON ready line on stdout; logs go to stderr. SIGINT/SIGTERM:\n"+
		"graceful leave, then exit 0. A YAML --config file takes the same keys as the flags (with _ for -);\n"+
		"flags given explicitly override it.", stderr)
	d := node.DefaultConfig()
	configFile := fs.String("config", "", "YAML config file (keys: name, data_dir, vertex, tier, join, gpus, ...)")
	local := fs.Bool("local", false, "loopback defaults: bind 127.0.0.1:0 everywhere and fast local timings (profile local)")
	name := fs.String("name", d.Name, "node name, unique in the cluster")
	dataDir := fs.String("data-dir", d.DataDir, "data directory (Raft log and snapshots)")
	vertex := fs.String("vertex", "", "vertex of the topology this node belongs to (required)")
	tier := fs.Int("tier", d.Tier, "tier gossiped in the node metadata (-1 = the topology's)")
	var join, hosted csvList
	fs.Var(&join, "join", "seed gossip addresses host:port,... (empty = start a new cluster)")
	gpus := fs.Int("gpus", d.GPUs, "number of GPU executors")
	gpuMem := fs.Int("gpu-mem-mb", d.GPUMemMB, "memory per GPU in MB (0 = vertex budget / gpus)")
	execKind := fs.String("executor", d.Executor, "executor kind (emulated)")
	latScale := fs.Float64("latency-scale", d.LatencyScale, "multiplier of emulated batch latencies (0 = zero latency)")
	bindGossip := fs.String("bind-gossip", d.BindGossip, "gossip listen host:port (port 0 = any)")
	bindRemote := fs.String("bind-remote", d.BindRemote, "actor remote listen host:port (port 0 = any)")
	bindRaft := fs.String("bind-raft", d.BindRaft, "Raft listen host:port (port 0 = any)")
	bindAPI := fs.String("bind-api", d.BindAPI, "HTTP API listen host:port (port 0 = any)")
	expect := fs.Int("bootstrap-expect", d.BootstrapExpect, "Raft voters of this vertex to wait for before bootstrapping")
	topology := fs.String("topology", "", "topology YAML file (default: embedded Topology II)")
	catalog := fs.String("catalog", "", "catalog YAML file (default: embedded YOLOv4 Table II)")
	fs.Var(&hosted, "hosted", "static allocation x^v: model names m1,m2,... (default: see node.Config.Hosted)")
	secret := fs.String("secret-key", "", "gossip encryption key, 16/24/32 bytes in hex or base64")
	logLevel := fs.String("log-level", d.LogLevel, "debug, info, warn or error")
	profile := fs.String("profile", d.Profile, "gossip/Raft timings: lan or local (default local when --bind-gossip is a loopback address)")
	emulateRTT := fs.Bool("emulate-rtt", d.EmulateRTT, "delay inter-vertex forwards by the edge RTT")
	maxBatch := fs.Int("max-batch", d.MaxBatch, "largest batch the scheduler dispatches")
	maxQueue := fs.Int("max-queue", d.MaxQueue, "queue bound per model at the scheduler")
	defDeadline := fs.Duration("default-deadline", d.DefaultDeadline, "deadline of requests without slo_ms")
	ackTimeout := fs.Duration("ack-timeout", d.AckTimeout, "how long a forward waits for its ack before a retry on another member")
	raftTimeout := fs.Duration("raft-timeout", d.RaftTimeout, "override the Raft heartbeat/election timeout (0 = the profile's)")
	faultAPI := fs.Bool("fault-api", d.FaultAPI, "enable POST /v1/fault {\"drop\":[\"host:port\",...]} (partition injection; tests only)")
	gossipProbe := fs.Duration("gossip-probe", d.GossipProbe, "override the gossip probe interval (0 = the profile's)")
	allocation := fs.String("allocation", d.Allocation, "allocation of models to this vertex: static (the --hosted models, fixed) or infida\n"+
		"(INFIDA, paper 000: the vertex's Raft leader learns x^v slot by slot from control messages exchanged with the other vertices)")
	slot := fs.Duration("slot", d.Slot, "INFIDA slot length (--allocation infida only)")
	refresh := fs.Int("refresh", d.Refresh, "INFIDA refresh period B in slots: x^v is re-sampled every B slots (--allocation infida only)")
	eta := fs.Float64("eta", d.Eta, "INFIDA learning rate (scale it up when there are far fewer requests per slot than the paper's 450,000)")
	alpha := fs.Float64("alpha", d.Alpha, "latency/accuracy trade-off alpha of paper 000 eq. 6 (same on every node)")
	typesSeed := fs.Uint64("types-seed", d.TypesSeed, "seed of the request types' entry base stations (as idn experiment infida --seed)")
	entries := fs.Int("entries-per-task", d.EntriesPerTask, "base stations each task's requests enter at (0 = every base station)")
	ctlTimeout := fs.Duration("control-timeout", d.ControlTimeout, "how long a slot waits for control messages before stepping with what it has (0 = half the slot)")
	if err := parseFlags(fs, args, false); err != nil {
		return node.Config{}, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	cfg := node.DefaultConfig()
	if *local {
		cfg = node.DefaultLocalConfig()
	}
	if *configFile != "" {
		var err error
		if cfg, err = node.LoadConfigFile(*configFile, cfg); err != nil {
			return cfg, fmt.Errorf("%w: --config: %w", errUsage, err)
		}
	}
	apply := map[string]func(){
		"name": func() { cfg.Name = *name }, "data-dir": func() { cfg.DataDir = *dataDir },
		"vertex": func() { cfg.Vertex = *vertex }, "tier": func() { cfg.Tier = *tier },
		"join": func() { cfg.Join = join }, "gpus": func() { cfg.GPUs = *gpus },
		"gpu-mem-mb": func() { cfg.GPUMemMB = *gpuMem }, "executor": func() { cfg.Executor = *execKind },
		"latency-scale": func() { cfg.LatencyScale = *latScale },
		"bind-gossip":   func() { cfg.BindGossip = *bindGossip }, "bind-remote": func() { cfg.BindRemote = *bindRemote },
		"bind-raft": func() { cfg.BindRaft = *bindRaft }, "bind-api": func() { cfg.BindAPI = *bindAPI },
		"bootstrap-expect": func() { cfg.BootstrapExpect = *expect }, "topology": func() { cfg.Topology = *topology },
		"catalog": func() { cfg.Catalog = *catalog }, "hosted": func() { cfg.Hosted = hosted },
		"secret-key": func() { cfg.SecretKey = *secret }, "log-level": func() { cfg.LogLevel = *logLevel },
		"profile": func() { cfg.Profile = *profile }, "emulate-rtt": func() { cfg.EmulateRTT = *emulateRTT },
		"max-batch": func() { cfg.MaxBatch = *maxBatch }, "max-queue": func() { cfg.MaxQueue = *maxQueue },
		"default-deadline": func() { cfg.DefaultDeadline = *defDeadline },
		"ack-timeout":      func() { cfg.AckTimeout = *ackTimeout },
		"raft-timeout":     func() { cfg.RaftTimeout = *raftTimeout },
		"gossip-probe":     func() { cfg.GossipProbe = *gossipProbe },
		"fault-api":        func() { cfg.FaultAPI = *faultAPI },
		"allocation":       func() { cfg.Allocation = *allocation },
		"slot":             func() { cfg.Slot = *slot },
		"refresh":          func() { cfg.Refresh = *refresh },
		"eta":              func() { cfg.Eta = *eta },
		"alpha":            func() { cfg.Alpha = *alpha },
		"types-seed":       func() { cfg.TypesSeed = *typesSeed },
		"entries-per-task": func() { cfg.EntriesPerTask = *entries },
		"control-timeout":  func() { cfg.ControlTimeout = *ctlTimeout },
	}
	for f, fn := range apply {
		if set[f] {
			fn()
		}
	}
	// Loopback clusters (scenarios, tests) get the fast local timings unless
	// --profile says otherwise.
	if !set["profile"] && isLoopbackBind(cfg.BindGossip) {
		cfg.Profile = node.ProfileLocal
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("%w: %w", errUsage, err)
	}
	return cfg, nil
}

func isLoopbackBind(hostPort string) bool {
	h, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		return false
	}
	ip := net.ParseIP(h)
	return h == "localhost" || ip != nil && ip.IsLoopback()
}

func runNode(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := nodeConfigFromArgs(args, stderr)
	if err != nil {
		return err
	}
	lvl, _ := node.ParseLogLevel(cfg.LogLevel)
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
	n, err := node.New(cfg)
	if err != nil {
		if errors.Is(err, node.ErrInvalidConfig) {
			return fmt.Errorf("%w: %w", errUsage, err)
		}
		return err
	}
	if err := n.Start(ctx); err != nil {
		n.Stop()
		if ctx.Err() != nil {
			return nil // interrupted while joining
		}
		return err
	}
	a := n.Addrs()
	line, _ := json.Marshal(readyLine{Event: "ready", Name: cfg.Name, Vertex: cfg.Vertex, API: a.API, Gossip: a.Gossip,
		Remote: a.Remote, Raft: a.Raft, PID: os.Getpid()})
	if _, err := fmt.Fprintf(stdout, "%s\n", line); err != nil {
		n.Stop()
		return err
	}
	<-ctx.Done()
	cfg.Logger.Info("signal received: leaving the cluster")
	n.Stop()
	return nil
}
