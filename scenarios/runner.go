package scenarios

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// Options configure Run.
type Options struct {
	// Bin is the idn binary whose `node` subcommand is started; "" means
	// the running executable (os.Executable).
	Bin string
	// Env is added to the nodes' environment.
	Env []string
	// Progress receives progress lines (nil: discarded).
	Progress io.Writer
	// WorkDir holds the nodes' data dirs and logs; "" means a new temporary
	// directory, removed after a passing run and kept (and named in the
	// error) after a failed one, including a failed assertion.
	WorkDir string
}

// statusTimeout bounds one GET /v1/status.
const statusTimeout = 2 * time.Second

// Run executes the scenario: it starts the nodes, waits for the cluster,
// drives the load while applying the faults, collects the report and stops
// every node on every path (also when ctx is cancelled). The report is
// non-nil whenever the load started (partial, with Passed false, when ctx
// was cancelled during it); the error wraps ErrAssertionFailed when the run
// went through but an assertion or a fault failed.
func Run(ctx context.Context, sc *Scenario, opt Options) (rep *Report, err error) {
	progress := opt.Progress
	if progress == nil {
		progress = io.Discard
	}
	var logMu sync.Mutex
	var loadStart time.Time // set once before the load; read under logMu
	t0 := time.Now()
	logf := func(format string, a ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		if loadStart.IsZero() {
			fmt.Fprintf(progress, "[setup %5.1fs] %s\n", time.Since(t0).Seconds(), fmt.Sprintf(format, a...))
			return
		}
		fmt.Fprintf(progress, "[%6.1fs] %s\n", time.Since(loadStart).Seconds(), fmt.Sprintf(format, a...))
	}
	bin := opt.Bin
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("scenario: find the idn binary: %w (give --bin)", err)
		}
	}
	dir := opt.WorkDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "idn-scenario-"); err != nil {
			return nil, fmt.Errorf("scenario: %w", err)
		}
		defer func() {
			if err != nil {
				err = fmt.Errorf("%w (node logs kept in %s)", err, dir)
				return
			}
			_ = os.RemoveAll(dir)
		}()
	}
	for _, n := range sc.NodeSpecs() {
		if _, serr := os.Stat(filepath.Join(dir, n.Name)); serr == nil {
			return nil, fmt.Errorf("scenario: work dir %s already holds a node dir %s from an earlier run: give an empty or new directory", dir, n.Name)
		}
	}
	logf("work dir %s (node data dirs and logs), idn binary %s", dir, bin)
	var inf *infidaState
	if sc.Infida != nil {
		if inf, err = newInfidaState(sc, logf); err != nil {
			return nil, err
		}
	}
	c := newCluster(bin, opt.Env, dir, sc, logf)
	defer c.Close(sc.Timeouts.Stop.D())

	if err := startAll(ctx, c, sc, logf); err != nil {
		return nil, err
	}
	if err := waitConverged(ctx, c, sc.Timeouts.Startup.D(), logf); err != nil {
		return nil, err
	}
	if inf != nil {
		if err := waitAllocators(ctx, c, sc.Timeouts.Startup.D(), logf); err != nil {
			return nil, err
		}
	}
	if d := sc.Timeouts.Settle.D(); d > 0 {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("scenario: %w", ctx.Err())
		case <-time.After(d):
		}
	}

	var entries []string
	for _, v := range sc.Workload.Entry {
		entries = append(entries, c.vertexNodes(v)...)
	}
	ld := newLoader(sc.Workload, entries, c, logf)
	fr := &faultRunner{c: c, sc: sc, logf: logf}
	start := time.Now()
	if inf != nil {
		start = inf.begin(c, fr, logf)
	}
	logMu.Lock()
	loadStart = start
	logMu.Unlock()
	logf("load: %.1f req/s (%s) for %s to %s, %d faults", sc.Workload.Rate, sc.Workload.Arrivals, sc.Workload.Duration.D(), strings.Join(entries, ","), len(sc.Faults))

	var wg sync.WaitGroup
	loadDone := make(chan struct{})
	lw := newLeaderWatcher(c)
	if inf != nil {
		inf.watch(ctx, &wg, start, loadDone)
	}
	wg.Add(4)
	go func() {
		defer wg.Done()
		defer close(loadDone)
		if inf != nil {
			ld.runInfida(ctx, start, inf.plan, inf.in)
			return
		}
		ld.run(ctx, start)
	}()
	go func() {
		defer wg.Done()
		lw.run(ctx, start, loadDone)
	}()
	go func() {
		defer wg.Done()
		fr.run(ctx, start)
	}()
	go func() {
		defer wg.Done()
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-loadDone:
				return
			case <-tick.C:
				sent, res, errs, lost := ld.snapshot()
				logf("progress: sent %d, results %d, errors %d, lost %d, in flight %d", sent, res, errs, lost, ld.inFlight.Load())
			}
		}
	}()
	wg.Wait()
	if ctx.Err() != nil {
		// A partial report of what was measured; the nodes are not asked.
		rep = Summarize(ld.results())
		rep.Scenario = sc.Name
		rep.DurationS = time.Since(start).Seconds()
		rep.RateRPS = sc.Workload.Rate
		rep.Faults, rep.Failovers = fr.results()
		rep.Leaders = lw.results()
		return rep, fmt.Errorf("scenario: interrupted after %.1fs of load (partial report): %w", rep.DurationS, ctx.Err())
	}
	logf("load done; reading /v1/status and /metrics")

	endProblems := settleConverged(ctx, c, 10*time.Second)
	if len(endProblems) > 0 {
		logf("cluster not converged at the end: %s", strings.Join(endProblems, "; "))
	}
	rep = Summarize(ld.results())
	rep.ConvergedAtEnd = len(endProblems) == 0
	rep.EndProblems = append([]string{}, endProblems...)
	rep.Scenario = sc.Name
	rep.DurationS = sc.Workload.Duration.D().Seconds()
	rep.RateRPS = sc.Workload.Rate
	rep.Faults, rep.Failovers = fr.results()
	rep.Leaders = lw.results()
	rep.Nodes = finalNodes(ctx, c)
	rep.sumServerCounters()
	if inf != nil {
		rep.Infida = inf.report(ld.results())
	}
	return rep, rep.Check(sc)
}

