package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idn-net/idn/policy/flex"
	"github.com/idn-net/idn/policy/sim/gpucluster"
)

func init() {
	registerExperiment(&command{
		name:    "shepherd",
		summary: "paper 004 (SHEPHERD): FLEX/HERD vs Clockwork-like and Nexus-like on emulated GPU workers",
		run:     runShepherd,
	})
}

// shepherdRow is one line of the experiment's output.
type shepherdRow struct {
	Figure      string  `json:"figure"`
	Workload    string  `json:"workload"`
	Scheme      string  `json:"scheme"`
	Workers     int     `json:"workers"`
	GroupLimit  string  `json:"group_limit"`
	Groups      int     `json:"groups"`
	SLOms       float64 `json:"slo_ms"`
	OfferedRate float64 `json:"offered_per_s"`
	Goodput     float64 `json:"goodput_per_s"`
	Utilization float64 `json:"utilization"`
	DropRate    float64 `json:"drop_rate"`
	Late        int     `json:"late"`
	Preemptions int     `json:"preemptions"`
	MeanBatch   float64 `json:"mean_batch"`
	MeanLatency float64 `json:"mean_latency_ms"`
	MinBT       float64 `json:"herd_min_bt,omitempty"`
	PlanMs      float64 `json:"herd_plan_ms,omitempty"`
	SchedLagMs  float64 `json:"sched_lag_ms,omitempty"`
}

type shepherdOpts struct {
	figure, trace, workloads, models string
	schemes                          []gpucluster.Scheme
	workers, streams, gbar           int
	load, slo, duration              float64
	costBase, costPerGPU             float64
	seed                             uint64
	json                             bool
	workersSet, loadSet, sloSet      bool
}

func runShepherd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("shepherd", "idn experiment shepherd --figure 7|9|10|11a|11b|2 [flags] | --trace FILE --workers N [--schemes ...]", stderr)
	var o shepherdOpts
	var schemes string
	fs.StringVar(&o.figure, "figure", "", "paper 004 figure to reproduce: 7 (load sweep), 9 (SLO sweep), 10 (worker scaling), 11a (two-stream case), 11b (group-worker limit), 2 (CV vs window of the synthetic MAF stand-in)")
	fs.StringVar(&o.trace, "trace", "", "replay a request trace CSV (header: arrival_ms,stream,model,slo_ms) instead of a figure")
	fs.StringVar(&schemes, "schemes", "", "comma-separated schemes among flex,flex-np,clockwork,nexus (default: the figure's)")
	fs.IntVar(&o.workers, "workers", 12, "emulated GPU workers (figures 7, 9, 11a, trace; figure 10/11b: the largest N of the sweep)")
	fs.Float64Var(&o.load, "load", 0, "offered load in requests/s (figure 7: a single load instead of the sweep; figure 10/11b: per 12 workers)")
	fs.Float64Var(&o.slo, "slo", 250, "request SLO in ms (figure 9: a single SLO instead of the sweep; 11a: a single SLO instead of 90 and 250)")
	fs.Float64Var(&o.duration, "duration", 10000, "simulated arrival window in ms")
	fs.IntVar(&o.streams, "streams", 1000, "request streams of the synthetic MAF workload (figure 10/11b: per 12 workers)")
	fs.IntVar(&o.gbar, "gbar", 12, "HERD group-worker limit G-bar for flex/flex-np (0 = one group)")
	fs.StringVar(&o.workloads, "workload", "stable,bursty", "synthetic MAF workloads: stable (Poisson), bursty (MMPP), or both")
	fs.StringVar(&o.models, "models", "maf13", "models of the MAF workload: maf13 (the first 13 rows of Table 4, RN18..DN201), all (all 17 rows incl. BERT), or a comma-separated list of names")
	fs.Float64Var(&o.costBase, "sched-cost-base-us", 0, "scheduler time per event (us), for the scheduler-bottleneck model")
	fs.Float64Var(&o.costPerGPU, "sched-cost-per-gpu-us", 0, "scheduler time per event per GPU of its group (us)")
	fs.Uint64Var(&o.seed, "seed", 1, "random seed")
	fs.BoolVar(&o.json, "json", false, "print JSON instead of a table")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "workers":
			o.workersSet = true
		case "load":
			o.loadSet = true
		case "slo":
			o.sloSet = true
		}
	})
	if (o.figure == "") == (o.trace == "") {
		return fmt.Errorf("%w: shepherd: give exactly one of --figure or --trace", errUsage)
	}
	if o.workers <= 0 {
		return fmt.Errorf("%w: shepherd: --workers = %d must be positive", errUsage, o.workers)
	}
	if o.loadSet && !(o.load > 0) {
		return fmt.Errorf("%w: shepherd: --load = %v must be positive", errUsage, o.load)
	}
	if !(o.slo > 0) {
		return fmt.Errorf("%w: shepherd: --slo = %v must be positive", errUsage, o.slo)
	}
	if !(o.duration > 0) {
		return fmt.Errorf("%w: shepherd: --duration = %v must be positive", errUsage, o.duration)
	}
	if o.streams <= 0 || o.gbar < 0 || o.costBase < 0 || o.costPerGPU < 0 {
		return fmt.Errorf("%w: shepherd: --streams = %d must be positive, --gbar = %d and scheduler costs must be >= 0", errUsage, o.streams, o.gbar)
	}
	if schemes != "" {
		for _, s := range strings.Split(schemes, ",") {
			sc, err := gpucluster.ParseScheme(strings.TrimSpace(s))
			if err != nil {
				return fmt.Errorf("%w: shepherd: --schemes: %w", errUsage, err)
			}
			o.schemes = append(o.schemes, sc)
		}
	}
	var rows []shepherdRow
	var err error
	if o.trace != "" {
		rows, err = shepherdTrace(ctx, o, stderr)
	} else {
		switch o.figure {
		case "7", "9", "10", "11b":
			rows, err = shepherdMAF(ctx, o, stderr)
		case "11a":
			rows, err = shepherdTwoStream(ctx, o, stderr)
		case "2":
			return shepherdCV(o, stdout)
		default:
			return fmt.Errorf("%w: shepherd: --figure = %q, want 7, 9, 10, 11a, 11b or 2", errUsage, o.figure)
		}
	}
	if err != nil {
		return err
	}
	return printShepherd(stdout, rows, o.json)
}

