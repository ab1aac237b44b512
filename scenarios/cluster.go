package scenarios

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ReadyLine is the one JSON line idn node prints on stdout when ready.
type ReadyLine struct {
	// Event is "ready".
	Event string `json:"event"`
	// Name and Vertex identify the node.
	Name   string `json:"name"`
	Vertex string `json:"vertex"`
	// API, Gossip, Remote and Raft are the bound host:port addresses.
	API    string `json:"api"`
	Gossip string `json:"gossip"`
	Remote string `json:"remote"`
	Raft   string `json:"raft"`
	// PID is the node's process id.
	PID int `json:"pid"`
}

// Status is the body of GET /v1/status.
type Status struct {
	// Name, Vertex and Tier identify the node.
	Name   string `json:"name"`
	Vertex string `json:"vertex"`
	Tier   int    `json:"tier"`
	// Ready is true when the node joined and its vertex has a leader.
	Ready bool `json:"ready"`
	// IsLeader is true on the Raft leader of the node's vertex.
	IsLeader bool `json:"is_leader"`
	// Leader names the vertex's leader ("" if none is known).
	Leader string `json:"leader"`
	// Members are the gossip members the node sees.
	Members []StatusMember `json:"members"`
	// Hosted are the models hosted at the node's vertex.
	Hosted []string `json:"hosted"`
	// Allocation is the allocator state (nil from a node without it).
	Allocation *StatusAllocation `json:"allocation"`
}

// StatusAllocation is the "allocation" object of GET /v1/status.
type StatusAllocation struct {
	// Mode is "infida" or "static"; SlotMs the slot length.
	Mode   string `json:"mode"`
	SlotMs int64  `json:"slot_ms"`
	// CommittedSlot is the FSM slot counter (last stepped slot + 1).
	CommittedSlot uint64 `json:"committed_slot"`
	// Models and Y are the FSM y^v, aligned; Hosted the FSM x^v.
	Models []string  `json:"models"`
	Y      []float64 `json:"y"`
	Hosted []string  `json:"hosted"`
	// Running is true on the node that runs the vertex's allocator.
	Running bool `json:"running"`
	// RestoredSlot and RestoredY are the committed_slot and y^v the
	// running allocator started from (RestoredY nil: the initial state).
	RestoredSlot uint64    `json:"restored_slot"`
	RestoredY    []float64 `json:"restored_y"`
	// SlotsStepped counts the slots this node's allocator stepped.
	SlotsStepped uint64 `json:"slots_stepped"`
}

// StatusMember is one member in a Status.
type StatusMember struct {
	// Name, Vertex and State ("alive", "suspect", "dead", "left") of a member.
	Name   string `json:"name"`
	Vertex string `json:"vertex"`
	State  string `json:"state"`
}

// alive counts the members whose state is alive (or unstated).
func (s *Status) alive() int {
	n := 0
	for _, m := range s.Members {
		if st := strings.ToLower(m.State); st == "" || st == "alive" {
			n++
		}
	}
	return n
}

// proc is one incarnation of a node process.
type proc struct {
	cmd   *exec.Cmd
	ready ReadyLine
	done  chan struct{} // closed when the process has exited and been reaped
	err   error         // exit error, valid after done
}

// nodeProc is one scenario node across its incarnations.
type nodeProc struct {
	spec     NodeSpec
	dataDir  string
	logPath  string
	cur      *proc // nil before the first start
	starts   int
	killed   int
	killedAt time.Time // last kill, stop or pause by the scenario
	cause    string    // what killedAt was: entry_killed, entry_stopped, entry_paused
	down     bool      // killed or stopped by the scenario and not restarted
	paused   bool      // SIGSTOPped and not yet resumed
}

// cluster owns the node processes of one run. All methods are safe for
// concurrent use; Close kills whatever is still running.
type cluster struct {
	bin      string
	env      []string
	dir      string
	topology string
	catalog  string
	gpus     int
	gpuMemMB int
	logf     func(format string, a ...any)
	client   *http.Client

	mu     sync.Mutex
	nodes  map[string]*nodeProc
	order  []string
	closed bool
	wg     sync.WaitGroup // stdout readers / reapers
}

