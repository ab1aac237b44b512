package main

// idn experiment rl: paper 002 (Tan et al., TMC 2024), PPO-learned
// workload-adaptive request scheduling, and its baselines.
//
// This file holds the parallel runner: the pure pieces of policy/rl
// (Agent.Rollout, Agent.Gradient, Agent.Update, the baselines) run here on
// goroutines, each owning its system, batch and scratch space; every
// goroutine is joined with a WaitGroup before the results are used, and the
// results are combined in a fixed order, so a run is a deterministic function
// of its flags (including --workers).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/idn-net/idn/policy/rl"
	"github.com/idn-net/idn/policy/sim"
	"github.com/idn-net/idn/policy/sim/instances"
)

func init() {
	registerExperiment(&command{
		name:    "rl",
		summary: "paper 002: PPO workload-adaptive scheduling (rl train | rl eval)",
		run:     runRL,
	})
}

func runRL(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sub := map[string]*command{
		"train": {name: "train", summary: "train a PPO scheduling policy on the simulator", run: runRLTrain},
		"eval":  {name: "eval", summary: "evaluate a policy and every baseline (Table 2 columns)", run: runRLEval},
	}
	return dispatch(ctx, "idn experiment rl", sub, args, stdout, stderr)
}

// newWorkload returns a fresh workload by name.
func newWorkload(name string) (instances.Workload, error) {
	switch name {
	case "spp":
		return instances.SPPWorkload(), nil
	case "periodic", "nonmarkovian":
		return instances.NonMarkovian(), nil
	}
	return nil, fmt.Errorf("%w: --workload = %q, want spp or periodic", errUsage, name)
}

type trainFlags struct {
	workload   string
	steps      int64
	out        string
	fullObs    bool
	workers    int
	seed       uint64
	evalEvery  int
	evalSlots  int
	ckptEvery  int
	timeLimit  time.Duration
	resume     string
	cfg        rl.Config
	commandStr string
}

func runRLTrain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("idn experiment rl train", "idn experiment rl train --workload spp --steps N --out FILE [flags]", stderr)
	var f trainFlags
	f.cfg = rl.DefaultConfig()
	fs.StringVar(&f.workload, "workload", "spp", "arrival process: spp (eq. 12) or periodic (non-Markovian, Sec. 5.2.3)")
	fs.Int64Var(&f.steps, "steps", 1_000_000, "training time slots to collect")
	fs.StringVar(&f.out, "out", "", "checkpoint file to write (required); rewritten periodically")
	fs.BoolVar(&f.fullObs, "fo", false, "full observability: the policy also observes the MAP phase (RL-FO)")
	fs.IntVar(&f.workers, "workers", runtime.NumCPU(), "parallel rollout/gradient workers")
	fs.Uint64Var(&f.seed, "seed", 1, "random seed")
	fs.IntVar(&f.evalEvery, "eval-every", 5, "deterministic evaluation every this many updates (0: never)")
	fs.IntVar(&f.evalSlots, "eval-slots", 20000, "slots per periodic evaluation")
	fs.IntVar(&f.ckptEvery, "checkpoint-every", 5, "write --out every this many updates")
	fs.DurationVar(&f.timeLimit, "time-limit", 0, "stop (and save) after this wall time (0: no limit)")
	fs.StringVar(&f.resume, "resume", "", "continue from this checkpoint (Adam moments restart)")
	fs.IntVar(&f.cfg.Rollout, "rollout", f.cfg.Rollout, "T: slots per policy update (paper 5e4)")
	fs.IntVar(&f.cfg.Minibatch, "minibatch", f.cfg.Minibatch, "mini-batch size (paper 1e4)")
	fs.IntVar(&f.cfg.Epochs, "epochs", f.cfg.Epochs, "epochs per update (paper 5)")
	fs.Float64Var(&f.cfg.LR, "lr", f.cfg.LR, "Adam learning rate (paper 2.5e-4)")
	fs.Float64Var(&f.cfg.Sigma, "sigma", f.cfg.Sigma, "exploration noise sigma of eq. 8 (paper 0.698)")
	fs.Float64Var(&f.cfg.MaxGradNorm, "max-grad-norm", f.cfg.MaxGradNorm, "clip each network's gradient norm (0: off)")
	fs.Float64Var(&f.cfg.RewardScale, "reward-scale", f.cfg.RewardScale, "reward multiplier (0: (1-gamma)/mean arrivals per slot)")
	fs.Float64Var(&f.cfg.ArrivalBaseline, "arrival-baseline", f.cfg.ArrivalBaseline, "learn on r - c*arrivals (policy-invariant variance reduction; 0: paper's eq. 2)")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if f.out == "" {
		return fmt.Errorf("%w: --out is required", errUsage)
	}
	if f.steps < 1 {
		return fmt.Errorf("%w: --steps = %d must be >= 1", errUsage, f.steps)
	}
	if f.workers < 1 {
		return fmt.Errorf("%w: --workers = %d must be >= 1", errUsage, f.workers)
	}
	if f.cfg.Rollout%f.workers != 0 {
		return fmt.Errorf("%w: --rollout = %d must be a multiple of --workers = %d", errUsage, f.cfg.Rollout, f.workers)
	}
	if f.evalEvery < 0 || f.evalSlots < 1 || f.ckptEvery < 1 {
		return fmt.Errorf("%w: --eval-every = %d, --eval-slots = %d, --checkpoint-every = %d out of range", errUsage, f.evalEvery, f.evalSlots, f.ckptEvery)
	}
	f.cfg.FullObs = f.fullObs
	if err := f.cfg.Validate(); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	f.commandStr = "idn experiment rl train " + strings.Join(args, " ")
	return trainRL(ctx, f, stdout, stderr)
}