func (o shepherdOpts) schemesOr(def ...gpucluster.Scheme) []gpucluster.Scheme {
	if len(o.schemes) > 0 {
		return o.schemes
	}
	return def
}

func (o shepherdOpts) catalog() ([]flex.Model, []int, error) {
	all := gpucluster.Table4()
	if o.models == "all" || o.models == "maf13" {
		n := len(all)
		if o.models == "maf13" {
			n = 13
		}
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		return all, idx, nil
	}
	var idx []int
	for _, n := range strings.Split(o.models, ",") {
		i, err := gpucluster.ModelIndex(all, strings.TrimSpace(n))
		if err != nil {
			return nil, nil, fmt.Errorf("%w: shepherd: --models: %w", errUsage, err)
		}
		idx = append(idx, i)
	}
	return all, idx, nil
}

func (o shepherdOpts) clusterConfig(models []flex.Model, scheme gpucluster.Scheme, workers, gbar int) gpucluster.Config {
	c := gpucluster.DefaultConfig()
	c.Models = models
	c.Scheme = scheme
	c.Workers = workers
	c.GroupLimit = gbar
	c.SchedCostBase = o.costBase / 1000
	c.SchedCostPerGPU = o.costPerGPU / 1000
	return c
}

func runOne(ctx context.Context, stderr io.Writer, fig string, cfg gpucluster.Config, wl *gpucluster.Workload, slo float64) (shepherdRow, error) {
	if err := ctx.Err(); err != nil {
		return shepherdRow{}, err
	}
	gl := "inf"
	if cfg.GroupLimit > 0 {
		gl = strconv.Itoa(cfg.GroupLimit)
	}
	if cfg.Scheme == gpucluster.Clockwork || cfg.Scheme == gpucluster.Nexus {
		gl = "-"
	}
	fmt.Fprintf(stderr, "shepherd: figure %s %s %s workers=%d gbar=%s slo=%g ...", fig, wl.Name, cfg.Scheme, cfg.Workers, gl, slo)
	start := time.Now()
	row := shepherdRow{Figure: fig, Workload: wl.Name, Scheme: string(cfg.Scheme), Workers: cfg.Workers, GroupLimit: gl, SLOms: slo}
	if cfg.Scheme == gpucluster.FLEX || cfg.Scheme == gpucluster.FLEXNP {
		t0 := time.Now()
		if _, _, err := gpucluster.PlanGroups(cfg, wl); err != nil {
			return row, err
		}
		row.PlanMs = float64(time.Since(t0).Microseconds()) / 1000
	}
	r, err := gpucluster.Run(cfg, wl)
	if err != nil {
		return row, err
	}
	fmt.Fprintf(stderr, " %.1fs\n", time.Since(start).Seconds())
	row.Groups = r.Groups
	row.OfferedRate = r.OfferedRate
	row.Goodput = r.Goodput
	row.Utilization = r.Utilization
	row.DropRate = r.DropRate
	row.Late = r.Late
	row.Preemptions = r.Preemptions
	row.MeanBatch = r.MeanBatch
	row.MeanLatency = r.MeanLatency
	row.SchedLagMs = r.SchedLag
	if !math.IsNaN(r.MinBT) {
		row.MinBT = r.MinBT
	}
	return row, nil
}

