package scenarios

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/idn-net/idn/policy/idn"
	"github.com/idn-net/idn/policy/sim/slot"
)

// QuickstartYAML is scenarios/quickstart.yaml, the scenario `idn scenario
// run` executes when no file is given.
//
//go:embed quickstart.yaml
var QuickstartYAML []byte

// ErrInvalid marks a scenario that fails validation; the message names the
// offending field and value.
var ErrInvalid = errors.New("invalid scenario")

// Fault actions.
const (
	// ActionKill sends SIGKILL to the node named by Fault.Node, or to the
	// current Raft leader of Fault.Vertex.
	ActionKill = "kill"
	// ActionKillLeader sends SIGKILL to the current Raft leader of Fault.Vertex
	// and measures the failover.
	ActionKillLeader = "kill_leader"
	// ActionStop sends SIGTERM (graceful leave) to Fault.Node or to the
	// leader of Fault.Vertex, and SIGKILL after timeouts.stop.
	ActionStop = "stop"
	// ActionPause freezes Fault.Node or the leader of Fault.Vertex with
	// SIGSTOP for Fault.Duration, then resumes it with SIGCONT: the node is
	// unreachable but keeps its state and its sockets, like a long GC pause
	// or a VM freeze.
	ActionPause = "pause"
	// ActionRestart restarts a killed or stopped node with the same name and
	// data dir.
	ActionRestart = "restart"
	// ActionPartition cuts Fault.Node (or the leader of Fault.Vertex) off
	// every other node for Fault.Duration: gossip and Raft traffic both
	// ways is dropped through the nodes' POST /v1/fault (idn node
	// --fault-api, passed to every node of a scenario with a partition); its
	// HTTP API and actor-remote traffic are not cut (a control-plane
	// partition).
	ActionPartition = "partition"
)

// Arrival processes of the workload.
const (
	// ArrivalsPoisson draws exponential inter-arrival times (the default).
	ArrivalsPoisson = "poisson"
	// ArrivalsConstant sends at a fixed interval 1/rate.
	ArrivalsConstant = "constant"
)

// Duration is a time.Duration read from YAML as a Go duration string
// ("20s", "1m30s") or as a plain number of seconds.
type Duration time.Duration

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a duration such as 20s, got a %s", n.Line, kindName(n.Kind))
	}
	if f, err := strconv.ParseFloat(n.Value, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("line %d: duration %q is not finite", n.Line, n.Value)
		}
		*d = Duration(f * float64(time.Second))
		return nil
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: duration %q: want a number of seconds or a Go duration such as 20s", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML implements yaml.Marshaler.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "sequence"
	default:
		return "non-scalar"
	}
}

// Scenario is one chaos scenario: a topology, the nodes to start at its
// vertices, a workload, faults at given times and assertions on the report.
// Read it with Parse, Load or Default; the zero value is not valid.
type Scenario struct {
	// Name names the scenario in the report.
	Name string `yaml:"name"`
	// Description is free text.
	Description string `yaml:"description"`
	// Topology is "default" (or empty) for the topology embedded in the
	// node (Topology II), or a topology YAML file, relative to the
	// scenario file's directory.
	Topology string `yaml:"topology"`
	// Catalog is "default" (or empty) for the embedded catalog, or a
	// catalog YAML file relative to the scenario file's directory.
	Catalog string `yaml:"catalog"`
	// Nodes says how many nodes to start at each vertex and how.
	Nodes Nodes `yaml:"nodes"`
	// Workload is the open-loop load the runner drives. With Infida its
	// rate, duration, arrivals, tasks and entry come from Infida.
	Workload Workload `yaml:"workload"`
	// Infida, when set, runs the nodes with the INFIDA allocator of paper
	// 000 and drives the workload of `idn experiment infida` live (see
	// InfidaConfig).
	Infida *InfidaConfig `yaml:"infida"`
	// Faults are applied at their times, measured from the start of load.
	Faults []Fault `yaml:"faults"`
	// Assertions are checked on the report, e.g. "lost == 0"; see
	// AssertionMetrics for the names.
	Assertions []string `yaml:"assertions"`
	// Timeouts bound the phases of the run.
	Timeouts Timeouts `yaml:"timeouts"`

	// Dir is the directory relative file names are resolved against
	// (set by Load; empty for Default and Parse).
	Dir string `yaml:"-"`

	graph    *idn.Graph
	catalog  *idn.Catalog
	checks   []assertion
	nodeList []NodeSpec

	infidaCfg slot.ExperimentConfig // with Infida: the experiment behind it
	setup     *slot.Setup           // with Infida: its instance and batches
}

