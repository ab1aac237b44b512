package main

// idn plan accuracy: the capacity-planning calculator of paper 001 for
// operators (lambda^max, T_LP-LB, p*(lambda), Waterfilling, routing tuples).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/idn-net/idn/policy/accuracy"
)

func init() {
	registerPlan(&command{
		name:    "accuracy",
		summary: "paper 001: lambda^max, latency bound T_LP-LB, optimal class mix and routing tuples for an accuracy target",
		run:     runPlanAccuracy,
	})
}

// accParseFloats parses a comma-separated list of numbers for flag name.
func accParseFloats(name, s string) ([]float64, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("%w: --%s is empty", errUsage, name)
	}
	parts := strings.Split(s, ",")
	out := make([]float64, len(parts))
	for i, p := range parts {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil {
			return nil, fmt.Errorf("%w: --%s item %d = %q is not a number", errUsage, name, i+1, p)
		}
		out[i] = v
	}
	return out, nil
}

// accUsageErr turns a validation or infeasibility error of package accuracy
// into a usage error.
func accUsageErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, accuracy.ErrInvalid) || errors.Is(err, accuracy.ErrInfeasible) {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	return err
}

// planAccuracyReport is the --json output of idn plan accuracy.
type planAccuracyReport struct {
	Mu         []float64       `json:"mu"`
	A          []float64       `json:"a"`
	Alpha      []float64       `json:"alpha"`
	AStar      float64         `json:"astar"`
	LambdaMax  float64         `json:"lambda_max"`
	Capacity   float64         `json:"capacity_no_accuracy"` // sum alpha mu
	Lambda     *float64        `json:"lambda,omitempty"`
	Load       *float64        `json:"load,omitempty"`
	TLPLB      *float64        `json:"t_lp_lb,omitempty"`
	NLPLB      *float64        `json:"n_lp_lb,omitempty"`
	PStar      []float64       `json:"p_star,omitempty"`
	AccLB      *float64        `json:"accuracy_p_star,omitempty"`
	WFP        []float64       `json:"waterfilling_p,omitempty"`
	WFN        *float64        `json:"waterfilling_n,omitempty"`
	Relaxed    []float64       `json:"relaxed_p"`
	RelaxedT   float64         `json:"relaxed_t"`
	RJIQGamma  *float64        `json:"rjiq_gamma,omitempty"`
	RJIQP      []float64       `json:"rjiq_p,omitempty"`
	Tuples     []planTupleJSON `json:"tuples"`
	PStarAtMax []float64       `json:"p_star_at_lambda_max"`
}

type planTupleJSON struct {
	Set    []int     `json:"set"` // 1-based classes
	Kind   string    `json:"kind"`
	Q      []float64 `json:"q"`
	V      float64   `json:"v"`
	Weight *float64  `json:"weight,omitempty"`
}

