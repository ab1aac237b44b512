// Command idn is the one binary of the inference delivery network:
//
//	idn node                 run one IDN node (joins a cluster through seeds)
//	idn scenario run FILE    start a small IDN on loopback, drive load, inject faults, report
//	idn experiment NAME ...  paper reproductions on the pure simulators
//	idn plan NAME ...        capacity-planning calculators for operators
//	idn version              print the version
//
// Every subcommand has its own --help.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// version is overridden at link time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// command is one subcommand (or one experiment/plan under its group).
type command struct {
	name    string
	summary string
	// run executes the command. args excludes the command's own name.
	// Results go to stdout, progress and diagnostics to stderr.
	run func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var (
	topCommands = map[string]*command{}
	experiments = map[string]*command{}
	plans       = map[string]*command{}
)

// registerTop adds a top-level subcommand; called from init functions.
func registerTop(c *command) { topCommands[c.name] = c }

// registerExperiment adds `idn experiment NAME`; called from init functions.
func registerExperiment(c *command) { experiments[c.name] = c }

// registerPlan adds `idn plan NAME`; called from init functions.
func registerPlan(c *command) { plans[c.name] = c }

// errUsage marks an error that is the caller's fault: exit code 2.
var errUsage = errors.New("usage error")

func init() {
	registerTop(&command{name: "version", summary: "print the idn version", run: func(_ context.Context, _ []string, stdout, _ io.Writer) error {
		fmt.Fprintf(stdout, "idn %s\n", version)
		return nil
	}})
	registerTop(&command{name: "experiment", summary: "run a paper reproduction on the simulators (idn experiment --help)", run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		return dispatch(ctx, "idn experiment", experiments, args, stdout, stderr)
	}})
	registerTop(&command{name: "plan", summary: "capacity-planning calculators (idn plan --help)", run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		return dispatch(ctx, "idn plan", plans, args, stdout, stderr)
	}})
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := dispatch(ctx, "idn", topCommands, os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, "idn:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "idn:", err)
		os.Exit(1)
	}
}

// dispatch runs the subcommand named by args[0] among cmds.
func dispatch(ctx context.Context, prog string, cmds map[string]*command, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		printCommands(stderr, prog, cmds)
		if len(args) == 0 {
			return fmt.Errorf("%w: %s needs a subcommand", errUsage, prog)
		}
		return flag.ErrHelp
	}
	c, ok := cmds[args[0]]
	if !ok {
		printCommands(stderr, prog, cmds)
		return fmt.Errorf("%w: %s: unknown subcommand %q", errUsage, prog, args[0])
	}
	return c.run(ctx, args[1:], stdout, stderr)
}

func printCommands(w io.Writer, prog string, cmds map[string]*command) {
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(w, "Usage: %s <subcommand> [flags]\n\nSubcommands:\n", prog)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintf(w, "\nRun '%s <subcommand> --help' for its flags.\n", prog)
}

// newFlagSet returns a FlagSet that reports errors instead of exiting and
// prints its usage to stderr.
func newFlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: %s\n\n", usage)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args into fs, turning parse failures into usage errors
// and rejecting stray positional arguments unless allowArgs.
func parseFlags(fs *flag.FlagSet, args []string, allowArgs bool) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if !allowArgs && fs.NArg() > 0 {
		return fmt.Errorf("%w: %s: unexpected arguments %s", errUsage, fs.Name(), strings.Join(fs.Args(), " "))
	}
	return nil
}
