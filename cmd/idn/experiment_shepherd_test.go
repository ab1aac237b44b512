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
)

func TestShepherdFigure11aJSON(t *testing.T) {
	var out, errb bytes.Buffer
	err := runShepherd(context.Background(), []string{"--figure", "11a", "--duration", "1500", "--json"}, &out, &errb)
	if err != nil {
		t.Fatal(err)
	}
	var rows []shepherdRow
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out.String())
	}
	if len(rows) != 8 {
		t.Fatalf("%d rows, want 2 SLOs x 4 schemes", len(rows))
	}
	good := map[string]float64{}
	for _, r := range rows {
		if r.Late != 0 {
			t.Fatalf("late requests: %+v", r)
		}
		good[r.Scheme+"@"+strings.TrimSuffix(strings.TrimSuffix(jsonNum(r.SLOms), ".0"), "")] = r.Goodput
	}
	if good["flex@90"] < 2*good["clockwork@90"] || good["flex@90"] < 2*good["flex-np@90"] {
		t.Fatalf("90 ms goodputs %v", good)
	}
	if !strings.Contains(errb.String(), "shepherd: figure 11a") {
		t.Fatalf("no progress on stderr: %q", errb.String())
	}
}

func jsonNum(f float64) string {
	b, _ := json.Marshal(f)
	return string(b)
}

func TestShepherdTraceReplay(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "trace.csv")
	var sb strings.Builder
	sb.WriteString("arrival_ms,stream,model,slo_ms\n")
	for i := 0; i < 300; i++ {
		sb.WriteString(strings.Join([]string{jsonNum(float64(i) * 0.5), "app" + jsonNum(float64(i%3)), []string{"RN18", "RN50", "DN121"}[i%3], "200"}, ","))
		sb.WriteString("\n")
	}
	if err := os.WriteFile(path, []byte(sb.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if err := runShepherd(context.Background(), []string{"--trace", path, "--workers", "2", "--schemes", "flex,clockwork"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if !strings.Contains(s, "goodput/s") || !strings.Contains(s, "flex") || !strings.Contains(s, "clockwork") || strings.Contains(s, "nexus") {
		t.Fatalf("table:\n%s", s)
	}
}

func TestShepherdUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--figure", "8"},
		{"--figure", "7", "--trace", "x.csv"},
		{"--figure", "7", "--workers", "0"},
		{"--figure", "7", "--schemes", "flex,foo"},
		{"--figure", "7", "--load", "-5"},
		{"--figure", "7", "--workload", "weird"},
		{"--trace", "/nonexistent/trace.csv"},
		{"--figure", "11a", "--slo", "0"},
	} {
		var out, errb bytes.Buffer
		err := runShepherd(context.Background(), args, &out, &errb)
		if !errors.Is(err, errUsage) {
			t.Fatalf("args %v: err = %v, want a usage error", args, err)
		}
	}
}

func TestShepherdFigurePathsSmall(t *testing.T) {
	for _, args := range [][]string{
		{"--figure", "7", "--load", "3000", "--duration", "400", "--workload", "stable"},
		{"--figure", "9", "--slo", "100", "--duration", "400", "--workload", "bursty"},
		{"--figure", "10", "--workers", "24", "--duration", "300", "--workload", "stable"},
		{"--figure", "11b", "--workers", "24", "--duration", "300", "--workload", "stable"},
	} {
		var out, errb bytes.Buffer
		if err := runShepherd(context.Background(), append(args, "--json"), &out, &errb); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		var rows []shepherdRow
		if err := json.Unmarshal(out.Bytes(), &rows); err != nil || len(rows) == 0 {
			t.Fatalf("%v: %v rows, %v", args, len(rows), err)
		}
		for _, r := range rows {
			if r.Late != 0 || r.OfferedRate <= 0 || r.Goodput > r.OfferedRate+1e-9 {
				t.Fatalf("%v: bad row %+v", args, r)
			}
		}
	}
}