func newCluster(bin string, env []string, dir string, sc *Scenario, logf func(string, ...any)) *cluster {
	c := &cluster{
		bin: bin, env: env, dir: dir, topology: sc.TopologyPath(), catalog: sc.CatalogPath(),
		gpus: sc.Nodes.GPUs, gpuMemMB: sc.Nodes.GPUMemMB, logf: logf,
		client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
		nodes:  map[string]*nodeProc{},
	}
	for _, s := range sc.NodeSpecs() {
		c.nodes[s.Name] = &nodeProc{spec: s, dataDir: filepath.Join(dir, s.Name, "data"), logPath: filepath.Join(dir, s.Name, "node.log")}
		c.order = append(c.order, s.Name)
	}
	return c
}

// args builds the idn node command line.
func (c *cluster) args(n *nodeProc, join []string, prev *ReadyLine) []string {
	bind := func(prevAddr string) string {
		if prevAddr != "" {
			return prevAddr
		}
		return "127.0.0.1:0"
	}
	var p ReadyLine
	if prev != nil {
		p = *prev
	}
	a := []string{"node",
		"--name", n.spec.Name, "--data-dir", n.dataDir, "--vertex", n.spec.Vertex, "--tier", strconv.Itoa(n.spec.Tier),
		"--bootstrap-expect", strconv.Itoa(n.spec.GroupSize), "--gpus", strconv.Itoa(c.gpus), "--executor", "emulated",
		"--bind-gossip", bind(p.Gossip), "--bind-remote", bind(p.Remote), "--bind-raft", bind(p.Raft), "--bind-api", bind(p.API),
	}
	if c.gpuMemMB > 0 {
		a = append(a, "--gpu-mem-mb", strconv.Itoa(c.gpuMemMB))
	}
	if len(join) > 0 {
		a = append(a, "--join", strings.Join(join, ","))
	}
	if c.topology != "" {
		a = append(a, "--topology", c.topology)
	}
	if c.catalog != "" {
		a = append(a, "--catalog", c.catalog)
	}
	return append(a, n.spec.Args...)
}

// errNodeExited is returned when a node exits before printing its ready line.
var errNodeExited = errors.New("node exited before it was ready")

// start starts (or restarts) node name and waits for its ready line. prev,
// when non-nil, pins the bind addresses of a previous incarnation.
func (c *cluster) start(ctx context.Context, name string, join []string, prev *ReadyLine, timeout time.Duration) (ReadyLine, error) {
	c.mu.Lock()
	n := c.nodes[name]
	if c.closed {
		c.mu.Unlock()
		return ReadyLine{}, errors.New("cluster closed")
	}
	if n.cur != nil && !isDone(n.cur.done) {
		c.mu.Unlock()
		return ReadyLine{}, fmt.Errorf("node %s is already running", name)
	}
	if err := os.MkdirAll(n.dataDir, 0o755); err != nil {
		c.mu.Unlock()
		return ReadyLine{}, fmt.Errorf("node %s: %w", name, err)
	}
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.mu.Unlock()
		return ReadyLine{}, fmt.Errorf("node %s: %w", name, err)
	}
	args := c.args(n, join, prev)
	fmt.Fprintf(logf, "=== %s %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(append([]string{c.bin}, args...), " "))
	cmd := exec.Command(c.bin, args...)
	cmd.Env = append(os.Environ(), c.env...)
	cmd.Stderr = logf
	cmd.SysProcAttr = sysProcAttr()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		c.mu.Unlock()
		logf.Close()
		return ReadyLine{}, fmt.Errorf("node %s: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		c.mu.Unlock()
		logf.Close()
		return ReadyLine{}, fmt.Errorf("node %s: start %s: %w", name, c.bin, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	n.cur = p
	n.starts++
	n.down = false
	n.paused = false
	readyCh := make(chan ReadyLine, 1)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer logf.Close()
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Bytes()
			if !sent {
				var r ReadyLine
				if json.Unmarshal(bytes.TrimSpace(line), &r) == nil && r.Event == "ready" {
					readyCh <- r
					sent = true
					continue
				}
			}
			fmt.Fprintf(logf, "[stdout] %s\n", line)
		}
		_, _ = io.Copy(io.Discard, stdout)
		p.err = cmd.Wait()
		close(p.done)
	}()
	c.mu.Unlock()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case r := <-readyCh:
		if r.API == "" || r.Gossip == "" {
			_, _, _ = c.kill(name, false)
			return ReadyLine{}, fmt.Errorf("node %s: ready line without api or gossip address: %+v", name, r)
		}
		c.mu.Lock()
		p.ready = r
		c.mu.Unlock()
		return r, nil
	case <-p.done:
		return ReadyLine{}, fmt.Errorf("node %s: %w (%v); last log lines:\n%s", name, errNodeExited, p.err, tail(n.logPath, 15))
	case <-timer.C:
		_, _, _ = c.kill(name, false)
		return ReadyLine{}, fmt.Errorf("node %s: no ready line on stdout within %s; last log lines:\n%s", name, timeout, tail(n.logPath, 15))
	case <-ctx.Done():
		_, _, _ = c.kill(name, false)
		return ReadyLine{}, fmt.Errorf("node %s: %w", name, ctx.Err())
	}
}

