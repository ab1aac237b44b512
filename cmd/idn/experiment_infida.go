package main

// idn experiment infida: paper 000 (INFIDA) on the policy/sim/slot
// simulator. One point (--topology, --profile, --rate, --alpha, ...) for a
// list of policies, or the sweep behind one of the paper's figures
// (--figure 6|7a|7b|8|9a|9b|10). Runs are sequential and deterministic in
// the flags (--seed).

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/idn-net/idn/policy/idn"
	"github.com/idn-net/idn/policy/infida"
	"github.com/idn-net/idn/policy/sim/slot"
)

func init() {
	registerExperiment(&command{
		name:    "infida",
		summary: "paper 000: INFIDA, OLAG, SG, INFIDA_OFFLINE on the slot simulator (NTAG, MU, latency, inaccuracy; --figure 6|7a|7b|8|9a|9b|10)",
		run:     runExperimentInfida,
	})
}

// infidaFlags holds the parsed flags.
type infidaFlags struct {
	topology, catalog, profile, policies, figure string
	rate, alpha, eta                             float64
	slots, stretch, offlineEpochs, sgSlots       int
	rounds, entries                              int
	refresh, refreshInit                         float64
	residual, olag, sgStop                       string
	seed                                         uint64
	json, expected                               bool
	csvPath, seriesPath                          string
}

// infidaRow is one (setting, policy) result.
type infidaRow struct {
	Figure     string    `json:"figure,omitempty"`
	Topology   string    `json:"topology"`
	Profile    string    `json:"profile"`
	Rate       float64   `json:"rate"`
	Alpha      float64   `json:"alpha"`
	Refresh    string    `json:"refresh"`
	Policy     string    `json:"policy"`
	NTAG       float64   `json:"ntag"`
	MU         float64   `json:"mu_mb"`
	Latency    float64   `json:"avg_latency_ms"`
	Inaccuracy float64   `json:"avg_inaccuracy"`
	Bound      float64   `json:"ntag_upper_bound"`
	Hourly     []float64 `json:"ntag_per_hour,omitempty"`
	slotNTAG   []float64
	slotMU     []float64
}

