package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idn-net/idn/scenarios"
)

func runIdn(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := dispatch(context.Background(), "idn", topCommands, args, &out, &errb)
	return out.String(), errb.String(), err
}

func TestScenarioRunHelp(t *testing.T) {
	_, stderr, err := runIdn(t, "scenario", "run", "--help")
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{"idn scenario run [FILE]", "--report", "-bin", "lost counts", "quickstart"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("help lacks %q:\n%s", want, stderr)
		}
	}
	_, stderr, err = runIdn(t, "scenario")
	if !errors.Is(err, errUsage) || !strings.Contains(stderr, "run") {
		t.Errorf("bare 'idn scenario': %v\n%s", err, stderr)
	}
}

func TestScenarioRunCheckQuickstart(t *testing.T) {
	out, _, err := runIdn(t, "scenario", "run", "--check")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `scenario "quickstart" is valid: 7 nodes`) || strings.Count(out, "vertex dc-0") != 3 {
		t.Errorf("output:\n%s", out)
	}
}

func TestScenarioRunInvalidFileIsUsageError(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: x\nworkload: {rate: 0, duration: 10s, tasks: {task-00: 1}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Flags may follow FILE.
	_, _, err := runIdn(t, "scenario", "run", bad, "--check")
	if !errors.Is(err, errUsage) || !errors.Is(err, scenarios.ErrInvalid) || !strings.Contains(err.Error(), "workload.rate") {
		t.Errorf("err = %v", err)
	}
	_, _, err = runIdn(t, "scenario", "run", filepath.Join(dir, "missing.yaml"))
	if err == nil || errors.Is(err, errUsage) || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: %v", err)
	}
	_, _, err = runIdn(t, "scenario", "run", bad, "extra")
	if !errors.Is(err, errUsage) {
		t.Errorf("extra argument: %v", err)
	}
	_, _, err = runIdn(t, "scenario", "run", "--no-such-flag")
	if !errors.Is(err, errUsage) {
		t.Errorf("unknown flag: %v", err)
	}
}

func TestScenarioRunBadBinaryFails(t *testing.T) {
	dir := t.TempDir()
	sc := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(sc, []byte("name: x\nworkload: {rate: 1, duration: 1s, tasks: {task-00: 1}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "r.json")
	_, _, err := runIdn(t, "scenario", "run", sc, "--bin", filepath.Join(dir, "nope"), "--report", report, "--work-dir", dir)
	if err == nil || errors.Is(err, errUsage) || !strings.Contains(err.Error(), "nope") {
		t.Errorf("err = %v", err)
	}
	if _, serr := os.Stat(report); !os.IsNotExist(serr) {
		t.Error("a report was written for a run that never started")
	}
}
