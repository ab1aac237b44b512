package scenarios

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// ErrAssertionFailed is wrapped by the error Run returns when the run went
// through but an assertion (or a fault) failed; the report is still valid.
var ErrAssertionFailed = errors.New("scenario assertion failed")

// AssertionMetrics lists the metric names an assertion can test, with what
// they mean. "errors.<kind>" tests the count of one error kind.
var AssertionMetrics = map[string]string{
	"sent":             "requests the load generator issued",
	"skipped":          "arrivals not sent because max_in_flight requests were outstanding",
	"not_accepted":     "requests never delivered to a node's API (no live entry node, connection refused)",
	"accepted":         "requests delivered to a node's API",
	"results":          "accepted requests answered with a result",
	"errors":           "accepted requests answered with an explicit error",
	"lost":             "accepted requests with no reply at all (accepted - results - errors)",
	"result_ratio":     "results / accepted (1 when nothing was accepted)",
	"p50_ms":           "median client latency of results, ms",
	"p95_ms":           "95th percentile client latency of results, ms",
	"p99_ms":           "99th percentile client latency of results, ms",
	"mean_accuracy":    "mean accuracy of the models that served the results",
	"correct_ratio":    "fraction of results the emulated model got right",
	"served_vertices":  "number of vertices that served at least one result",
	"failovers":        "leader kills after which a new leader was seen",
	"failover_missed":  "leader kills after which no new leader was seen within timeouts.failover",
	"failover_max_s":   "slowest failover in seconds (+Inf if one was missed, 0 if none)",
	"fault_errors":     "faults that could not be applied",
	"leader_changes":   "times a vertex got a leader other than its previous one during the load, over all vertices (a failover counts 1)",
	"server_unreplied": "idn_requests_total - idn_replies_total summed over the never-restarted nodes alive at the end",
	"converged_at_end": "1 when the cluster converged again after the load (every live node ready, seeing all, one leader per vertex), else 0",

	"infida_live_ntag":        "infida: live NTAG (paper 000 eq. 23) over the last third of the load slots (NaN without infida)",
	"infida_sim_ntag":         "infida: the slot simulator's NTAG over the same slots",
	"infida_ntag_ratio":       "infida: infida_live_ntag / infida_sim_ntag (0 when the simulator's is 0)",
	"infida_within_10pct":     "infida: 1 when |infida_ntag_ratio - 1| <= 0.1, else 0",
	"infida_live_mu":          "infida: live model updates (eq. 24), MB per slot over all load slots",
	"infida_sim_mu":           "infida: the simulator's MU, MB per slot",
	"infida_y_preserved":      "infida: 1 when there was at least one leader-kill y^v check and the new leader restored exactly the y^v of the last committed slot every time, else 0",
	"infida_y_max_diff":       "infida: largest |restored_y - recorded y^v| over the y^v checks (NaN when none compared)",
	"infida_error_replies":    "infida: error replies to infida requests (they count gain 0)",
	"infida_control_timeouts": "infida: idn_control_timeouts_total summed over all vertices",
}

type assertion struct {
	expr   string
	metric string
	op     string
	value  float64
}

var ops = []string{"==", "!=", ">=", "<=", ">", "<"}

func parseAssertion(s string) (assertion, error) {
	s = strings.TrimSpace(s)
	for _, op := range ops {
		i := strings.Index(s, op)
		if i < 0 {
			continue
		}
		metric := strings.TrimSpace(s[:i])
		rhs := strings.TrimSpace(s[i+len(op):])
		if _, ok := AssertionMetrics[metric]; !ok && !strings.HasPrefix(metric, "errors.") {
			return assertion{}, fmt.Errorf("unknown metric %q (known: %s, errors.<kind>)", metric, strings.Join(sortedKeys(AssertionMetrics), ", "))
		}
		v, err := strconv.ParseFloat(rhs, 64)
		if err != nil || math.IsNaN(v) {
			return assertion{}, fmt.Errorf("right-hand side %q is not a number", rhs)
		}
		return assertion{expr: s, metric: metric, op: op, value: v}, nil
	}
	return assertion{}, fmt.Errorf("want \"metric OP number\" with OP one of %s", strings.Join(ops, " "))
}

func (a assertion) holds(x float64) bool {
	switch a.op {
	case "==":
		return x == a.value
	case "!=":
		return x != a.value
	case ">=":
		return x >= a.value
	case "<=":
		return x <= a.value
	case ">":
		return x > a.value
	default:
		return x < a.value
	}
}