// Nodes configures the idn node processes.
type Nodes struct {
	// PerVertex is the number of nodes at every vertex not listed in
	// Vertices (default 1; 0 leaves those vertices without nodes).
	PerVertex *int `yaml:"per_vertex"`
	// Vertices overrides count and hosted models per vertex id.
	Vertices map[string]VertexNodes `yaml:"vertices"`
	// GPUs is each node's emulated GPU count (--gpus; default 1).
	GPUs int `yaml:"gpus"`
	// GPUMemMB is each node's GPU memory in MB (--gpu-mem-mb; 0 = node default).
	GPUMemMB int `yaml:"gpu_mem_mb"`
	// Args are extra flags passed to every idn node.
	Args []string `yaml:"args"`
}

// VertexNodes is the per-vertex part of Nodes.
type VertexNodes struct {
	// Count is the number of nodes at the vertex (their Raft group size);
	// nil means Nodes.PerVertex.
	Count *int `yaml:"count"`
	// Hosted is the static model allocation x^v (--hosted).
	Hosted []string `yaml:"hosted"`
	// Args are extra flags for the nodes of this vertex.
	Args []string `yaml:"args"`
}

// Workload is an open-loop request stream.
type Workload struct {
	// Rate is the mean request rate in requests per second (> 0).
	Rate float64 `yaml:"rate"`
	// Duration is how long requests are issued (> 0).
	Duration Duration `yaml:"duration"`
	// Arrivals is "poisson" (default) or "constant".
	Arrivals string `yaml:"arrivals"`
	// Seed seeds the arrival times and the task choice (default 1).
	Seed int64 `yaml:"seed"`
	// Tasks maps task name to relative weight (> 0).
	Tasks map[string]float64 `yaml:"tasks"`
	// Entry lists the vertices whose nodes receive the requests, round
	// robin over the live ones (default: the topology's base stations).
	Entry []string `yaml:"entry"`
	// SLOms is the per-request latency objective sent as slo_ms (0 = none).
	SLOms float64 `yaml:"slo_ms"`
	// MinAccuracy is sent as min_accuracy (0 = none); in [0,1].
	MinAccuracy float64 `yaml:"min_accuracy"`
	// MaxInFlight bounds concurrent requests (default 256); arrivals beyond
	// it are counted as skipped, never queued, so the load stays open-loop.
	MaxInFlight int `yaml:"max_in_flight"`
	// Timeout is the client's per-request timeout; default 2*slo_ms + 2s,
	// or 10s without an SLO. A request with no reply by then is lost.
	Timeout Duration `yaml:"timeout"`
}

// Fault is one fault injected at time At after the load starts.
type Fault struct {
	// ID names the fault so a later restart can refer to it.
	ID string `yaml:"id"`
	// At is the time after the start of the load.
	At Duration `yaml:"at"`
	// Action is kill, kill_leader, stop, pause, restart or partition.
	Action string `yaml:"action"`
	// Node names the target node (kill, stop, pause, restart, partition);
	// node names are "<vertex>-n<i>", i from 1.
	Node string `yaml:"node"`
	// Vertex names the vertex whose current leader kill_leader, kill, stop
	// or pause hits (instead of Node).
	Vertex string `yaml:"vertex"`
	// Fault is the id of an earlier kill, kill_leader or stop whose node
	// restart restarts (instead of Node).
	Fault string `yaml:"fault"`
	// Duration is how long a pause or partition lasts.
	Duration Duration `yaml:"duration"`
}