func runExperimentInfida(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("idn experiment infida",
		"idn experiment infida --topology I|II|FILE.yaml [--catalog FILE.yaml] --profile fixed|sliding --rate N --alpha A\n"+
			"       --policies infida,olag,sg,offline --slots T --refresh B [--seed S] [--json] [--csv FILE]\n"+
			"       idn experiment infida --figure 6|7a|7b|8|9a|9b|10 [--slots T] [--seed S] [--json] [--csv FILE]", stderr)
	var f infidaFlags
	fs.StringVar(&f.topology, "topology", "II", "Network Topology I or II of paper 000, or a topology YAML file (policy/idn format)")
	fs.StringVar(&f.catalog, "catalog", "", "catalog YAML file (policy/idn format); default the YOLOv4 catalog of Table II")
	fs.StringVar(&f.profile, "profile", "fixed", "popularity profile: fixed or sliding")
	fs.Float64Var(&f.rate, "rate", 7500, "request rate (requests per second)")
	fs.Float64Var(&f.alpha, "alpha", 1, "latency/accuracy trade-off alpha of eq. 6 (ms per mAP point)")
	fs.StringVar(&f.policies, "policies", "infida,olag,sg,offline", "policies: infida, olag, sg, offline")
	fs.IntVar(&f.slots, "slots", 720, "horizon T in slots (1 slot = 1 minute)")
	fs.Float64Var(&f.refresh, "refresh", 1, "INFIDA refresh period B (target B with --stretch)")
	fs.Float64Var(&f.refreshInit, "refresh-init", 1, "B_init of the dynamic refresh period (used when --stretch > 0)")
	fs.IntVar(&f.stretch, "stretch", 0, "stretching duration Delta-t in slots of the dynamic refresh period (0: fixed B)")
	fs.Float64Var(&f.eta, "eta", infida.DefaultConfig().Eta, "INFIDA learning rate (0: the theory value of Appendix F for T = --slots)")
	fs.StringVar(&f.residual, "residual", "budget", "DepRound residual handling: budget (never exceed b^v) or random (E[x] = y)")
	fs.StringVar(&f.olag, "olag-counters", "cumulative", "OLAG counters: cumulative (forwarded requests since the start) or per-slot (requests reaching the vertex each slot)")
	fs.StringVar(&f.sgStop, "sg-stop", "served", "SG stopping rules: served (the paper's: stop once the allocation can serve all requests without the repositories, or when no addition has a positive marginal gain) or gain (only the second rule)")
	fs.IntVar(&f.offlineEpochs, "offline-epochs", 1, "passes of INFIDA_OFFLINE over the horizon")
	fs.IntVar(&f.sgSlots, "sg-slots", 120, "max (evenly spaced) slots SG optimises over in hindsight")
	fs.IntVar(&f.rounds, "rounds", slot.DefaultConfig().Rounds, "interleaving rounds of the serving model")
	fs.IntVar(&f.entries, "entries", 2, "base stations each task enters at")
	fs.BoolVar(&f.expected, "expected", false, "use expected request counts instead of sampling them")
	fs.Uint64Var(&f.seed, "seed", 1, "random seed")
	fs.BoolVar(&f.json, "json", false, "print JSON instead of a table")
	fs.StringVar(&f.csvPath, "csv", "", "write the result rows as CSV to this file")
	fs.StringVar(&f.seriesPath, "series-csv", "", "write per-slot NTAG and MU of every row as CSV to this file")
	fs.StringVar(&f.figure, "figure", "", "run the sweep behind a figure of paper 000: 6, 7a, 7b, 8, 9a, 9b, 10")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	base, err := infidaBaseConfig(f)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	start := time.Now()
	progress := func(s string) { fmt.Fprintf(stderr, "[%6.1fs] %s\n", time.Since(start).Seconds(), s) }
	var rows []infidaRow
	if f.figure == "" {
		rows, err = infidaRun(ctx, base, f, "", progress)
	} else {
		rows, err = infidaFigure(ctx, base, f, progress)
	}
	if err != nil {
		return err
	}
	if f.csvPath != "" {
		if err := infidaWriteCSV(f.csvPath, rows); err != nil {
			return err
		}
	}
	if f.seriesPath != "" {
		if err := infidaWriteSeries(f.seriesPath, rows); err != nil {
			return err
		}
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	infidaPrint(stdout, rows, f.figure == "8")
	return nil
}

// infidaBaseConfig turns the flags into an experiment configuration.
func infidaBaseConfig(f infidaFlags) (slot.ExperimentConfig, error) {
	c := slot.DefaultExperimentConfig()
	g, err := infidaTopology(f.topology)
	if err != nil {
		return c, err
	}
	c.Graph = g
	if f.catalog != "" {
		data, err := os.ReadFile(f.catalog)
		if err != nil {
			return c, fmt.Errorf("catalog: %w", err)
		}
		if c.Catalog, err = idn.ParseCatalogYAML(data); err != nil {
			return c, fmt.Errorf("catalog %s: %w", f.catalog, err)
		}
	}
	if c.Workload.Profile, err = slot.ParseProfile(f.profile); err != nil {
		return c, err
	}
	c.Workload.Rate = f.rate
	c.Workload.EntriesPerTask = f.entries
	c.Workload.Expected = f.expected
	c.Instance.Alpha = f.alpha
	c.Policies = slot.ParsePolicies(f.policies)
	c.Slots = f.slots
	c.Seed = f.seed
	c.OfflineEpochs = f.offlineEpochs
	c.SGSlots = f.sgSlots
	c.Serving.Rounds = f.rounds
	c.INFIDA.Eta = f.eta
	c.INFIDA.Horizon = f.slots
	c.INFIDA.RefreshTarget = f.refresh
	c.INFIDA.RefreshInit = f.refresh
	if f.stretch > 0 {
		c.INFIDA.RefreshInit = f.refreshInit
		c.INFIDA.Stretch = f.stretch
	}
	switch f.residual {
	case "budget":
		c.INFIDA.Residual = infida.ResidualBudget
	case "random":
		c.INFIDA.Residual = infida.ResidualRandom
	default:
		return c, fmt.Errorf("residual: %q is not budget or random", f.residual)
	}
	switch f.olag {
	case "cumulative":
		c.OLAG = infida.OLAGCumulative
	case "per-slot":
		c.OLAG = infida.OLAGPerSlot
	default:
		return c, fmt.Errorf("olag-counters: %q is not cumulative or per-slot", f.olag)
	}
	switch f.sgStop {
	case "served":
		c.SG = infida.SGConfig{StopWhenAllServed: true}
	case "gain":
		c.SG = infida.SGConfig{StopWhenAllServed: false}
	default:
		return c, fmt.Errorf("sg-stop: %q is not served or gain", f.sgStop)
	}
	switch f.figure {
	case "", "6", "7a", "7b", "8", "9a", "9b", "10":
	default:
		return c, fmt.Errorf("figure: %q is not one of 6, 7a, 7b, 8, 9a, 9b, 10", f.figure)
	}
	return c, c.Validate()
}

// infidaTopology resolves "I", "II" or a YAML file.
func infidaTopology(s string) (*idn.Graph, error) {
	switch s {
	case "I", "i", "1":
		return idn.TopologyI(), nil
	case "II", "ii", "2":
		return idn.TopologyII(), nil
	}
	data, err := os.ReadFile(s)
	if err != nil {
		return nil, fmt.Errorf("topology: %q is not I, II or a readable file: %w", s, err)
	}
	g, err := idn.ParseTopologyYAML(data)
	if err != nil {
		return nil, fmt.Errorf("topology %s: %w", s, err)
	}
	return g, nil
}

func infidaTopoName(c slot.ExperimentConfig) string {
	switch c.Graph.Name {
	case "topology-i":
		return "I"
	case "topology-ii":
		return "II"
	case "":
		return "custom"
	}
	return c.Graph.Name
}

// infidaRun runs one setting and returns one row per policy.
func infidaRun(ctx context.Context, c slot.ExperimentConfig, f infidaFlags, figure string, progress func(string)) ([]infidaRow, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	refresh := strconv.FormatFloat(c.INFIDA.RefreshTarget, 'g', -1, 64)
	if c.INFIDA.Stretch > 0 {
		refresh = fmt.Sprintf("%g->%g/%d", c.INFIDA.RefreshInit, c.INFIDA.RefreshTarget, c.INFIDA.Stretch)
	}
	progress(fmt.Sprintf("topology %s profile %s rate %g alpha %g refresh %s: %s over %d slots",
		infidaTopoName(c), c.Workload.Profile, c.Workload.Rate, c.Instance.Alpha, refresh, strings.Join(c.Policies, ","), c.Slots))
	setup, err := slot.Prepare(c)
	if err != nil {
		return nil, err
	}
	res, err := slot.RunPrepared(c, setup, func(s string) { progress("  " + s) })
	if err != nil {
		return nil, err
	}
	bound := setup.NTAGBound()
	var rows []infidaRow
	for _, r := range res {
		row := infidaRow{Figure: figure, Topology: infidaTopoName(c), Profile: c.Workload.Profile.String(), Rate: c.Workload.Rate,
			Alpha: c.Instance.Alpha, Refresh: refresh, Policy: r.Policy, NTAG: r.NTAG, MU: r.MU, Latency: r.AvgLatency,
			Inaccuracy: r.AvgInaccuracy, Bound: bound, slotNTAG: r.SlotNTAG, slotMU: r.SlotMU}
		if r.Policy != "INFIDA" {
			row.Refresh = "-"
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// infidaFigure runs the sweep behind one figure of paper 000 Sec. VI.
func infidaFigure(ctx context.Context, base slot.ExperimentConfig, f infidaFlags, progress func(string)) ([]infidaRow, error) {
	alphas := []float64{0.5, 1, 2, 3, 4, 5, 6}
	var rows []infidaRow
	run := func(c slot.ExperimentConfig) error {
		r, err := infidaRun(ctx, c, f, f.figure, progress)
		rows = append(rows, r...)
		return err
	}
	switch f.figure {
	case "6": // Topology I, fixed popularity, INFIDA: latency and inaccuracy vs alpha
		for _, a := range append([]float64{0}, alphas...) {
			c := base
			c.Graph, c.Workload.Profile, c.Instance.Alpha, c.Policies = idn.TopologyI(), slot.Fixed, a, []string{slot.PolicyINFIDA}
			if err := run(c); err != nil {
				return nil, err
			}
		}
	case "7a", "7b": // sliding popularity, NTAG of the 4 policies vs alpha
		for _, a := range alphas {
			c := base
			c.Graph = idn.TopologyI()
			if f.figure == "7b" {
				c.Graph = idn.TopologyII()
			}
			c.Workload.Profile, c.Instance.Alpha = slot.Sliding, a
			c.Policies = []string{slot.PolicyINFIDA, slot.PolicyOLAG, slot.PolicySG, slot.PolicyOffline}
			if err := run(c); err != nil {
				return nil, err
			}
		}
	case "8": // Topology I, sliding, alpha 1: MU and NTAG vs refresh period B
		c := base
		c.Graph, c.Workload.Profile, c.Instance.Alpha = idn.TopologyI(), slot.Sliding, 1
		c.Policies = []string{slot.PolicyOLAG}
		if err := run(c); err != nil {
			return nil, err
		}
		c.Policies = []string{slot.PolicyINFIDA}
		for _, b := range []float64{4, 8, 16, 32} {
			c.INFIDA.RefreshInit, c.INFIDA.RefreshTarget, c.INFIDA.Stretch = b, b, 0
			if err := run(c); err != nil {
				return nil, err
			}
		}
		c.INFIDA.RefreshInit, c.INFIDA.RefreshTarget, c.INFIDA.Stretch = 1, 32, 60
		if err := run(c); err != nil {
			return nil, err
		}
	case "9a", "9b": // Topology I, alpha 1: NTAG of the 4 policies vs rate
		for _, rate := range []float64{7083, 7500, 10000} {
			c := base
			c.Graph, c.Instance.Alpha, c.Workload.Rate = idn.TopologyI(), 1, rate
			c.Workload.Profile = slot.Fixed
			if f.figure == "9b" {
				c.Workload.Profile = slot.Sliding
			}
			c.Policies = []string{slot.PolicyINFIDA, slot.PolicyOLAG, slot.PolicySG, slot.PolicyOffline}
			if err := run(c); err != nil {
				return nil, err
			}
		}
	case "10": // Topology II, fixed: latency and inaccuracy vs alpha, 7,500 and 10,000 rps
		for _, rate := range []float64{7500, 10000} {
			for _, a := range alphas {
				c := base
				c.Graph, c.Workload.Profile, c.Workload.Rate, c.Instance.Alpha = idn.TopologyII(), slot.Fixed, rate, a
				c.Policies = []string{slot.PolicyINFIDA, slot.PolicyOLAG, slot.PolicySG, slot.PolicyOffline}
				if err := run(c); err != nil {
					return nil, err
				}
			}
		}
	}
	if f.figure == "8" {
		for i := range rows {
			rows[i].Hourly = infidaHourly(rows[i].slotNTAG, 60)
		}
	}
	return rows, nil
}

// infidaHourly averages a per-slot series over windows of w slots.
func infidaHourly(x []float64, w int) []float64 {
	var out []float64
	for i := 0; i < len(x); i += w {
		s, n := 0.0, 0
		for _, v := range x[i:min(i+w, len(x))] {
			s += v
			n++
		}
		out = append(out, s/float64(n))
	}
	return out
}

func infidaPrint(w io.Writer, rows []infidaRow, hourly bool) {
	fmt.Fprintf(w, "%-6s %-4s %-8s %7s %5s %-10s %-15s %9s %11s %10s %10s %9s\n",
		"figure", "topo", "profile", "rate", "alpha", "refresh", "policy", "NTAG", "MU(MB)", "lat(ms)", "inacc", "NTAG-UB")
	for _, r := range rows {
		fig := r.Figure
		if fig == "" {
			fig = "-"
		}
		fmt.Fprintf(w, "%-6s %-4s %-8s %7g %5g %-10s %-15s %9.3f %11.1f %10.3f %10.3f %9.3f\n",
			fig, r.Topology, r.Profile, r.Rate, r.Alpha, r.Refresh, r.Policy, r.NTAG, r.MU, r.Latency, r.Inaccuracy, r.Bound)
	}
	if !hourly {
		return
	}
	fmt.Fprintf(w, "\nNTAG per hour (60-slot means):\n")
	for _, r := range rows {
		fmt.Fprintf(w, "%-15s %-10s", r.Policy, r.Refresh)
		for _, v := range r.Hourly {
			fmt.Fprintf(w, " %7.3f", v)
		}
		fmt.Fprintln(w)
	}
}

func infidaWriteCSV(path string, rows []infidaRow) error {
	fh, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	cw := csv.NewWriter(fh)
	_ = cw.Write([]string{"figure", "topology", "profile", "rate", "alpha", "refresh", "policy", "ntag", "mu_mb", "avg_latency_ms", "avg_inaccuracy", "ntag_upper_bound"})
	for _, r := range rows {
		_ = cw.Write([]string{r.Figure, r.Topology, r.Profile, infidaF(r.Rate), infidaF(r.Alpha), r.Refresh, r.Policy,
			infidaF(r.NTAG), infidaF(r.MU), infidaF(r.Latency), infidaF(r.Inaccuracy), infidaF(r.Bound)})
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		fh.Close()
		return fmt.Errorf("csv %s: %w", path, err)
	}
	if err := fh.Close(); err != nil {
		return fmt.Errorf("csv %s: %w", path, err)
	}
	return nil
}

func infidaWriteSeries(path string, rows []infidaRow) error {
	fh, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("series csv: %w", err)
	}
	cw := csv.NewWriter(fh)
	_ = cw.Write([]string{"figure", "topology", "profile", "rate", "alpha", "refresh", "policy", "slot", "ntag", "mu_mb"})
	for _, r := range rows {
		for t := range r.slotNTAG {
			_ = cw.Write([]string{r.Figure, r.Topology, r.Profile, infidaF(r.Rate), infidaF(r.Alpha), r.Refresh, r.Policy,
				strconv.Itoa(t), infidaF(r.slotNTAG[t]), infidaF(r.slotMU[t])})
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		fh.Close()
		return fmt.Errorf("series csv %s: %w", path, err)
	}
	if err := fh.Close(); err != nil {
		return fmt.Errorf("series csv %s: %w", path, err)
	}
	return nil
}

func infidaF(v float64) string { return strconv.FormatFloat(v, 'g', 8, 64) }