// Metric returns the value of an assertion metric (see AssertionMetrics)
// computed from r, and whether the name is known.
func (r *Report) Metric(name string) (float64, bool) {
	switch name {
	case "sent":
		return float64(r.Sent), true
	case "skipped":
		return float64(r.Skipped), true
	case "not_accepted":
		return float64(sumCounts(r.NotAccepted)), true
	case "accepted":
		return float64(r.Accepted), true
	case "results":
		return float64(r.Results), true
	case "errors":
		return float64(r.Errors), true
	case "lost":
		return float64(r.Lost), true
	case "result_ratio":
		return r.ResultRatio, true
	case "p50_ms":
		return r.LatencyMs.P50, true
	case "p95_ms":
		return r.LatencyMs.P95, true
	case "p99_ms":
		return r.LatencyMs.P99, true
	case "mean_accuracy":
		return r.MeanAccuracy, true
	case "correct_ratio":
		return r.CorrectRatio, true
	case "served_vertices":
		return float64(len(r.ServedBy)), true
	case "failovers", "failover_missed", "failover_max_s":
		var ok, missed int
		maxS := 0.0
		for _, f := range r.Failovers {
			if f.ElectedAfterS == nil {
				missed++
				continue
			}
			ok++
			maxS = math.Max(maxS, *f.ElectedAfterS)
		}
		switch name {
		case "failovers":
			return float64(ok), true
		case "failover_missed":
			return float64(missed), true
		}
		if missed > 0 {
			return math.Inf(1), true
		}
		return maxS, true
	case "leader_changes":
		n := 0
		for _, tl := range r.Leaders {
			last := ""
			for _, ch := range tl {
				if ch.Leader != "" && last != "" && ch.Leader != last {
					n++
				}
				if ch.Leader != "" {
					last = ch.Leader
				}
			}
		}
		return float64(n), true
	case "converged_at_end":
		if r.ConvergedAtEnd {
			return 1, true
		}
		return 0, true
	case "server_unreplied":
		return float64(r.ServerUnreplied), true
	case "fault_errors":
		n := 0
		for _, f := range r.Faults {
			if f.Error != "" {
				n++
			}
		}
		return float64(n), true
	}
	if strings.HasPrefix(name, "infida_") {
		if _, known := AssertionMetrics[name]; known {
			return r.infidaMetric(name), true
		}
	}
	if kind, ok := strings.CutPrefix(name, "errors."); ok {
		return float64(r.ErrorsByKind[kind]), true
	}
	return 0, false
}

// Check evaluates the assertions on r, fills r.Assertions and r.Passed, and
// returns an error wrapping ErrAssertionFailed naming the failures. A fault
// that could not be applied fails the run even without an assertion.
func (r *Report) Check(sc *Scenario) error {
	r.Assertions = r.Assertions[:0]
	var failed []string
	for _, a := range sc.checks {
		v, _ := r.Metric(a.metric)
		ok := a.holds(v)
		r.Assertions = append(r.Assertions, AssertionResult{Expr: a.expr, Value: formatFloat(v), OK: ok})
		if !ok {
			failed = append(failed, fmt.Sprintf("%s (got %s)", a.expr, formatFloat(v)))
		}
	}
	for _, f := range r.Faults {
		if f.Error != "" {
			failed = append(failed, fmt.Sprintf("fault %s at %.1fs: %s", f.Action, f.AtS, f.Error))
		}
	}
	r.Passed = len(failed) == 0
	if !r.Passed {
		return fmt.Errorf("%w: %s", ErrAssertionFailed, strings.Join(failed, "; "))
	}
	return nil
}

func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

func sumCounts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// sortedByCount returns m's keys by decreasing count, then name.
func sortedByCount(m map[string]int) []string {
	keys := sortedKeys(m)
	sort.SliceStable(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
	return keys
}

// infidaMetric returns an infida_ assertion metric (NaN without an infida
// report).
func (r *Report) infidaMetric(name string) float64 {
	f := r.Infida
	if f == nil {
		return math.NaN()
	}
	b := func(ok bool) float64 {
		if ok {
			return 1
		}
		return 0
	}
	switch name {
	case "infida_live_ntag":
		return f.LiveNTAG
	case "infida_sim_ntag":
		return f.SimNTAG
	case "infida_ntag_ratio":
		return f.Ratio
	case "infida_within_10pct":
		return b(f.Within10Pct)
	case "infida_live_mu":
		return f.LiveMU
	case "infida_sim_mu":
		return f.SimMU
	case "infida_y_preserved":
		ok := len(f.YChecks) > 0
		for _, y := range f.YChecks {
			ok = ok && y.Preserved
		}
		return b(ok)
	case "infida_y_max_diff":
		d := math.NaN()
		for _, y := range f.YChecks {
			if !y.Recorded {
				continue
			}
			v := y.MaxAbsDiff
			if v < 0 { // lengths differed
				v = math.Inf(1)
			}
			if math.IsNaN(d) || v > d {
				d = v
			}
		}
		return d
	case "infida_error_replies":
		return float64(f.Live.Errors)
	case "infida_control_timeouts":
		t := 0.0
		for _, c := range f.Control {
			t += c.Timeouts
		}
		return t
	}
	return math.NaN()
}
