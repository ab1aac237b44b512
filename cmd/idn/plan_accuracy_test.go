package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestPlanAccuracyTable(t *testing.T) {
	var out, errb bytes.Buffer
	err := runPlanAccuracy(context.Background(), []string{"--mu", "2,1,0.9,0.1", "--a", "70,75,80,100", "--alpha", "0.25,0.25,0.25,0.25", "--astar", "76", "--lambda", "0.5"}, &out, &errb)
	if err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"lambda^max (Def. 1)            = 0.708333", "T_LP-LB(lambda) (eq. 3)        = 0.925", "{1,2}    shuffle", "N_WF = 0.4625"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
}

func TestPlanAccuracyJSON(t *testing.T) {
	var out, errb bytes.Buffer
	if err := runPlanAccuracy(context.Background(), []string{"--astar", "76", "--load", "0.5", "--n", "64", "--json"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	var rep planAccuracyReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.TLPLB == nil || len(rep.Tuples) != 7 || rep.RJIQP == nil || *rep.Load != 0.5 {
		t.Fatalf("report %+v", rep)
	}
}

func TestPlanAccuracyErrors(t *testing.T) {
	cases := map[string][]string{
		"lambda^max = 0.708333": {"--lambda", "0.8"},
		"exceeds every class":   {"--astar", "101", "--lambda", "0.1"},
		"--mu item 2":           {"--mu", "2,x,1,1"},
		"alpha: sums to":        {"--alpha", "0.5,0.5,0.5,0.5"},
		"a: 3 values":           {"--a", "1,2,3"},
		"--load = 2":            {"--load", "2"},
		"not both":              {"--load", "0.5", "--lambda", "0.1"},
		"mu[1] = -1":            {"--mu", "2,-1,0.9,0.1"},
	}
	for want, args := range cases {
		var out, errb bytes.Buffer
		err := runPlanAccuracy(context.Background(), args, &out, &errb)
		if err == nil || !errors.Is(err, errUsage) || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: error %v, want usage error containing %q", args, err, want)
		}
	}
}
