package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestRLTrainThenEval(t *testing.T) {
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "po.ckpt")
	var out, errb bytes.Buffer
	err := runRL(context.Background(), []string{"train", "--workload", "spp", "--steps", "400", "--rollout", "200",
		"--minibatch", "100", "--epochs", "1", "--eval-every", "1", "--eval-slots", "100", "--out", ckpt, "--workers", "2"}, &out, &errb)
	if err != nil {
		t.Fatalf("train: %v\n%s", err, errb.String())
	}
	if !strings.Contains(errb.String(), "update 2 steps 400") || !strings.Contains(errb.String(), "eval update 1") {
		t.Fatalf("progress lines missing:\n%s", errb.String())
	}
	a, meta, err := readCheckpointFile(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	if a.Steps != 400 || !strings.Contains(meta.Command, "--steps 400") {
		t.Fatalf("checkpoint steps %d command %q", a.Steps, meta.Command)
	}
	out.Reset()
	errb.Reset()
	if err := runRL(context.Background(), []string{"eval", "--policy", ckpt, "--slots", "300", "--json"}, &out, &errb); err != nil {
		t.Fatalf("eval: %v\n%s", err, errb.String())
	}
	var res struct {
		Rows []evalRow `json:"rows"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("eval --json: %v\n%s", err, out.String())
	}
	var names []string
	for _, r := range res.Rows {
		names = append(names, r.Approach)
		if r.Approach == "LW" && r.Overall.Ratio > 77.7 {
			t.Errorf("LW goodput ratio %v above the lightweight accuracy", r.Overall.Ratio)
		}
		if _, ok := r.States["bursty"]; !ok {
			t.Errorf("%s: no bursty-state columns", r.Approach)
		}
	}
	if got := strings.Join(names, ","); got != "LW,HW,HW-E,RL-PO,SQ,SA,InFaaS" {
		t.Fatalf("rows %s", got)
	}
	out.Reset()
	if err := runRL(context.Background(), []string{"eval", "--slots", "100"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "HWSR%") || !strings.Contains(out.String(), "InFaaS") {
		t.Fatalf("table:\n%s", out.String())
	}
}

func TestRLUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"train", "--steps", "10"},
		{"train", "--out", "x", "--workload", "nope"},
		{"train", "--out", "x", "--rollout", "101", "--workers", "2"},
		{"train", "--out", "x", "--lr", "-1"},
		{"eval", "--slots", "0"},
		{"eval", "--workload", "nope"},
		{"nope"},
	} {
		var out, errb bytes.Buffer
		err := runRL(context.Background(), args, &out, &errb)
		if !errors.Is(err, errUsage) {
			t.Errorf("%v: err = %v, want a usage error", args, err)
		}
	}
}