func trainRL(ctx context.Context, f trainFlags, stdout, stderr io.Writer) error {
	icfg := instances.DefaultConfig()
	w0, err := newWorkload(f.workload)
	if err != nil {
		return err
	}
	obsSize := instances.ObsSize(len(icfg.Instances), icfg.Capacity, w0.Phases(), f.fullObs)
	var agent *rl.Agent
	if f.resume != "" {
		fh, err := os.Open(f.resume)
		if err != nil {
			return fmt.Errorf("--resume: %w", err)
		}
		agent, _, err = rl.ReadCheckpoint(fh)
		fh.Close()
		if err != nil {
			return fmt.Errorf("--resume %s: %w", f.resume, err)
		}
		if agent.Actor.In() != obsSize || agent.Cfg.FullObs != f.fullObs {
			return fmt.Errorf("%w: --resume %s: observation size %d (fo=%v) does not match %d (fo=%v)", errUsage, f.resume, agent.Actor.In(), agent.Cfg.FullObs, obsSize, f.fullObs)
		}
		// training settings come from the flags
		agent.Cfg = f.cfg
	} else {
		agent, err = rl.NewAgent(f.cfg, obsSize, len(icfg.Instances), w0.MeanRate()*icfg.Slot, f.seed)
		if err != nil {
			return err
		}
	}
	W := f.workers
	systems := make([]*instances.System, W)
	for i := range systems {
		w, _ := newWorkload(f.workload)
		systems[i], err = instances.New(icfg, w, sim.SplitSeed(f.seed, uint64(100+i)+uint64(agent.Updates)*1000))
		if err != nil {
			return err
		}
	}
	noise := sim.NewRand(sim.SplitSeed(f.seed, 7))
	shuffle := sim.NewRand(sim.SplitSeed(f.seed, 8))
	per := agent.Cfg.Rollout / W
	batches := make([]*rl.Batch, W)
	for i := range batches {
		batches[i] = rl.NewBatch(per, obsSize, len(icfg.Instances))
	}
	scratch := make([]*rl.Scratch, W)
	gAs := make([][]float64, W)
	gCs := make([][]float64, W)
	for i := range scratch {
		scratch[i] = agent.NewScratch()
		gAs[i] = make([]float64, len(agent.Actor.P))
		gCs[i] = make([]float64, len(agent.Critic.P))
	}
	parGrad := func(b *rl.Batch, idx []int, gA, gC []float64) rl.GradStats {
		var wg sync.WaitGroup
		stats := make([]rl.GradStats, W)
		chunk := (len(idx) + W - 1) / W
		for i := 0; i < W; i++ {
			lo, hi := i*chunk, min((i+1)*chunk, len(idx))
			clear(gAs[i])
			clear(gCs[i])
			if lo >= hi {
				continue
			}
			wg.Add(1)
			go func(i, lo, hi int) {
				defer wg.Done()
				stats[i] = agent.Gradient(b, idx[lo:hi], float64(len(idx)), gAs[i], gCs[i], scratch[i])
			}(i, lo, hi)
		}
		wg.Wait()
		var st rl.GradStats
		for i := 0; i < W; i++ { // fixed order: deterministic sums
			for j, x := range gAs[i] {
				gA[j] += x
			}
			for j, x := range gCs[i] {
				gC[j] += x
			}
			st.Add(stats[i])
		}
		return st
	}
	start := time.Now()
	meta := rl.CheckpointMeta{Instances: icfg, Workload: f.workload, Seed: f.seed, Command: f.commandStr}
	save := func() error {
		meta.WallSeconds = time.Since(start).Seconds()
		return writeCheckpointFile(f.out, agent, meta)
	}
	fmt.Fprintf(stderr, "rl train: workload=%s fo=%v obs=%d workers=%d T=%d minibatch=%d epochs=%d lr=%g sigma=%g reward_scale=%.3g arrival_baseline=%g steps=%d\n",
		f.workload, f.fullObs, obsSize, W, agent.Cfg.Rollout, agent.Cfg.Minibatch, agent.Cfg.Epochs, agent.Cfg.LR, agent.Cfg.Sigma, agent.RewardScale, agent.Cfg.ArrivalBaseline, f.steps)
	target := agent.Steps + f.steps
	for agent.Steps < target {
		if err := ctx.Err(); err != nil {
			fmt.Fprintln(stderr, "rl train: interrupted; saving")
			break
		}
		if f.timeLimit > 0 && time.Since(start) > f.timeLimit {
			fmt.Fprintln(stderr, "rl train: time limit reached; saving")
			break
		}
		t0 := time.Now()
		// Rollouts in parallel: each worker owns its system, batch and noise
		// source (seeded from the shared stream before the goroutines start).
		seeds := make([]uint64, W)
		for i := range seeds {
			seeds[i] = noise.Uint64()
		}
		var wg sync.WaitGroup
		for i := 0; i < W; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				agent.Rollout(systems[i], sim.NewRand(seeds[i]), batches[i])
			}(i)
		}
		wg.Wait()
		b := rl.Merge(batches)
		tRoll := time.Since(t0)
		roll := rolloutSummary(b)
		us := agent.Update(b, shuffle, parGrad)
		agent.Steps += int64(b.T)
		ns := float64(max(us.Samples, 1))
		fmt.Fprintf(stderr, "update %d steps %d elapsed %s rollout %.1fs update %.1fs | reward/slot %.3f hw[bursty] %.3f hw[normal] %.3f | pi_loss %.4f v_loss %.4g kl %.4f clip %.3f\n",
			agent.Updates, agent.Steps, time.Since(start).Round(time.Second), tRoll.Seconds(), (time.Since(t0) - tRoll).Seconds(),
			roll.reward, roll.hw[0], roll.hw[1], us.PolicyLoss/ns, us.ValueLoss/ns, us.ApproxKL/ns, us.ClipFrac/ns)
		if f.evalEvery > 0 && agent.Updates%int64(f.evalEvery) == 0 {
			m, err := evalAgentParallel(agent, f.workload, icfg, f.evalSlots, sim.SplitSeed(f.seed, 99), W)
			if err != nil {
				return err
			}
			fmt.Fprintf(stderr, "eval update %d steps %d: %s\n", agent.Updates, agent.Steps, metricsLine(m))
		}
		if agent.Updates%int64(f.ckptEvery) == 0 {
			if err := save(); err != nil {
				return err
			}
		}
	}
	if err := save(); err != nil {
		return err
	}
	m, err := evalAgentParallel(agent, f.workload, icfg, f.evalSlots, sim.SplitSeed(f.seed, 99), W)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "trained %d slots in %d updates, %s wall; wrote %s\nfinal eval (%d slots, sigma=0): %s\n",
		agent.Steps, agent.Updates, time.Since(start).Round(time.Second), f.out, f.evalSlots, metricsLine(m))
	return nil
}

