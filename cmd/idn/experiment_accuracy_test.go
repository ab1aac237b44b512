package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestExperimentAccuracyPoint(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"--n", "16", "--load", "0.5", "--runs", "2", "--departures", "20000", "--policies", "rjiq,tad,tadop,jfiq", "--json"}
	if err := runExperimentAccuracy(context.Background(), args, &out, &errb); err != nil {
		t.Fatal(err)
	}
	var rep accReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 4 || rep.Rows[2].Policy != "tadop" || !rep.Rows[2].Meets || rep.Rows[3].Meets {
		t.Fatalf("rows %+v", rep.Rows)
	}
	if !strings.Contains(errb.String(), "[8/8") {
		t.Fatalf("no progress on stderr: %q", errb.String())
	}
	// same flags, same output (deterministic with 2 workers too)
	var out2 bytes.Buffer
	if err := runExperimentAccuracy(context.Background(), append(args, "--workers", "2"), &out2, &errb); err != nil {
		t.Fatal(err)
	}
	var rep2 accReport
	_ = json.Unmarshal(out2.Bytes(), &rep2)
	for i := range rep.Rows {
		if rep.Rows[i].T != rep2.Rows[i].T || rep.Rows[i].Acc != rep2.Rows[i].Acc {
			t.Fatalf("row %d differs with --workers 2", i)
		}
	}
}

func TestExperimentAccuracyFigures(t *testing.T) {
	var out, errb bytes.Buffer
	if err := runExperimentAccuracy(context.Background(), []string{"--figure", "6", "--astars", "76", "--betas", "0.2", "--per-server", "200"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "\n64 "); n != 3 {
		t.Fatalf("figure 6: %d rows:\n%s", n, out.String())
	}
	out.Reset()
	if err := runExperimentAccuracy(context.Background(), []string{"--figure", "9", "--n", "64", "--time", "400", "--phase-len", "100", "--sample", "50"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "N:tadop") || strings.Count(out.String(), "\n") < 10 {
		t.Fatalf("figure 9:\n%s", out.String())
	}
	out.Reset()
	if err := runExperimentAccuracy(context.Background(), []string{"--figure", "4", "--ns", "16,32", "--astars", "76", "--service", "det", "--per-server", "100"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), " rjiq "); n != 2 {
		t.Fatalf("figure 4: %d rows:\n%s", n, out.String())
	}
}

func TestExperimentAccuracyErrors(t *testing.T) {
	cases := map[string][]string{
		"--load = 1":       {"--load", "1"},
		"--policies":       {"--policies", "rjiq,foo"},
		"--figure = \"5\"": {"--figure", "5"},
		"--service":        {"--service", "weibull"},
		"--runs = 0":       {"--runs", "0"},
		"exceeds every":    {"--astar", "101"},
		"fixed arrival":    {"--figure", "9", "--policies", "rjiq"},
	}
	for want, args := range cases {
		var out, errb bytes.Buffer
		err := runExperimentAccuracy(context.Background(), args, &out, &errb)
		if err == nil || !errors.Is(err, errUsage) || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: error %v, want usage error containing %q", args, err, want)
		}
	}
}