func isDone(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL to node name and waits until it is reaped. byScenario
// marks it as a fault (down until restarted). It returns the killed pid and
// the time the signal was sent.
func (c *cluster) kill(name string, byScenario bool) (int, time.Time, error) {
	c.mu.Lock()
	n := c.nodes[name]
	p := n.cur
	if p == nil || isDone(p.done) {
		c.mu.Unlock()
		return 0, time.Time{}, fmt.Errorf("node %s is not running", name)
	}
	at := time.Now()
	if byScenario {
		n.killed++
		n.killedAt, n.cause = at, "entry_killed"
		n.down = true
	}
	n.paused = false
	c.mu.Unlock()
	pid := p.cmd.Process.Pid
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return pid, at, fmt.Errorf("kill node %s: %w", name, err)
	}
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		return pid, at, fmt.Errorf("node %s (pid %d) not reaped 10s after SIGKILL", name, pid)
	}
	return pid, at, nil
}

// terminate sends SIGTERM to node name (a graceful leave), waits up to
// grace for it to exit, then SIGKILLs it. The node is down until restarted.
func (c *cluster) terminate(name string, grace time.Duration) (int, time.Time, error) {
	c.mu.Lock()
	n := c.nodes[name]
	p := n.cur
	if p == nil || isDone(p.done) || n.paused {
		c.mu.Unlock()
		return 0, time.Time{}, fmt.Errorf("node %s is not running (or paused)", name)
	}
	at := time.Now()
	n.killed++
	n.killedAt, n.cause = at, "entry_stopped"
	n.down = true
	c.mu.Unlock()
	pid := p.cmd.Process.Pid
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return pid, at, fmt.Errorf("stop node %s: %w", name, err)
	}
	select {
	case <-p.done:
		return pid, at, nil
	case <-time.After(grace):
	}
	c.logf("node %s (pid %d) did not exit within %s of SIGTERM: SIGKILL", name, pid, grace)
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
		return pid, at, nil
	case <-time.After(10 * time.Second):
		return pid, at, fmt.Errorf("node %s (pid %d) not reaped 10s after SIGKILL", name, pid)
	}
}

// pause freezes node name with SIGSTOP; resume undoes it.
func (c *cluster) pause(name string) (int, time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[name]
	p := n.cur
	if p == nil || isDone(p.done) || n.paused {
		return 0, time.Time{}, fmt.Errorf("node %s is not running (or already paused)", name)
	}
	at := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return 0, at, fmt.Errorf("pause node %s: %w", name, err)
	}
	n.paused = true
	n.killedAt, n.cause = at, "entry_paused"
	return p.cmd.Process.Pid, at, nil
}

// partition cuts node name off every other node: it tells name to drop the
// gossip and Raft addresses of all the others, and each other live node to
// drop name's (POST /v1/fault). Nodes not running are skipped.
func (c *cluster) partition(ctx context.Context, name string) (int, time.Time, error) {
	target, ok := c.live(name)
	if !ok {
		return 0, time.Time{}, fmt.Errorf("node %s is not running", name)
	}
	var drops []string
	for _, other := range c.order {
		if other == name {
			continue
		}
		if r := c.lastReady(other); r.Gossip != "" {
			drops = append(drops, r.Gossip, r.Raft)
		}
	}
	if err := c.setDrop(ctx, name, drops); err != nil {
		return target.PID, time.Time{}, err
	}
	at := time.Now()
	var errs []error
	for _, other := range c.order {
		if _, ok := c.live(other); ok && other != name {
			errs = append(errs, c.setDrop(ctx, other, []string{target.Gossip, target.Raft}))
		}
	}
	return target.PID, at, errors.Join(errs...)
}

// heal clears the drop lists of every live node.
func (c *cluster) heal(ctx context.Context) error {
	var errs []error
	for _, name := range c.order {
		if _, ok := c.live(name); ok {
			errs = append(errs, c.setDrop(ctx, name, []string{}))
		}
	}
	return errors.Join(errs...)
}