type rollSum struct {
	reward float64
	hw     [2]float64
}

// rolloutSummary averages the raw reward and the heavyweight routing mass per
// phase over a batch (phases beyond the second are ignored).
func rolloutSummary(b *rl.Batch) rollSum {
	var s rollSum
	var cnt [2]float64
	for t := 0; t < b.T; t++ {
		s.reward += b.RawRew[t]
		if p := b.Phase[t]; p < 2 {
			s.hw[p] += b.Heavy[t]
			cnt[p]++
		}
	}
	s.reward /= float64(b.T)
	for p := range cnt {
		if cnt[p] > 0 {
			s.hw[p] /= cnt[p]
		}
	}
	return s
}

func metricsLine(m instances.Metrics) string {
	t := m.Total()
	s := fmt.Sprintf("goodput %.2f%% VR %.3f%% HWSR %.1f%%", 100*t.GoodputRatio(), 100*t.ViolationRatio(), 100*t.HeavyRatio())
	names := []string{"bursty", "normal"}
	for p, pm := range m.Phase {
		if p < len(names) {
			s += fmt.Sprintf(" | %s: goodput %.2f%% VR %.3f%% HWSR %.1f%%", names[p], 100*pm.GoodputRatio(), 100*pm.ViolationRatio(), 100*pm.HeavyRatio())
		}
	}
	return s
}