// startAll starts the first node alone, then the others in parallel with
// the first node's gossip address as their seed.
func startAll(ctx context.Context, c *cluster, sc *Scenario, logf func(string, ...any)) error {
	specs := sc.NodeSpecs()
	timeout := sc.Timeouts.Startup.D()
	first, err := c.start(ctx, specs[0].Name, nil, nil, timeout)
	if err != nil {
		return fmt.Errorf("scenario: start: %w", err)
	}
	logf("started %s (vertex %s) pid %d api %s gossip %s", first.Name, specs[0].Vertex, first.PID, first.API, first.Gossip)
	var wg sync.WaitGroup
	errs := make([]error, len(specs))
	for i, s := range specs[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := c.start(ctx, s.Name, []string{first.Gossip}, nil, timeout)
			if err != nil {
				errs[i+1] = err
				return
			}
			logf("started %s (vertex %s) pid %d api %s", s.Name, s.Vertex, r.PID, r.API)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("scenario: start: %w", err)
	}
	return nil
}

// waitConverged polls /v1/status of every live node until each is ready,
// sees every live node as an alive member, and every vertex with live
// nodes has exactly one leader that all its live nodes agree on.
func waitConverged(ctx context.Context, c *cluster, timeout time.Duration, logf func(string, ...any)) error {
	deadline := time.Now().Add(timeout)
	began := time.Now()
	var last []string
	for {
		last = convergenceProblems(ctx, c)
		if len(last) == 0 {
			logf("cluster converged in %.1fs: %d nodes, a leader at every vertex", time.Since(began).Seconds(), len(liveNames(c)))
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("scenario: cluster did not converge within %s (timeouts.startup):\n  %s", timeout, strings.Join(last, "\n  "))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("scenario: waiting for the cluster: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// settleConverged waits up to timeout for the cluster to converge again
// (see waitConverged) and returns what still keeps it from converging.
func settleConverged(ctx context.Context, c *cluster, timeout time.Duration) []string {
	deadline := time.Now().Add(timeout)
	for {
		p := convergenceProblems(ctx, c)
		if len(p) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return p
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func liveNames(c *cluster) []string {
	var out []string
	for _, n := range c.order {
		if _, ok := c.live(n); ok {
			out = append(out, n)
		}
	}
	return out
}

// convergenceProblems lists what keeps the cluster from being converged.
func convergenceProblems(ctx context.Context, c *cluster) []string {
	live := liveNames(c)
	var problems []string
	leaders := map[string][]string{}  // vertex -> nodes reporting is_leader
	leaderOf := map[string][]string{} // vertex -> leader names reported
	vertices := map[string]bool{}
	for _, name := range live {
		st, err := c.status(ctx, name, statusTimeout)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		v := c.nodes[name].spec.Vertex
		vertices[v] = true
		if !st.Ready {
			problems = append(problems, fmt.Sprintf("%s: not ready (leader %q, %d/%d alive members)", name, st.Leader, st.alive(), len(live)))
		}
		if st.alive() < len(live) {
			problems = append(problems, fmt.Sprintf("%s: sees %d of %d live nodes as alive members", name, st.alive(), len(live)))
		}
		if st.IsLeader {
			leaders[v] = append(leaders[v], name)
		}
		leaderOf[v] = append(leaderOf[v], st.Leader)
	}
	vs := sortedKeys(vertices)
	for _, v := range vs {
		switch l := leaders[v]; len(l) {
		case 0:
			problems = append(problems, fmt.Sprintf("vertex %s: no node reports is_leader", v))
		case 1:
			for _, name := range leaderOf[v] {
				if name != l[0] {
					problems = append(problems, fmt.Sprintf("vertex %s: leader is %s but a node reports leader %q", v, l[0], name))
					break
				}
			}
		default:
			problems = append(problems, fmt.Sprintf("vertex %s: several nodes report is_leader: %s", v, strings.Join(l, ", ")))
		}
	}
	return problems
}

// finalNodes reads every node's status and metrics at the end of the run.
func finalNodes(ctx context.Context, c *cluster) []NodeReport {
	out := make([]NodeReport, 0, len(c.order))
	for _, name := range c.order {
		c.mu.Lock()
		n := c.nodes[name]
		nr := NodeReport{Name: name, Vertex: n.spec.Vertex, Starts: n.starts, Killed: n.killed}
		c.mu.Unlock()
		r, ok := c.live(name)
		if !ok {
			nr.Error = "not running"
			out = append(out, nr)
			continue
		}
		nr.API, nr.PID = r.API, r.PID
		nr.AliveAtEnd = true
		var errs []string
		if st, err := c.status(ctx, name, statusTimeout); err != nil {
			errs = append(errs, err.Error())
		} else {
			nr.IsLeaderAtEnd = st.IsLeader
			nr.Members = st.alive()
		}
		if body, err := c.get(ctx, "http://"+r.API+"/metrics", statusTimeout); err != nil {
			errs = append(errs, err.Error())
		} else {
			nr.Metrics = parseMetrics(body, reportedMetrics)
		}
		nr.Error = strings.Join(errs, "; ")
		out = append(out, nr)
	}
	return out
}

// faultRunner applies the faults on schedule and measures failovers.
type faultRunner struct {
	c    *cluster
	sc   *Scenario
	logf func(string, ...any)
	// onLeaderHit, when set, is told of every kill or stop of a vertex
	// leader with other live nodes (before the failover is measured).
	onLeaderHit func(vertex, node string, at time.Time)

	mu        sync.Mutex
	records   []FaultRecord
	failovers []Failover
	killedBy  map[string]string // fault id -> node it killed
	wg        sync.WaitGroup    // failover watchers
}

func (fr *faultRunner) results() ([]FaultRecord, []Failover) {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	recs := append([]FaultRecord{}, fr.records...)
	fos := append([]Failover{}, fr.failovers...)
	sort.SliceStable(fos, func(i, j int) bool { return fos[i].KilledAtS < fos[j].KilledAtS })
	return recs, fos
}

// run applies the faults in time order; it returns after the last fault,
// every pending resume and every failover watcher, or when ctx is cancelled.
func (fr *faultRunner) run(ctx context.Context, start time.Time) {
	defer fr.wg.Wait()
	fr.killedBy = map[string]string{}
	faults := append([]Fault(nil), fr.sc.Faults...)
	sort.SliceStable(faults, func(i, j int) bool { return faults[i].At < faults[j].At })
	for _, f := range faults {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(start.Add(f.At.D()))):
		}
		rec := FaultRecord{Action: f.Action, Node: f.Node, Vertex: f.Vertex, AtS: f.At.D().Seconds()}
		var err error
		switch f.Action {
		case ActionKill, ActionKillLeader, ActionStop, ActionPause, ActionPartition:
			target := f.Node
			if f.Vertex != "" {
				target, err = fr.findLeader(ctx, f.Vertex)
			}
			if err == nil {
				rec.Node = target
				err = fr.hit(ctx, start, f, target, f.Vertex)
			}
		case ActionRestart:
			if f.Fault != "" {
				fr.mu.Lock()
				rec.Node = fr.killedBy[f.Fault]
				fr.mu.Unlock()
			}
			err = fr.restart(ctx, rec.Node)
		}
		if err == nil && f.ID != "" {
			fr.mu.Lock()
			fr.killedBy[f.ID] = rec.Node
			fr.mu.Unlock()
		}
		rec.AppliedAtS = time.Since(start).Seconds()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			rec.Error = err.Error()
			fr.logf("fault %s FAILED: %v", f.Action, err)
		}
		fr.mu.Lock()
		fr.records = append(fr.records, rec)
		fr.mu.Unlock()
	}
}

// findLeader returns the live node of vertex v that reports is_leader,
// waiting up to 5 s for one.
func (fr *faultRunner) findLeader(ctx context.Context, v string) (string, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		for _, name := range fr.c.vertexNodes(v) {
			if _, ok := fr.c.live(name); !ok {
				continue
			}
			st, err := fr.c.status(ctx, name, statusTimeout)
			if err == nil && st.IsLeader {
				return name, nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("vertex %s: no live node reports is_leader", v)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// hit applies a kill, stop or pause to node name. leaderOf is the vertex it
// is known to lead ("" = ask it first); when it led a group with other live
// members a failover watcher measures the election (a group of one has
// nobody to take over).
func (fr *faultRunner) hit(ctx context.Context, start time.Time, f Fault, name, leaderOf string) error {
	if leaderOf == "" {
		if st, err := fr.c.status(ctx, name, 500*time.Millisecond); err == nil && st.IsLeader {
			leaderOf = fr.c.nodes[name].spec.Vertex
		}
	}
	others := 0
	if leaderOf != "" {
		for _, n := range fr.c.vertexNodes(leaderOf) {
			if _, ok := fr.c.live(n); ok && n != name {
				others++
			}
		}
	}
	var (
		pid int
		at  time.Time
		err error
		how string
	)
	switch f.Action {
	case ActionStop:
		how = "SIGTERM"
		pid, at, err = fr.c.terminate(name, fr.sc.Timeouts.Stop.D())
	case ActionPause:
		how = "SIGSTOP"
		pid, at, err = fr.c.pause(name)
	case ActionPartition:
		how = "partition"
		pid, at, err = fr.c.partition(ctx, name)
	default:
		how = "SIGKILL"
		pid, at, err = fr.c.kill(name, true)
	}
	if err != nil {
		return err
	}
	role := ""
	if leaderOf != "" && others == 0 {
		role = fmt.Sprintf(" (the only live node of %s: no failover to measure)", leaderOf)
	}
	// (a vertex of one node is reported too: its restart must resume)
	if leaderOf != "" && fr.onLeaderHit != nil && (how == "SIGKILL" || how == "SIGTERM") {
		fr.onLeaderHit(leaderOf, name, at)
	}
	if leaderOf != "" && others > 0 {
		role = fmt.Sprintf(" (leader of %s)", leaderOf)
		fr.wg.Add(1)
		go func() {
			defer fr.wg.Done()
			fr.watchFailover(ctx, start, leaderOf, name, how, at)
		}()
	}
	fr.logf("fault: %s %s%s pid %d", how, name, role, pid)
	if f.Action == ActionPartition {
		fr.wg.Add(1)
		go func() {
			defer fr.wg.Done()
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(at.Add(f.Duration.D()))):
			}
			if err := fr.c.heal(ctx); err != nil {
				fr.logf("fault: heal partition of %s FAILED: %v", name, err)
				fr.mu.Lock()
				fr.records = append(fr.records, FaultRecord{Action: "heal", Node: name, AtS: (f.At + f.Duration).D().Seconds(), AppliedAtS: time.Since(start).Seconds(), Error: err.Error()})
				fr.mu.Unlock()
				return
			}
			fr.logf("fault: healed the partition of %s after %s", name, f.Duration.D())
		}()
	}
	if f.Action == ActionPause {
		fr.wg.Add(1)
		go func() {
			defer fr.wg.Done()
			select {
			case <-ctx.Done(): // Close resumes paused nodes before stopping them
				return
			case <-time.After(time.Until(at.Add(f.Duration.D()))):
			}
			if err := fr.c.resume(name); err != nil {
				fr.logf("fault: SIGCONT %s FAILED: %v", name, err)
				fr.mu.Lock()
				fr.records = append(fr.records, FaultRecord{Action: "resume", Node: name, AtS: (f.At + f.Duration).D().Seconds(), AppliedAtS: time.Since(start).Seconds(), Error: err.Error()})
				fr.mu.Unlock()
				return
			}
			fr.logf("fault: SIGCONT %s after %s", name, f.Duration.D())
		}()
	}
	return nil
}

// watchFailover polls the other live nodes of vertex v every 25 ms until one
// reports is_leader, or timeouts.failover passes.
func (fr *faultRunner) watchFailover(ctx context.Context, start time.Time, v, killed, how string, at time.Time) {
	fo := Failover{Vertex: v, Killed: killed, Fault: how, KilledAtS: at.Sub(start).Seconds()}
	defer func() {
		fr.mu.Lock()
		fr.failovers = append(fr.failovers, fo)
		fr.mu.Unlock()
	}()
	deadline := at.Add(fr.sc.Timeouts.Failover.D())
	for time.Now().Before(deadline) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		winner := ""
		var seen time.Time
		for _, name := range fr.c.vertexNodes(v) {
			if name == killed {
				continue
			}
			if _, ok := fr.c.live(name); !ok {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, err := fr.c.status(ctx, name, 500*time.Millisecond)
				now := time.Now()
				if err == nil && st.IsLeader {
					mu.Lock()
					if winner == "" || now.Before(seen) {
						winner, seen = name, now
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if winner != "" {
			d := seen.Sub(at).Seconds()
			fo.NewLeader, fo.ElectedAfterS = winner, &d
			fr.logf("failover: %s is the new leader of %s, %.3fs after the %s of %s", winner, v, d, how, killed)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(25 * time.Millisecond):
		}
	}
	fr.logf("failover: NO new leader of %s within %s of the %s of %s", v, fr.sc.Timeouts.Failover.D(), how, killed)
}

// restart starts a killed node again with the same name, data dir and
// addresses (falling back to fresh ports if the old ones are taken), joining
// through the live nodes.
func (fr *faultRunner) restart(ctx context.Context, name string) error {
	if name == "" {
		return errors.New("restart: the fault it refers to killed no node")
	}
	if _, ok := fr.c.live(name); ok {
		return fmt.Errorf("restart %s: it is running", name)
	}
	prev := fr.c.lastReady(name)
	join := fr.c.gossipSeeds(name)
	timeout := fr.sc.Timeouts.Startup.D()
	r, err := fr.c.start(ctx, name, join, &prev, timeout)
	if err != nil && errors.Is(err, errNodeExited) && ctx.Err() == nil {
		fr.logf("restart %s on its old ports failed (%v); retrying on fresh ports", name, firstLine(err.Error()))
		r, err = fr.c.start(ctx, name, join, nil, timeout)
	}
	if err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	fr.logf("fault: restarted %s pid %d api %s", name, r.PID, r.API)
	return nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