// Timeouts bound the phases of a run.
type Timeouts struct {
	// Startup bounds starting all nodes and waiting for membership and a
	// leader per vertex (default 90s).
	Startup Duration `yaml:"startup"`
	// Failover bounds the wait for a new leader after a leader kill
	// (default 30s); a failover not seen by then is reported as missed.
	Failover Duration `yaml:"failover"`
	// Settle is a pause between cluster ready and the first request
	// (default 1s).
	Settle Duration `yaml:"settle"`
	// Stop bounds the graceful stop of each node before SIGKILL (default 5s).
	Stop Duration `yaml:"stop"`
}

// NodeSpec is one node process the runner starts.
type NodeSpec struct {
	// Name is "<vertex>-n<i>".
	Name string
	// Vertex and Tier place the node in the topology.
	Vertex string
	// Tier is the vertex's tier.
	Tier int
	// GroupSize is the number of nodes at the vertex (--bootstrap-expect).
	GroupSize int
	// Args are the node's extra flags (hosted models, scenario args).
	Args []string
}

// Default returns the embedded quickstart scenario, validated.
func Default() (*Scenario, error) { return Parse(QuickstartYAML, "") }

// Load reads and validates a scenario file; relative topology and catalog
// paths are resolved against the file's directory.
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	sc, err := Parse(data, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return sc, nil
}

// Parse decodes a scenario document strictly (unknown fields are errors),
// applies defaults and validates it. dir resolves relative file names.
func Parse(data []byte, dir string) (*Scenario, error) {
	var sc Scenario
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&sc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: empty document", ErrInvalid)
		}
		return nil, fmt.Errorf("%w: yaml: %w", ErrInvalid, err)
	}
	sc.Dir = dir
	if err := sc.validate(); err != nil {
		return nil, err
	}
	return &sc, nil
}

// Graph returns the scenario's topology (valid after Parse).
func (sc *Scenario) Graph() *idn.Graph { return sc.graph }

// NodeSpecs returns the nodes to start, in start order (valid after Parse).
func (sc *Scenario) NodeSpecs() []NodeSpec { return append([]NodeSpec(nil), sc.nodeList...) }

// TopologyPath returns the topology file to pass to the nodes, or "" for
// the node's embedded default.
func (sc *Scenario) TopologyPath() string { return sc.resolve(sc.Topology) }

// CatalogPath returns the catalog file to pass to the nodes, or "" for the
// node's embedded default.
func (sc *Scenario) CatalogPath() string { return sc.resolve(sc.Catalog) }

func (sc *Scenario) resolve(p string) string {
	if p == "" || p == "default" {
		return ""
	}
	if filepath.IsAbs(p) || sc.Dir == "" {
		return p
	}
	return filepath.Join(sc.Dir, p)
}

// ClientTimeout is the per-request timeout of the load client.
func (w Workload) ClientTimeout() time.Duration {
	if w.Timeout > 0 {
		return w.Timeout.D()
	}
	if w.SLOms > 0 {
		return 2*time.Duration(w.SLOms*float64(time.Millisecond)) + 2*time.Second
	}
	return 10 * time.Second
}

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, a...)...)
}