func (o shepherdOpts) mafWorkloads(models []int, nModels int, load, slo float64, streams int) ([]*gpucluster.Workload, error) {
	var out []*gpucluster.Workload
	for _, w := range strings.Split(o.workloads, ",") {
		c := gpucluster.DefaultMAFConfig()
		c.Models = models
		c.Load = load
		c.SLO = slo
		c.Streams = streams
		c.Duration = o.duration
		c.Seed = o.seed
		switch strings.TrimSpace(w) {
		case "stable":
		case "bursty":
			c.Bursty = true
		default:
			return nil, fmt.Errorf("%w: shepherd: --workload %q, want stable and/or bursty", errUsage, w)
		}
		wl, err := gpucluster.MAF(c, nModels)
		if err != nil {
			return nil, fmt.Errorf("%w: shepherd: %w", errUsage, err)
		}
		out = append(out, wl)
	}
	return out, nil
}

func shepherdMAF(ctx context.Context, o shepherdOpts, stderr io.Writer) ([]shepherdRow, error) {
	models, idx, err := o.catalog()
	if err != nil {
		return nil, err
	}
	var rows []shepherdRow
	add := func(fig string, cfg gpucluster.Config, wl *gpucluster.Workload, slo float64) error {
		r, err := runOne(ctx, stderr, fig, cfg, wl, slo)
		if err != nil {
			return err
		}
		rows = append(rows, r)
		return nil
	}
	switch o.figure {
	case "7":
		loads := []float64{3000, 6000, 12000, 24000, 48000, 96000, 144000}
		if o.loadSet {
			loads = []float64{o.load}
		}
		for _, load := range loads {
			wls, err := o.mafWorkloads(idx, len(models), load, o.slo, o.streams)
			if err != nil {
				return nil, err
			}
			for _, wl := range wls {
				for _, s := range o.schemesOr(gpucluster.FLEX, gpucluster.Clockwork, gpucluster.Nexus) {
					if err := add("7", o.clusterConfig(models, s, o.workers, o.gbar), wl, o.slo); err != nil {
						return nil, err
					}
				}
			}
		}
	case "9":
		slos := []float64{50, 100, 150, 200, 250, 300, 400, 500}
		if o.sloSet {
			slos = []float64{o.slo}
		}
		load := 3000.0
		if o.loadSet {
			load = o.load
		}
		for _, slo := range slos {
			wls, err := o.mafWorkloads(idx, len(models), load, slo, o.streams)
			if err != nil {
				return nil, err
			}
			for _, wl := range wls {
				for _, s := range o.schemesOr(gpucluster.FLEX, gpucluster.Clockwork, gpucluster.Nexus) {
					if err := add("9", o.clusterConfig(models, s, o.workers, o.gbar), wl, slo); err != nil {
						return nil, err
					}
				}
			}
		}
	case "10", "11b":
		maxN := 800
		if o.workersSet {
			maxN = o.workers
		}
		var ns []int
		for _, n := range []int{12, 48, 100, 200, 300, 400, 600, 800, 1200, 1600} {
			if n <= maxN {
				ns = append(ns, n)
			}
		}
		if len(ns) == 0 || ns[len(ns)-1] != maxN {
			ns = append(ns, maxN)
		}
		perWorker := 3000.0 / 12
		if o.loadSet {
			perWorker = o.load / 12
		}
		for _, n := range ns {
			streams := int(math.Ceil(float64(o.streams) * float64(n) / 12))
			wls, err := o.mafWorkloads(idx, len(models), perWorker*float64(n), o.slo, streams)
			if err != nil {
				return nil, err
			}
			for _, wl := range wls {
				if o.figure == "10" {
					for _, s := range o.schemesOr(gpucluster.FLEX, gpucluster.Clockwork, gpucluster.Nexus) {
						if err := add("10", o.clusterConfig(models, s, n, o.gbar), wl, o.slo); err != nil {
							return nil, err
						}
					}
					continue
				}
				for _, gb := range []int{1, 12, 0} {
					for _, s := range o.schemesOr(gpucluster.FLEX) {
						if err := add("11b", o.clusterConfig(models, s, n, gb), wl, o.slo); err != nil {
							return nil, err
						}
					}
				}
			}
		}
	}
	return rows, nil
}