// evalAgentParallel evaluates the agent deterministically over slots slots
// split across W systems with independent seeds, and sums the metrics.
func evalAgentParallel(agent *rl.Agent, workload string, icfg instances.Config, slots int, seed uint64, W int) (instances.Metrics, error) {
	W = max(1, min(W, slots))
	ms := make([]instances.Metrics, W)
	errs := make([]error, W)
	var wg sync.WaitGroup
	for i := 0; i < W; i++ {
		n := slots / W
		if i < slots%W {
			n++
		}
		wg.Add(1)
		go func(i, n int) {
			defer wg.Done()
			w, err := newWorkload(workload)
			if err != nil {
				errs[i] = err
				return
			}
			sys, err := instances.New(icfg, w, sim.SplitSeed(seed, uint64(i)))
			if err != nil {
				errs[i] = err
				return
			}
			ms[i] = rl.Run(sys, rl.NewPolicy("RL", agent), float64(n)*icfg.Slot)
		}(i, n)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return instances.Metrics{}, err
	}
	return sumMetrics(ms), nil
}

func sumMetrics(ms []instances.Metrics) instances.Metrics {
	out := instances.Metrics{Phase: make([]instances.PhaseMetrics, len(ms[0].Phase))}
	for _, m := range ms {
		for p := range m.Phase {
			out.Phase[p].Add(m.Phase[p])
		}
		out.Duration += m.Duration
	}
	return out
}

func writeCheckpointFile(path string, a *rl.Agent, meta rl.CheckpointMeta) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".ckpt-*")
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if err := rl.WriteCheckpoint(tmp, a, meta); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return nil
}

func readCheckpointFile(path string) (*rl.Agent, rl.CheckpointMeta, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, rl.CheckpointMeta{}, err
	}
	defer fh.Close()
	a, m, err := rl.ReadCheckpoint(fh)
	if err != nil {
		return nil, m, fmt.Errorf("%s: %w", path, err)
	}
	return a, m, nil
}

// evalRow is one line of the Table 2 reproduction.
type evalRow struct {
	Approach string                   `json:"approach"`
	Overall  evalCols                 `json:"overall"`
	States   map[string]evalStateCols `json:"states"`
}

type evalCols struct {
	Ratio float64 `json:"goodput_ratio_pct"`
	Rate  float64 `json:"goodput_rate_rps"`
	VR    float64 `json:"violation_ratio_pct"`
	HWSR  float64 `json:"hwsr_pct"`
}