func (sc *Scenario) validate() error {
	if sc.Name == "" {
		return invalid("name: empty")
	}
	// Topology and catalog.
	topo := idn.DefaultTopologyYAML
	if p := sc.TopologyPath(); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			return invalid("topology: %q: %w", sc.Topology, err)
		}
		topo = b
	}
	g, err := idn.ParseTopologyYAML(topo)
	if err != nil {
		return invalid("topology: %q: %w", sc.Topology, err)
	}
	sc.graph = g
	cat := idn.DefaultCatalogYAML
	if p := sc.CatalogPath(); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			return invalid("catalog: %q: %w", sc.Catalog, err)
		}
		cat = b
	}
	c, err := idn.ParseCatalogYAML(cat)
	if err != nil {
		return invalid("catalog: %q: %w", sc.Catalog, err)
	}
	sc.catalog = c
	if err := sc.validateNodes(); err != nil {
		return err
	}
	if sc.Infida != nil {
		if err := sc.validateInfida(); err != nil {
			return err
		}
	}
	if err := sc.validateWorkload(); err != nil {
		return err
	}
	if err := sc.validateFaults(); err != nil {
		return err
	}
	for _, f := range sc.Faults {
		if f.Action == ActionPartition {
			for i := range sc.nodeList {
				sc.nodeList[i].Args = append(sc.nodeList[i].Args, "--fault-api")
			}
			break
		}
	}
	checks := make([]assertion, 0, len(sc.Assertions))
	for i, s := range sc.Assertions {
		a, err := parseAssertion(s)
		if err != nil {
			return invalid("assertions[%d]: %q: %w", i, s, err)
		}
		checks = append(checks, a)
	}
	sc.checks = checks
	t := &sc.Timeouts
	for _, f := range []struct {
		name string
		d    *Duration
		def  time.Duration
	}{{"startup", &t.Startup, 90 * time.Second}, {"failover", &t.Failover, 30 * time.Second}, {"settle", &t.Settle, time.Second}, {"stop", &t.Stop, 5 * time.Second}} {
		if *f.d < 0 {
			return invalid("timeouts.%s: %s is negative", f.name, f.d.D())
		}
		if *f.d == 0 && f.name != "settle" {
			*f.d = Duration(f.def)
		}
	}
	return nil
}

func (sc *Scenario) validateNodes() error {
	n := &sc.Nodes
	per := 1
	if n.PerVertex != nil {
		per = *n.PerVertex
		if per < 0 || per > 9 {
			return invalid("nodes.per_vertex: %d: want 0..9", per)
		}
	}
	if n.GPUs < 0 {
		return invalid("nodes.gpus: %d is negative", n.GPUs)
	}
	if n.GPUs == 0 {
		n.GPUs = 1
	}
	if n.GPUMemMB < 0 {
		return invalid("nodes.gpu_mem_mb: %d is negative", n.GPUMemMB)
	}
	ids := make([]string, 0, len(n.Vertices))
	for id := range n.Vertices {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if _, ok := sc.graph.Vertex(id); !ok {
			return invalid("nodes.vertices: %q is not a vertex of the topology (have %s)", id, strings.Join(vertexIDs(sc.graph), ", "))
		}
		vn := n.Vertices[id]
		if vn.Count != nil && (*vn.Count < 0 || *vn.Count > 9) {
			return invalid("nodes.vertices.%s.count: %d: want 0..9", id, *vn.Count)
		}
		for i, m := range vn.Hosted {
			if _, ok := sc.catalog.ModelIndex(m); !ok {
				return invalid("nodes.vertices.%s.hosted[%d]: %q is not a model of the catalog (names look like task-00/yolov4-tiny-288p#0)", id, i, m)
			}
		}
	}
	sc.nodeList = nil
	for _, v := range sc.graph.Vertices {
		count := per
		vn := n.Vertices[v.ID]
		if vn.Count != nil {
			count = *vn.Count
		}
		for i := 1; i <= count; i++ {
			args := append([]string(nil), n.Args...)
			if len(vn.Hosted) > 0 {
				args = append(args, "--hosted", strings.Join(vn.Hosted, ","))
			}
			args = append(args, vn.Args...)
			sc.nodeList = append(sc.nodeList, NodeSpec{
				Name: fmt.Sprintf("%s-n%d", v.ID, i), Vertex: v.ID, Tier: v.Tier, GroupSize: count, Args: args,
			})
		}
	}
	if len(sc.nodeList) == 0 {
		return invalid("nodes: no node at any vertex")
	}
	return nil
}

func vertexIDs(g *idn.Graph) []string {
	out := make([]string, len(g.Vertices))
	for i, v := range g.Vertices {
		out[i] = v.ID
	}
	return out
}