func runPlanAccuracy(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("idn plan accuracy",
		"idn plan accuracy --mu 2,1,0.9,0.1 --a 70,75,80,100 --alpha 0.25,0.25,0.25,0.25 --astar 76 [--lambda L | --load R] [--n N] [--json]", stderr)
	muS := fs.String("mu", "2,1,0.9,0.1", "service rate per class (comma-separated)")
	aS := fs.String("a", "70,75,80,100", "accuracy per class")
	alS := fs.String("alpha", "0.25,0.25,0.25,0.25", "fraction of servers per class (sums to 1)")
	astar := fs.Float64("astar", 76, "benchmark accuracy a*")
	lambda := fs.Float64("lambda", -1, "normalised arrival rate lambda (queries per server per time unit); omit for the lambda-free parts")
	load := fs.Float64("load", -1, "alternatively, lambda as a fraction of lambda^max (0 < load <= 1)")
	n := fs.Int("n", 0, "number of servers, to print R-JIQ's eq. (4) mix with Lemma 2's gamma (0: skip)")
	asJSON := fs.Bool("json", false, "print JSON instead of tables")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	var sys accuracy.System
	var err error
	if sys.Mu, err = accParseFloats("mu", *muS); err != nil {
		return err
	}
	if sys.A, err = accParseFloats("a", *aS); err != nil {
		return err
	}
	if sys.Alpha, err = accParseFloats("alpha", *alS); err != nil {
		return err
	}
	if err := sys.Validate(); err != nil {
		return accUsageErr(err)
	}
	if *lambda >= 0 && *load >= 0 {
		return fmt.Errorf("%w: give --lambda or --load, not both", errUsage)
	}
	lm, err := accuracy.LambdaMax(sys, *astar)
	if err != nil {
		return accUsageErr(fmt.Errorf("--astar = %v: %w", *astar, err))
	}
	rep := planAccuracyReport{Mu: sys.Mu, A: sys.A, Alpha: sys.Alpha, AStar: *astar, LambdaMax: lm}
	for i := range sys.Mu {
		rep.Capacity += sys.Mu[i] * sys.Alpha[i]
	}
	lam := -1.0
	switch {
	case *load >= 0:
		if !(*load > 0 && *load <= 1) {
			return fmt.Errorf("%w: --load = %v must be in (0, 1] (a fraction of lambda^max = %.6g)", errUsage, *load, lm)
		}
		lam = *load * lm
	case *lambda >= 0:
		if math.IsInf(*lambda, 0) || math.IsNaN(*lambda) {
			return fmt.Errorf("%w: --lambda = %v must be finite", errUsage, *lambda)
		}
		if *lambda > lm {
			return fmt.Errorf("%w: --lambda = %v is above lambda^max = %.6g for a* = %v: no class mix meets the accuracy target at this load (the servers can carry at most %.6g queries per server per time unit at accuracy >= a*)",
				errUsage, *lambda, lm, *astar, lm)
		}
		lam = *lambda
	}
	rel, err := accuracy.SolveRelaxedLP(sys, *astar)
	if err != nil {
		return accUsageErr(err)
	}
	rep.Relaxed, rep.RelaxedT = rel.P, rel.T
	atMax, err := accuracy.SolveLP(sys, *astar, lm)
	if err != nil {
		return accUsageErr(err)
	}
	rep.PStarAtMax = atMax.P
	tuples, err := accuracy.RoutingTuples(sys, *astar)
	if err != nil {
		return accUsageErr(err)
	}
	var wf accuracy.Waterfill
	var sol accuracy.Solution
	if lam >= 0 {
		sol, err = accuracy.SolveLP(sys, *astar, lam)
		if err != nil {
			return accUsageErr(err)
		}
		wf, err = accuracy.Waterfilling(sys, *astar, lam)
		if err != nil {
			return accUsageErr(err)
		}
		ld := lam / lm
		rep.Lambda, rep.Load, rep.TLPLB, rep.NLPLB, rep.PStar, rep.AccLB = &lam, &ld, &sol.T, &sol.N, sol.P, &sol.Acc
		rep.WFP, rep.WFN = wf.P, &wf.N
		if *n > 0 && lam > 0 {
			c := accuracy.PolicyConfig{System: sys, AStar: *astar, N: *n, Lambda: lam, Gamma: -1, D: 1}
			if err := c.Validate(); err != nil {
				return accUsageErr(fmt.Errorf("--n: %w", err))
			}
			p, g, err := accuracy.RJIQProbabilities(c)
			if err != nil {
				return accUsageErr(err)
			}
			rep.RJIQP, rep.RJIQGamma = p, &g
		}
	}
	for ti, t := range tuples {
		tj := planTupleJSON{Set: []int{t.I + 1}, Kind: t.Kind.String(), Q: t.Q, V: t.V}
		if t.J >= 0 {
			tj.Set = append(tj.Set, t.J+1)
		}
		if lam >= 0 {
			w := wf.W[ti]
			tj.Weight = &w
		}
		rep.Tuples = append(rep.Tuples, tj)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printPlanAccuracy(stdout, rep)
	return nil
}

func accFmtVec(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		if math.Abs(x) < 1e-12 { // float residue of an exact zero
			x = 0
		}
		parts[i] = strconv.FormatFloat(x, 'g', 6, 64)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func printPlanAccuracy(w io.Writer, r planAccuracyReport) {
	fmt.Fprintf(w, "system (paper 001 Sec. 2): K=%d  mu=%s  a=%s  alpha=%s  a*=%g\n", len(r.Mu), accFmtVec(r.Mu), accFmtVec(r.A), accFmtVec(r.Alpha), r.AStar)
	fmt.Fprintf(w, "lambda^max (Def. 1)            = %.6g   (capacity without accuracy target sum alpha mu = %.6g)\n", r.LambdaMax, r.Capacity)
	fmt.Fprintf(w, "relaxed LP (eq. 8) / Lemma 3   : p = %s  T = %.6g\n", accFmtVec(r.Relaxed), r.RelaxedT)
	fmt.Fprintf(w, "p*(lambda^max)                 = %s\n", accFmtVec(r.PStarAtMax))
	if r.Lambda != nil {
		fmt.Fprintf(w, "lambda                         = %.6g   (load %.4f of lambda^max)\n", *r.Lambda, *r.Load)
		fmt.Fprintf(w, "T_LP-LB(lambda) (eq. 3)        = %.6g   N_LP-LB = lambda T = %.6g   accuracy p*.a = %.6g\n", *r.TLPLB, *r.NLPLB, *r.AccLB)
		fmt.Fprintf(w, "Waterfilling (Alg. 1)          : N_WF = %.6g   p = %s\n", *r.WFN, accFmtVec(r.WFP))
		if r.RJIQP != nil {
			fmt.Fprintf(w, "R-JIQ (eq. 4), gamma=%-9.4g : p = %s\n", *r.RJIQGamma, accFmtVec(r.RJIQP))
		}
		fmt.Fprintf(w, "\n%-6s %8s %8s %8s %12s %14s %14s %8s\n", "class", "mu", "a", "alpha", "p*(lambda)", "lambda p*", "alpha mu", "util")
		for i := range r.Mu {
			cp := r.Alpha[i] * r.Mu[i]
			tr := *r.Lambda * r.PStar[i]
			if math.Abs(tr) < 1e-12 {
				tr = 0
			}
			fmt.Fprintf(w, "%-6d %8.4g %8.4g %8.4g %12.6f %14.6g %14.6g %8.4f\n", i+1, r.Mu[i], r.A[i], r.Alpha[i], r.PStar[i], tr, cp, tr/cp)
		}
	}
	fmt.Fprintf(w, "\nrouting tuples S*_opt (eq. 11), in cost order:\n")
	fmt.Fprintf(w, "%-3s %-8s %-10s %-36s %10s", "#", "set", "kind", "q", "v")
	if r.Lambda != nil {
		fmt.Fprintf(w, " %12s", "WF weight")
	}
	fmt.Fprintln(w)
	for i, t := range r.Tuples {
		set := make([]string, len(t.Set))
		for j, c := range t.Set {
			set[j] = strconv.Itoa(c)
		}
		fmt.Fprintf(w, "%-3d %-8s %-10s %-36s %10.6g", i+1, "{"+strings.Join(set, ",")+"}", t.Kind, accFmtVec(t.Q), t.V)
		if t.Weight != nil {
			fmt.Fprintf(w, " %12.6g", *t.Weight)
		}
		fmt.Fprintln(w)
	}
}