type evalStateCols struct {
	Ratio  float64 `json:"goodput_ratio_pct"`
	VR     float64 `json:"violation_ratio_pct"`
	Reject float64 `json:"reject_pct"`
	Delay  float64 `json:"delay_pct"`
	HWSR   float64 `json:"hwsr_pct"`
}

func makeRow(name string, m instances.Metrics) evalRow {
	t := m.Total()
	r := evalRow{Approach: name, Overall: evalCols{Ratio: 100 * t.GoodputRatio(), Rate: t.Goodput / m.Duration, VR: 100 * t.ViolationRatio(), HWSR: 100 * t.HeavyRatio()},
		States: map[string]evalStateCols{}}
	names := []string{"bursty", "normal"}
	for p, pm := range m.Phase {
		name := fmt.Sprintf("phase%d", p)
		if p < len(names) {
			name = names[p]
		}
		r.States[name] = evalStateCols{Ratio: 100 * pm.GoodputRatio(), VR: 100 * pm.ViolationRatio(), Reject: 100 * pm.RejectRatio(), Delay: 100 * pm.DelayRatio(), HWSR: 100 * pm.HeavyRatio()}
	}
	return r
}

func runRLEval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("idn experiment rl eval", "idn experiment rl eval --policy FILE [--fo-policy FILE] [--json] [flags]", stderr)
	policy := fs.String("policy", "", "RL-PO checkpoint (from rl train); empty: baselines only")
	foPolicy := fs.String("fo-policy", "", "RL-FO checkpoint (trained with --fo); optional")
	workload := fs.String("workload", "spp", "arrival process: spp or periodic")
	slots := fs.Int("slots", 600000, "evaluation length in slots of tau = 1 s (paper: 0.6 million)")
	seed := fs.Uint64("seed", 2, "random seed (independent of training seeds)")
	workers := fs.Int("workers", runtime.NumCPU(), "approaches evaluated in parallel")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if *slots < 1 {
		return fmt.Errorf("%w: --slots = %d must be >= 1", errUsage, *slots)
	}
	if *workers < 1 {
		return fmt.Errorf("%w: --workers = %d must be >= 1", errUsage, *workers)
	}
	if _, err := newWorkload(*workload); err != nil {
		return err
	}
	icfg := instances.DefaultConfig()
	type job struct {
		name string
		cfg  instances.Config
		mk   func() (rl.Scheduler, error)
		sq   bool
	}
	n := len(icfg.Instances)
	lw, hw, hwe := icfg, icfg, icfg
	lw.Instances = []instances.Model{instances.Lightweight(), instances.Lightweight(), instances.Lightweight(), instances.Lightweight()}
	hw.Instances = []instances.Model{instances.Heavyweight(), instances.Heavyweight(), instances.Heavyweight(), instances.Heavyweight()}
	hwe.Instances = hw.Instances
	hwe.EagerReject = true
	fixed := func(label string) func() (rl.Scheduler, error) {
		return func() (rl.Scheduler, error) { return &rl.Fixed{Label: label, Weights: rl.Uniform(n)}, nil }
	}
	jobs := []job{
		{name: "LW", cfg: lw, mk: fixed("LW")},
		{name: "HW", cfg: hw, mk: fixed("HW")},
		{name: "HW-E", cfg: hwe, mk: fixed("HW-E")},
	}
	loadPolicy := func(label, path string, fo bool) (job, error) {
		a, meta, err := readCheckpointFile(path)
		if err != nil {
			return job{}, err
		}
		if a.Cfg.FullObs != fo {
			return job{}, fmt.Errorf("%w: %s: checkpoint full observability = %v, want %v for %s", errUsage, path, a.Cfg.FullObs, fo, label)
		}
		w, _ := newWorkload(*workload)
		if want := instances.ObsSize(n, icfg.Capacity, w.Phases(), fo); a.Actor.In() != want {
			return job{}, fmt.Errorf("%w: %s: observation size %d, want %d", errUsage, path, a.Actor.In(), want)
		}
		fmt.Fprintf(stderr, "%s: %s (%d training slots, %d updates, workload %s)\n", label, path, meta.Steps, meta.Updates, meta.Workload)
		return job{name: label, cfg: icfg, mk: func() (rl.Scheduler, error) { return rl.NewPolicy(label, a), nil }}, nil
	}
	if *policy != "" {
		j, err := loadPolicy("RL-PO", *policy, false)
		if err != nil {
			return err
		}
		jobs = append(jobs, j)
	}
	if *foPolicy != "" {
		j, err := loadPolicy("RL-FO", *foPolicy, true)
		if err != nil {
			return err
		}
		jobs = append(jobs, j)
	}
	jobs = append(jobs,
		job{name: "SQ", cfg: icfg, sq: true},
		job{name: "SA", cfg: icfg, mk: func() (rl.Scheduler, error) {
			w, _ := newWorkload(*workload)
			return rl.StationaryApprox(icfg, w, 0.02)
		}},
		job{name: "InFaaS", cfg: icfg, mk: func() (rl.Scheduler, error) { return &rl.InFaaS{Period: 0.1}, nil }},
	)
	rows := make([]evalRow, len(jobs))
	errs := make([]error, len(jobs))
	sem := make(chan struct{}, *workers)
	var wg sync.WaitGroup
	var logMu sync.Mutex // serialises the progress lines on stderr
	start := time.Now()
	for i, j := range jobs {
		wg.Add(1)
		go func(i int, j job) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if ctx.Err() != nil {
				errs[i] = ctx.Err()
				return
			}
			w, _ := newWorkload(*workload)
			// every approach sees the same workload seed
			dur := float64(*slots) * j.cfg.Slot
			var m instances.Metrics
			if j.sq {
				s, err := instances.NewSingleQueue(j.cfg, w, *seed)
				if err != nil {
					errs[i] = err
					return
				}
				s.Run(dur)
				m = s.Metrics()
			} else {
				sched, err := j.mk()
				if err != nil {
					errs[i] = fmt.Errorf("%s: %w", j.name, err)
					return
				}
				sys, err := instances.New(j.cfg, w, *seed)
				if err != nil {
					errs[i] = err
					return
				}
				m = rl.Run(sys, sched, dur)
			}
			rows[i] = makeRow(j.name, m)
			logMu.Lock()
			fmt.Fprintf(stderr, "  %s done (%s)\n", j.name, time.Since(start).Round(time.Millisecond))
			logMu.Unlock()
		}(i, j)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"workload": *workload, "slots": *slots, "seed": *seed, "rows": rows})
	}
	fmt.Fprintf(stdout, "Table 2 (paper 002) reproduction: workload %s, %d slots, seed %d, P98 %.0f ms\n", *workload, *slots, *seed, 1000*icfg.Deadline)
	fmt.Fprintf(stdout, "%-8s | %7s %7s %7s | %7s %7s %7s %7s %7s | %7s %7s %7s %7s %7s\n",
		"", "Overall", "", "", "Bursty", "", "", "", "", "Normal", "", "", "", "")
	fmt.Fprintf(stdout, "%-8s | %7s %7s %7s | %7s %7s %7s %7s %7s | %7s %7s %7s %7s %7s\n",
		"Approach", "Ratio%", "RateRPS", "VR%", "Ratio%", "VR%", "Rej%", "Delay%", "HWSR%", "Ratio%", "VR%", "Rej%", "Delay%", "HWSR%")
	for _, r := range rows {
		b, nn := r.States["bursty"], r.States["normal"]
		hwsr := func(v float64) string {
			if r.Approach == "LW" || r.Approach == "HW" || r.Approach == "HW-E" {
				return "-"
			}
			return fmt.Sprintf("%.2f", v)
		}
		fmt.Fprintf(stdout, "%-8s | %7.2f %7.3f %7.3f | %7.2f %7.3f %7.3f %7.3f %7s | %7.2f %7.3f %7.3f %7.3f %7s\n",
			r.Approach, r.Overall.Ratio, r.Overall.Rate, r.Overall.VR,
			b.Ratio, b.VR, b.Reject, b.Delay, hwsr(b.HWSR),
			nn.Ratio, nn.VR, nn.Reject, nn.Delay, hwsr(nn.HWSR))
	}
	return nil
}