func (sc *Scenario) validateWorkload() error {
	w := &sc.Workload
	if !(w.Rate > 0) || math.IsInf(w.Rate, 0) || w.Rate > 100000 {
		return invalid("workload.rate: %v: want requests per second in (0, 100000]", w.Rate)
	}
	if w.Duration <= 0 {
		return invalid("workload.duration: %s: want > 0", w.Duration.D())
	}
	switch w.Arrivals {
	case "":
		w.Arrivals = ArrivalsPoisson
	case ArrivalsPoisson, ArrivalsConstant:
	default:
		return invalid("workload.arrivals: %q: want poisson or constant", w.Arrivals)
	}
	if w.Seed == 0 {
		w.Seed = 1
	}
	if len(w.Tasks) == 0 && sc.Infida == nil {
		return invalid("workload.tasks: empty; give task: weight pairs (tasks of the catalog: %s ...)", strings.Join(firstN(sc.catalog.Tasks, 3), ", "))
	}
	for _, t := range sortedKeys(w.Tasks) {
		if _, ok := sc.catalog.TaskIndex(t); !ok {
			return invalid("workload.tasks: %q is not a task of the catalog (have %s ...)", t, strings.Join(firstN(sc.catalog.Tasks, 3), ", "))
		}
		if wt := w.Tasks[t]; !(wt > 0) || math.IsInf(wt, 0) {
			return invalid("workload.tasks.%s: weight %v: want > 0", t, wt)
		}
	}
	if len(w.Entry) == 0 {
		w.Entry = sc.graph.BaseStations()
	}
	hasNode := map[string]bool{}
	for _, n := range sc.nodeList {
		hasNode[n.Vertex] = true
	}
	for i, v := range w.Entry {
		if _, ok := sc.graph.Vertex(v); !ok {
			return invalid("workload.entry[%d]: %q is not a vertex of the topology", i, v)
		}
		if !hasNode[v] {
			return invalid("workload.entry[%d]: vertex %q has no nodes", i, v)
		}
	}
	if w.SLOms < 0 || math.IsNaN(w.SLOms) || math.IsInf(w.SLOms, 0) {
		return invalid("workload.slo_ms: %v: want >= 0", w.SLOms)
	}
	if w.MinAccuracy < 0 || w.MinAccuracy > 1 || math.IsNaN(w.MinAccuracy) {
		return invalid("workload.min_accuracy: %v: want in [0,1]", w.MinAccuracy)
	}
	if w.MaxInFlight < 0 {
		return invalid("workload.max_in_flight: %d is negative", w.MaxInFlight)
	}
	if w.MaxInFlight == 0 {
		w.MaxInFlight = 256
	}
	if w.Timeout < 0 {
		return invalid("workload.timeout: %s is negative", w.Timeout.D())
	}
	return nil
}