func shepherdTwoStream(ctx context.Context, o shepherdOpts, stderr io.Writer) ([]shepherdRow, error) {
	slos := []float64{90, 250}
	if o.sloSet {
		slos = []float64{o.slo}
	}
	models := gpucluster.Table4()
	var rows []shepherdRow
	for _, slo := range slos {
		c := gpucluster.DefaultTwoStreamConfig()
		c.SLO = slo
		c.Duration = o.duration
		wl, err := gpucluster.TwoStream(c)
		if err != nil {
			return nil, fmt.Errorf("%w: shepherd: %w", errUsage, err)
		}
		for _, s := range o.schemesOr(gpucluster.FLEX, gpucluster.FLEXNP, gpucluster.Clockwork, gpucluster.Nexus) {
			w := 1
			if o.workersSet {
				w = o.workers
			}
			r, err := runOne(ctx, stderr, "11a", o.clusterConfig(models, s, w, o.gbar), wl, slo)
			if err != nil {
				return nil, err
			}
			rows = append(rows, r)
		}
	}
	return rows, nil
}

func shepherdTrace(ctx context.Context, o shepherdOpts, stderr io.Writer) ([]shepherdRow, error) {
	f, err := os.Open(o.trace)
	if err != nil {
		return nil, fmt.Errorf("%w: shepherd: --trace: %w", errUsage, err)
	}
	defer f.Close()
	models := gpucluster.Table4()
	names := make([]string, len(models))
	for i, m := range models {
		names[i] = m.Name
	}
	wl, err := gpucluster.ReadTrace(f, names)
	if err != nil {
		return nil, fmt.Errorf("%w: shepherd: --trace %s: %w", errUsage, o.trace, err)
	}
	var rows []shepherdRow
	for _, s := range o.schemesOr(gpucluster.FLEX, gpucluster.FLEXNP, gpucluster.Clockwork, gpucluster.Nexus) {
		r, err := runOne(ctx, stderr, "trace", o.clusterConfig(models, s, o.workers, o.gbar), wl, math.NaN())
		if err != nil {
			return nil, err
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func shepherdCV(o shepherdOpts, stdout io.Writer) error {
	c := gpucluster.DefaultMAFConfig()
	c.Streams = 200
	c.Load = 20
	c.Duration = 12 * 3600 * 1000
	c.Seed = o.seed
	taus := []float64{1, 2, 5, 10, 30, 60}
	ms := make([]float64, len(taus))
	for i, t := range taus {
		ms[i] = t * 60000
	}
	var out []map[string]any
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	if !o.json {
		fmt.Fprintln(tw, "workload\ttau_min\tmean_CV\t")
	}
	for _, bursty := range []bool{false, true} {
		c.Bursty = bursty
		wl, err := gpucluster.MAF(c, len(gpucluster.Table4()))
		if err != nil {
			return err
		}
		cv := gpucluster.WindowCV(wl, ms)
		for i, t := range taus {
			if o.json {
				out = append(out, map[string]any{"workload": wl.Name, "tau_min": t, "mean_cv": cv[i]})
			} else {
				fmt.Fprintf(tw, "%s\t%g\t%.3f\t\n", wl.Name, t, cv[i])
			}
		}
	}
	if o.json {
		return json.NewEncoder(stdout).Encode(out)
	}
	return tw.Flush()
}

func printShepherd(w io.Writer, rows []shepherdRow, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	if len(rows) == 0 {
		return errors.New("shepherd: no results")
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "fig\tworkload\tscheme\tworkers\tgbar\tgroups\tslo_ms\toffered/s\tgoodput/s\tutil\tdrop\tlate\tpreempt\tmean_batch\tmean_lat_ms\tmin_bt\tplan_ms\t")
	for _, r := range rows {
		bt, pm := "-", "-"
		if r.MinBT > 0 {
			bt = fmt.Sprintf("%.2f", r.MinBT)
			pm = fmt.Sprintf("%.2f", r.PlanMs)
		}
		slo := "-"
		if !math.IsNaN(r.SLOms) {
			slo = fmt.Sprintf("%g", r.SLOms)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%s\t%.0f\t%.0f\t%.3f\t%.3f\t%d\t%d\t%.1f\t%.1f\t%s\t%s\t\n",
			r.Figure, r.Workload, r.Scheme, r.Workers, r.GroupLimit, r.Groups, slo, r.OfferedRate, r.Goodput,
			r.Utilization, r.DropRate, r.Late, r.Preemptions, r.MeanBatch, r.MeanLatency, bt, pm)
	}
	return tw.Flush()
}
