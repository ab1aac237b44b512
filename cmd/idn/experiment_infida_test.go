package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idn-net/idn/policy/idn"
)

func TestExperimentInfidaPoint(t *testing.T) {
	dir := t.TempDir()
	csvPath := filepath.Join(dir, "out.csv")
	var out, errb bytes.Buffer
	err := runExperimentInfida(context.Background(), []string{"--topology", "II", "--profile", "sliding", "--slots", "6",
		"--sg-slots", "3", "--csv", csvPath, "--series-csv", filepath.Join(dir, "s.csv")}, &out, &errb)
	if err != nil {
		t.Fatal(err, errb.String())
	}
	for _, p := range []string{"INFIDA", "OLAG", "SG", "INFIDA_OFFLINE", "NTAG", "MU(MB)"} {
		if !strings.Contains(out.String(), p) {
			t.Fatalf("table lacks %q:\n%s", p, out.String())
		}
	}
	data, err := os.ReadFile(csvPath)
	if err != nil || strings.Count(string(data), "\n") != 5 {
		t.Fatalf("csv: %v\n%s", err, data)
	}
	if !strings.Contains(errb.String(), "INFIDA_OFFLINE") {
		t.Fatalf("no progress on stderr: %q", errb.String())
	}
}

func TestExperimentInfidaJSONAndYAML(t *testing.T) {
	dir := t.TempDir()
	topo := filepath.Join(dir, "t.yaml")
	if err := os.WriteFile(topo, idn.DefaultTopologyYAML, 0o644); err != nil {
		t.Fatal(err)
	}
	cat := filepath.Join(dir, "c.yaml")
	doc := "tasks: [a, b]\nmodels:\n" +
		"  - {name: a1, task: a, accuracy: 0.5, size_mb: 100, speed: {titan-rtx: {fps: 100}, gtx-980: {fps: 30}}}\n" +
		"  - {name: a2, task: a, accuracy: 0.7, size_mb: 900, speed: {titan-rtx: {fps: 40}, gtx-980: {fps: 10}}}\n" +
		"  - {name: b1, task: b, accuracy: 0.6, size_mb: 200, speed: {titan-rtx: {fps: 200}, gtx-980: {fps: 60}}}\n"
	if err := os.WriteFile(cat, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	err := runExperimentInfida(context.Background(), []string{"--topology", topo, "--catalog", cat, "--rate", "20",
		"--slots", "4", "--policies", "infida,olag", "--json"}, &out, &errb)
	if err != nil {
		t.Fatal(err, errb.String())
	}
	var rows []map[string]any
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("json: %v\n%s", err, out.String())
	}
	if rows[0]["policy"] != "INFIDA" {
		t.Fatalf("rows %v", rows)
	}
}

// TestExperimentInfidaSGStop checks the --sg-stop flag on a light load
// (300 rps on Topology II), where the edge can serve every request: the
// paper's SG stops as soon as no request reaches the repository, so it
// ends strictly below the gain-only SG, which keeps adding models while
// they lower the cost (same greedy sequence, cut short).
func TestExperimentInfidaSGStop(t *testing.T) {
	ntag := func(stop string) float64 {
		var out, errb bytes.Buffer
		err := runExperimentInfida(context.Background(), []string{"--topology", "II", "--slots", "6", "--sg-slots", "6",
			"--policies", "sg", "--sg-stop", stop, "--rate", "300", "--json"}, &out, &errb)
		if err != nil {
			t.Fatal(err, errb.String())
		}
		var rows []struct {
			NTAG float64 `json:"ntag"`
		}
		if err := json.Unmarshal(out.Bytes(), &rows); err != nil || len(rows) != 1 {
			t.Fatalf("json: %v\n%s", err, out.String())
		}
		return rows[0].NTAG
	}
	served, gain := ntag("served"), ntag("gain")
	if !(served < gain) {
		t.Fatalf("SG with the paper's stop rule NTAG %v, gain-only %v: want the stop rule to cut the greedy short", served, gain)
	}
}

func TestExperimentInfidaErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--topology", "III"},
		{"--profile", "weird"},
		{"--policies", "infida,bogus"},
		{"--figure", "11"},
		{"--slots", "0"},
		{"--residual", "x"},
		{"--refresh", "0"},
		{"--olag-counters", "x"},
		{"--sg-stop", "x"},
		{"stray"},
	} {
		var out, errb bytes.Buffer
		err := runExperimentInfida(context.Background(), args, &out, &errb)
		if !errors.Is(err, errUsage) {
			t.Errorf("%v: want usage error, got %v", args, err)
		}
	}
}