func (sc *Scenario) validateFaults() error {
	nodes := map[string]NodeSpec{}
	perVertex := map[string]int{}
	for _, n := range sc.nodeList {
		nodes[n.Name] = n
		perVertex[n.Vertex]++
	}
	checkNode := func(field, name string) error {
		if _, ok := nodes[name]; !ok {
			return invalid("%s.node: %q is not a node of the scenario (have %s)", field, name, strings.Join(nodeNames(sc.nodeList), ", "))
		}
		return nil
	}
	checkVertex := func(field, v string) error {
		if _, ok := sc.graph.Vertex(v); !ok {
			return invalid("%s.vertex: %q is not a vertex of the topology", field, v)
		}
		if perVertex[v] == 0 {
			return invalid("%s.vertex: %q has no nodes", field, v)
		}
		return nil
	}
	ids := map[string]int{}
	for i := range sc.Faults {
		f := &sc.Faults[i]
		field := fmt.Sprintf("faults[%d]", i)
		if f.At < 0 || f.At > sc.Workload.Duration {
			return invalid("%s.at: %s: want within the workload duration [0, %s]", field, f.At.D(), sc.Workload.Duration.D())
		}
		if f.ID != "" {
			if j, dup := ids[f.ID]; dup {
				return invalid("%s.id: %q already used by faults[%d]", field, f.ID, j)
			}
			ids[f.ID] = i
		}
		var err error
		switch f.Action {
		case ActionKill, ActionStop, ActionPause:
			// A node by name, or the vertex's current leader.
			switch {
			case (f.Node == "") == (f.Vertex == ""):
				err = invalid("%s: %s needs exactly one of node or vertex (its leader) (got node %q, vertex %q)", field, f.Action, f.Node, f.Vertex)
			case f.Node != "":
				err = checkNode(field, f.Node)
			default:
				err = checkVertex(field, f.Vertex)
			}
		case ActionKillLeader:
			if f.Node != "" {
				err = invalid("%s.node: %q: kill_leader picks the leader itself; give vertex", field, f.Node)
			} else {
				err = checkVertex(field, f.Vertex)
			}
		case ActionRestart:
			switch {
			case (f.Node == "") == (f.Fault == ""):
				err = invalid("%s: restart needs exactly one of node or fault (got node %q, fault %q)", field, f.Node, f.Fault)
			case f.Node != "":
				err = checkNode(field, f.Node)
			}
		case ActionPartition:
			switch {
			case (f.Node == "") == (f.Vertex == ""):
				err = invalid("%s: partition needs exactly one of node or vertex (its leader) (got node %q, vertex %q)", field, f.Node, f.Vertex)
			case f.Node != "":
				err = checkNode(field, f.Node)
			default:
				err = checkVertex(field, f.Vertex)
			}
		case "":
			err = invalid("%s.action: empty; want %s", field, actionList)
		default:
			err = invalid("%s.action: %q: want %s", field, f.Action, actionList)
		}
		if err != nil {
			return err
		}
		if f.Vertex != "" && f.Action == ActionRestart {
			return invalid("%s.vertex: %q: %s does not take a vertex", field, f.Vertex, f.Action)
		}
		if f.Action != ActionRestart && f.Fault != "" {
			return invalid("%s.fault: %q: only restart refers to a fault", field, f.Fault)
		}
		needsDuration := f.Action == ActionPartition || f.Action == ActionPause
		if needsDuration && f.Duration <= 0 {
			return invalid("%s.duration: %s: a %s needs a duration > 0", field, f.Duration.D(), f.Action)
		}
		if !needsDuration && f.Duration != 0 {
			return invalid("%s.duration: only pause and partition take a duration", field)
		}
		if needsDuration && f.At+f.Duration > sc.Workload.Duration {
			return invalid("%s.duration: %s: the %s would outlast the load (ends at %s)", field, f.Duration.D(), f.Action, sc.Workload.Duration.D())
		}
	}
	// Partitions must not overlap: each heals to "no drops" everywhere.
	for i, f := range sc.Faults {
		for j, g := range sc.Faults {
			if j <= i || f.Action != ActionPartition || g.Action != ActionPartition {
				continue
			}
			if f.At < g.At+g.Duration && g.At < f.At+f.Duration {
				return invalid("faults[%d].at: %s: partition overlaps faults[%d] (%s for %s); run one partition at a time", j, g.At.D(), i, f.At.D(), f.Duration.D())
			}
		}
	}
	// Restarts must follow the kill or stop they undo.
	downs := func(a string) bool { return a == ActionKill || a == ActionKillLeader || a == ActionStop }
	for i, f := range sc.Faults {
		if f.Action != ActionRestart {
			continue
		}
		field := fmt.Sprintf("faults[%d]", i)
		if f.Fault != "" {
			j, ok := ids[f.Fault]
			if !ok {
				return invalid("%s.fault: %q: no fault has that id", field, f.Fault)
			}
			k := sc.Faults[j]
			if !downs(k.Action) {
				return invalid("%s.fault: %q is a %s, not a kill, kill_leader or stop", field, f.Fault, k.Action)
			}
			if k.At >= f.At {
				return invalid("%s.at: %s: must be after faults[%d] (%q at %s)", field, f.At.D(), j, f.Fault, k.At.D())
			}
			continue
		}
		killed := false
		for _, k := range sc.Faults {
			if k.At < f.At && downs(k.Action) && k.Node == f.Node {
				killed = true
			}
		}
		if !killed {
			return invalid("%s.node: %q is not killed or stopped by name by an earlier fault (to restart a killed leader use fault: ID)", field, f.Node)
		}
	}
	return nil
}

const actionList = "kill, kill_leader, stop, pause, restart or partition"

func nodeNames(ns []NodeSpec) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Name
	}
	return out
}

func firstN(s []string, n int) []string {
	if len(s) < n {
		return s
	}
	return s[:n]
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
