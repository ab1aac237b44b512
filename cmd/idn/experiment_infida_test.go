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
		{"stray"},
	} {
		var out, errb bytes.Buffer
		err := runExperimentInfida(context.Background(), args, &out, &errb)
		if !errors.Is(err, errUsage) {
			t.Errorf("%v: want usage error, got %v", args, err)
		}
	}
}