// setDrop sets node name's drop list through POST /v1/fault.
func (c *cluster) setDrop(ctx context.Context, name string, drops []string) error {
	r, ok := c.live(name)
	if !ok {
		return fmt.Errorf("node %s is not running", name)
	}
	body, err := json.Marshal(map[string][]string{"drop": drops})
	if err != nil {
		return fmt.Errorf("node %s: %w", name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+r.API+"/v1/fault", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("node %s: %w", name, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("node %s: POST /v1/fault: %w", name, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("node %s: POST /v1/fault: %s: %s (idn node needs --fault-api)", name, resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// resume sends SIGCONT to a paused node.
func (c *cluster) resume(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[name]
	p := n.cur
	if p == nil || isDone(p.done) || !n.paused {
		return fmt.Errorf("node %s is not paused", name)
	}
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("resume node %s: %w", name, err)
	}
	n.paused = false
	return nil
}

// live reports whether node name is running, ready, and neither paused nor
// being killed or stopped by the scenario.
func (c *cluster) live(name string) (ReadyLine, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.nodes[name]
	if !ok || n.cur == nil || isDone(n.cur.done) || n.cur.ready.API == "" || n.paused || n.down {
		return ReadyLine{}, false
	}
	return n.cur.ready, true
}

// faultedSince returns entry_killed, entry_stopped or entry_paused when the
// scenario last hit node name at or after t, else "".
func (c *cluster) faultedSince(name string, t time.Time) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.nodes[name]
	if !ok || n.killedAt.IsZero() || n.killedAt.Before(t) {
		return ""
	}
	return n.cause
}

// gossipSeeds returns the gossip addresses of the live nodes except skip.
func (c *cluster) gossipSeeds(skip string) []string {
	var out []string
	for _, name := range c.order {
		if name == skip {
			continue
		}
		if r, ok := c.live(name); ok {
			out = append(out, r.Gossip)
		}
	}
	return out
}

// vertexNodes returns the nodes of vertex v in start order.
func (c *cluster) vertexNodes(v string) []string {
	var out []string
	for _, name := range c.order {
		if c.nodes[name].spec.Vertex == v {
			out = append(out, name)
		}
	}
	return out
}

// lastReady returns the last ready line of node name (zero if never ready).
func (c *cluster) lastReady(name string) ReadyLine {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.nodes[name]; n.cur != nil {
		return n.cur.ready
	}
	return ReadyLine{}
}

// status reads GET /v1/status of node name.
func (c *cluster) status(ctx context.Context, name string, timeout time.Duration) (*Status, error) {
	r, ok := c.live(name)
	if !ok {
		return nil, fmt.Errorf("node %s is not running", name)
	}
	var st Status
	if err := c.getJSON(ctx, "http://"+r.API+"/v1/status", timeout, &st); err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	return &st, nil
}

func (c *cluster) get(ctx context.Context, url string, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, bytes.TrimSpace(body))
	}
	return body, nil
}

func (c *cluster) getJSON(ctx context.Context, url string, timeout time.Duration, out any) error {
	body, err := c.get(ctx, url, timeout)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("GET %s: decode: %w", url, err)
	}
	return nil
}

// Close stops every running node: SIGTERM, then SIGKILL after grace, and
// waits for all of them and for the cluster's goroutines. Idempotent.
func (c *cluster) Close(grace time.Duration) {
	c.mu.Lock()
	c.closed = true
	var procs []*proc
	for _, name := range c.order {
		n := c.nodes[name]
		if p := n.cur; p != nil && !isDone(p.done) {
			procs = append(procs, p)
			if n.paused { // a stopped process would sit on SIGTERM
				_ = p.cmd.Process.Signal(syscall.SIGCONT)
				n.paused = false
			}
		}
	}
	c.mu.Unlock()
	for _, p := range procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.After(grace)
	for _, p := range procs {
		select {
		case <-p.done:
		case <-deadline:
		}
	}
	for _, p := range procs {
		if !isDone(p.done) {
			c.logf("node pid %d did not stop within %s of SIGTERM: SIGKILL", p.cmd.Process.Pid, grace)
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
		}
	}
	for _, p := range procs {
		<-p.done
	}
	c.wg.Wait()
	c.client.CloseIdleConnections()
}

// tail returns the last n lines of the file at path, indented.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "    (no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ")
}
