package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/idn-net/idn/scenarios"
)

var scenarioCommands = map[string]*command{}

func init() {
	registerTop(&command{name: "scenario", summary: "run a chaos scenario on loopback (idn scenario --help)", run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		return dispatch(ctx, "idn scenario", scenarioCommands, args, stdout, stderr)
	}})
	scenarioCommands["run"] = &command{name: "run", summary: "start real idn node processes, drive load, inject faults, report", run: runScenario}
}

const scenarioRunUsage = `idn scenario run [FILE] [--report out.json] [--json] [--bin PATH] [--work-dir DIR] [--check]

Starts the scenario's idn node processes on 127.0.0.1 (free ports, one data
dir each under a temporary directory), joins them through the first node's
gossip address, waits until every node sees all the others and every vertex
has a Raft leader, sends the open-loop workload to the entry nodes, applies
the faults on schedule (kill -9, SIGTERM, SIGSTOP or partition a node or a
vertex's Raft leader; restart a node with its data dir), measures failovers,
reads /metrics, stops every node (SIGTERM, then SIGKILL) and prints the
report. Without FILE it runs the embedded quickstart scenario
(scenarios/quickstart.yaml). Progress goes to stderr, the report to stdout.
The scenario file format is in the README.

With an infida: section (scenarios/infida-topology2.yaml) every node runs
--allocation infida and the load is the workload of idn experiment infida,
slot by slot from a slot boundary; the report adds the live NTAG vs the slot
simulator's on the same setup (last third of the load slots), MU, control
traffic per slot per vertex and the leader-kill y^v check. --check also runs
the slot simulator on the scenario's setup (to tune eta without a cluster).

Accounting: accepted = results + errors + lost, where lost counts requests
delivered to a node's API that got no reply at all (client timeout or a
connection closed before any status line).

Exit status: 0 when every assertion held, 1 when one failed or the run
could not be carried out, 2 on bad usage or an invalid scenario file.

Flags:`

// runScenario implements `idn scenario run`.
func runScenario(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("idn scenario run", scenarioRunUsage, stderr)
	reportPath := fs.String("report", "", "also write the JSON report to this `file`")
	jsonOnly := fs.Bool("json", false, "print only the JSON report on stdout (no human report)")
	bin := fs.String("bin", "", "idn binary to start nodes with (`path`; default: this executable)")
	workDir := fs.String("work-dir", "", "keep node data dirs and logs in this `dir` (default: a temporary dir, removed after a passing run, kept and named after a failed one)")
	check := fs.Bool("check", false, "validate the scenario file and print its nodes, without running it")
	// Accept flags after FILE too: parse, take FILE, parse the rest.
	if err := parseFlags(fs, args, true); err != nil {
		return err
	}
	rest := fs.Args()
	file := ""
	if len(rest) > 0 {
		file = rest[0]
		if err := parseFlags(fs, rest[1:], false); err != nil {
			return err
		}
	}
	var sc *scenarios.Scenario
	var err error
	if file == "" {
		sc, err = scenarios.Default()
	} else {
		sc, err = scenarios.Load(file)
	}
	if err != nil {
		if errors.Is(err, scenarios.ErrInvalid) {
			return fmt.Errorf("%w: %w", errUsage, err)
		}
		return err
	}
	if *check {
		fmt.Fprintf(stdout, "scenario %q is valid: %d nodes, %.1f req/s for %s, %d faults, %d assertions\n",
			sc.Name, len(sc.NodeSpecs()), sc.Workload.Rate, sc.Workload.Duration.D(), len(sc.Faults), len(sc.Assertions))
		for _, n := range sc.NodeSpecs() {
			fmt.Fprintf(stdout, "  %-10s vertex %-6s tier %d  group of %d\n", n.Name, n.Vertex, n.Tier, n.GroupSize)
		}
		if sc.Infida != nil {
			return checkInfida(sc, stdout)
		}
		return nil
	}
	rep, runErr := scenarios.Run(ctx, sc, scenarios.Options{Bin: *bin, Progress: stderr, WorkDir: *workDir})
	if rep == nil {
		return runErr
	}
	if *reportPath != "" {
		if err := writeReport(*reportPath, rep); err != nil {
			return errors.Join(runErr, err)
		}
	}
	if *jsonOnly {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteText(stdout)
		if err == nil {
			fmt.Fprintln(stdout, "\nJSON report:")
			err = rep.WriteJSON(stdout)
		}
	}
	if err != nil {
		return errors.Join(runErr, err)
	}
	return runErr
}

func writeReport(path string, rep *scenarios.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := rep.WriteJSON(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// checkInfida prints the node flags of an infida scenario and the slot
// simulator's result on its setup (what the live NTAG is compared with), so
// eta and the rate can be tuned without starting a cluster.
func checkInfida(sc *scenarios.Scenario, stdout io.Writer) error {
	cfg, setup := sc.InfidaSetup()
	if specs := sc.NodeSpecs(); len(specs) > 0 {
		fmt.Fprintf(stdout, "node flags: %s\n", strings.Join(specs[0].Args, " "))
	}
	res, err := sc.SimulateInfida()
	if err != nil {
		return err
	}
	from := cfg.Slots - cfg.Slots/3
	tail := 0.0
	for _, v := range res.SlotNTAG[from:] {
		tail += v
	}
	tail /= float64(len(res.SlotNTAG[from:]))
	fmt.Fprintf(stdout, "slot simulator (INFIDA, eta %g, %d request types, %d slots of %gs, %.0f requests/slot):\n",
		cfg.INFIDA.Eta, len(setup.Instance.Types), cfg.Slots, cfg.Workload.SlotSeconds, cfg.Workload.Rate*cfg.Workload.SlotSeconds)
	fmt.Fprintf(stdout, "  NTAG last third %.4f, all slots %.4f, upper bound %.4f; MU %.1f MB/slot\n", tail, res.NTAG, setup.NTAGBound(), res.MU)
	fmt.Fprintf(stdout, "  NTAG per slot:")
	for t, v := range res.SlotNTAG {
		if t%10 == 0 {
			fmt.Fprintf(stdout, "\n    %3d:", t)
		}
		fmt.Fprintf(stdout, " %6.2f", v)
	}
	fmt.Fprintln(stdout)
	return nil
}
