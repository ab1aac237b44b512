package scenarios

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Outcome classifies what happened to one request the load generator
// issued. Exactly one applies:
//
//   - OutcomeSkipped: never sent, max_in_flight requests were outstanding.
//   - OutcomeNotAccepted: never delivered to a node's API: no live entry
//     node, or the connection could not be opened or the request not written.
//   - OutcomeResult: accepted, answered with HTTP 200 and a result.
//   - OutcomeError: accepted, answered with an explicit error reply (any
//     HTTP status other than 200, or an unreadable 200 body).
//   - OutcomeLost: accepted (the whole request was written to an open
//     connection of a node's API) but no HTTP reply came back at all: the
//     client timeout expired, or the connection was closed or reset before
//     a status line arrived. This includes requests in flight at an entry
//     node the scenario killed, stopped or paused (causes "entry_killed",
//     "entry_stopped", "entry_paused"): a cut connection is not a reply.
type Outcome int

// The outcomes of a request.
const (
	OutcomeSkipped Outcome = iota
	OutcomeNotAccepted
	OutcomeResult
	OutcomeError
	OutcomeLost
)

// Sample is what the load client recorded for one request.
type Sample struct {
	// Start is the send time, relative to the start of the load.
	Start time.Duration
	// Entry is the node the request was sent to ("" if none was live).
	Entry string
	// Task is the requested task.
	Task string
	// Outcome says how the request ended.
	Outcome Outcome
	// Kind is the error kind (OutcomeError, from the reply's "kind"), the
	// reason (OutcomeNotAccepted) or the cause (OutcomeLost).
	Kind string
	// Latency is the time from send to the reply (results and errors).
	Latency time.Duration
	// Vertex, Node and Model say who served a result.
	Vertex, Node, Model string
	// Accuracy is the serving model's accuracy; Correct the emulated outcome.
	Accuracy float64
	// Correct is whether the emulated model got this request right.
	Correct bool
	// Slot and Type are the load slot and request type of an infida
	// workload request (0 otherwise).
	Slot, Type int
}

// Percentiles are latency percentiles in milliseconds.
type Percentiles struct {
	// P50, P95, P99 are nearest-rank percentiles.
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
	// Mean and Max complete the picture.
	Mean float64 `json:"mean"`
	Max  float64 `json:"max"`
}

// Second counts the requests sent during one second of the load.
type Second struct {
	// S is the second (0 = the first second of load).
	S int `json:"s"`
	// Sent, Results, Errors and Lost count the requests sent in that second
	// by outcome (skipped and not accepted ones are in Sent only).
	Sent    int `json:"sent"`
	Results int `json:"results"`
	Errors  int `json:"errors"`
	Lost    int `json:"lost"`
	// P99Ms is the 99th percentile latency of its results.
	P99Ms float64 `json:"p99_ms"`
}

// Failover is one leader kill and the election that followed.
type Failover struct {
	// Vertex is the vertex whose leader was killed.
	Vertex string `json:"vertex"`
	// Killed is the leader that was killed, stopped or paused; NewLeader
	// the node that reported is_leader afterwards ("" if none within
	// timeouts.failover).
	Killed    string `json:"killed"`
	NewLeader string `json:"new_leader"`
	// Fault is the signal that hit the leader: SIGKILL, SIGTERM or SIGSTOP.
	Fault string `json:"fault"`
	// KilledAtS is the fault time in seconds from the start of the load.
	KilledAtS float64 `json:"killed_at_s"`
	// ElectedAfterS is the time from the signal until another node of the
	// vertex answered /v1/status with is_leader true (polled every 25 ms;
	// the time the reply arrived, so an upper bound); null when missed.
	ElectedAfterS *float64 `json:"elected_after_s"`
}

// FaultRecord is one fault as applied.
type FaultRecord struct {
	// Action, Node and Vertex describe the fault; Node is the node actually hit.
	Action string `json:"action"`
	Node   string `json:"node,omitempty"`
	Vertex string `json:"vertex,omitempty"`
	// AtS is the scheduled time, AppliedAtS the time it took effect (s).
	AtS        float64 `json:"at_s"`
	AppliedAtS float64 `json:"applied_at_s"`
	// Error is why the fault could not be applied ("" when it was).
	Error string `json:"error,omitempty"`
}

// NodeReport is one node at the end of the run.
type NodeReport struct {
	// Name, Vertex and the address of its API (last incarnation).
	Name   string `json:"name"`
	Vertex string `json:"vertex"`
	API    string `json:"api"`
	// PID is the process id of the last incarnation.
	PID int `json:"pid"`
	// Starts counts incarnations (1 + restarts); Killed counts SIGKILLs.
	Starts int `json:"starts"`
	Killed int `json:"killed"`
	// AliveAtEnd, IsLeaderAtEnd and Members come from /v1/status at the end.
	AliveAtEnd    bool `json:"alive_at_end"`
	IsLeaderAtEnd bool `json:"is_leader_at_end"`
	Members       int  `json:"members_at_end"`
	// Metrics are selected /metrics sums at the end (counters restart with
	// the process, so a restarted node counts since its restart).
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Error is why status or metrics could not be read.
	Error string `json:"error,omitempty"`
}

// AssertionResult is one checked assertion.
type AssertionResult struct {
	// Expr is the assertion as written, Value the metric's value.
	Expr  string `json:"expr"`
	Value string `json:"value"`
	// OK is whether it held.
	OK bool `json:"ok"`
}

// Report is the outcome of a scenario run; it is also the JSON report.
type Report struct {
	// Scenario is the scenario name; DurationS the load duration.
	Scenario  string  `json:"scenario"`
	DurationS float64 `json:"duration_s"`
	// RateRPS is the configured mean rate.
	RateRPS float64 `json:"rate_rps"`
	// Sent, Skipped and NotAccepted (by reason) are the requests that were
	// issued, never sent, and never delivered; see Outcome.
	Sent        int            `json:"sent"`
	Skipped     int            `json:"skipped"`
	NotAccepted map[string]int `json:"not_accepted"`
	// Accepted = Results + Errors + Lost.
	Accepted int `json:"accepted"`
	// Results are replies with a result.
	Results int `json:"results"`
	// Errors are explicit error replies; ErrorsByKind splits them.
	Errors       int            `json:"errors"`
	ErrorsByKind map[string]int `json:"errors_by_kind"`
	// Lost = Accepted - (Results + Errors): accepted, never replied to.
	Lost int `json:"lost"`
	// LostByCause splits Lost: timeout, conn_closed, entry_killed,
	// entry_stopped, entry_paused, aborted.
	LostByCause map[string]int `json:"lost_by_cause"`
	// ResultRatio = Results / Accepted (1 when nothing was accepted).
	ResultRatio float64 `json:"result_ratio"`
	// LatencyMs are client latencies of results.
	LatencyMs Percentiles `json:"latency_ms"`
	// MeanAccuracy is the mean accuracy of the serving models over results;
	// CorrectRatio the fraction the emulated models got right.
	MeanAccuracy float64 `json:"mean_accuracy"`
	CorrectRatio float64 `json:"correct_ratio"`
	// ServedBy counts results per serving vertex, ServedByNode per node.
	ServedBy     map[string]int `json:"served_by"`
	ServedByNode map[string]int `json:"served_by_node"`
	// VertexLatencyMs are per serving vertex result latencies.
	VertexLatencyMs map[string]Percentiles `json:"vertex_latency_ms"`
	// Timeline buckets the requests by the second they were sent in, so the
	// impact of each fault is visible.
	Timeline []Second `json:"timeline"`
	// Failovers are the leader kills and elections.
	Failovers []Failover `json:"failovers"`
	// Leaders is every vertex's leadership timeline during the load (the
	// first entry is the leader at the start); changes beyond the failovers
	// are elections no fault caused directly.
	Leaders map[string][]LeaderChange `json:"leaders"`
	// Faults are the applied faults.
	Faults []FaultRecord `json:"faults"`
	// ConvergedAtEnd is true when, after the load, every live node was
	// ready, saw all live nodes and every vertex had one agreed leader
	// (waited for up to 10 s); EndProblems says what was missing.
	ConvergedAtEnd bool     `json:"converged_at_end"`
	EndProblems    []string `json:"end_problems"`
	// ServerRequests and ServerReplies sum idn_requests_total and
	// idn_replies_total over the nodes alive at the end that never
	// restarted (their counters cover the whole run); ServerUnreplied is
	// their difference: requests a node took and never answered.
	ServerRequests  int `json:"server_requests"`
	ServerReplies   int `json:"server_replies"`
	ServerUnreplied int `json:"server_unreplied"`
	// Nodes is the state of every node at the end.
	Nodes []NodeReport `json:"nodes"`
	// Infida is the INFIDA comparison of an infida scenario (NTAG, MU,
	// control traffic, y^v checks).
	Infida *InfidaReport `json:"infida,omitempty"`
	// Assertions are the checked assertions; Passed is true when all held
	// and every fault was applied.
	Assertions []AssertionResult `json:"assertions"`
	Passed     bool              `json:"passed"`
}

// Summarize computes the request part of a report from the samples.
func Summarize(samples []Sample) *Report {
	r := &Report{
		NotAccepted:     map[string]int{},
		ErrorsByKind:    map[string]int{},
		LostByCause:     map[string]int{},
		ServedBy:        map[string]int{},
		ServedByNode:    map[string]int{},
		VertexLatencyMs: map[string]Percentiles{},
		Timeline:        []Second{},
		Failovers:       []Failover{},
		Leaders:         map[string][]LeaderChange{},
		Faults:          []FaultRecord{},
		Nodes:           []NodeReport{},
		Assertions:      []AssertionResult{},
		EndProblems:     []string{},
	}
	var lat []time.Duration
	perVertex := map[string][]time.Duration{}
	var secLat [][]time.Duration
	var accSum float64
	correct := 0
	for _, s := range samples {
		r.Sent++
		sec := max(0, int(s.Start/time.Second))
		for len(r.Timeline) <= sec {
			r.Timeline = append(r.Timeline, Second{S: len(r.Timeline)})
			secLat = append(secLat, nil)
		}
		r.Timeline[sec].Sent++
		switch s.Outcome {
		case OutcomeResult:
			r.Timeline[sec].Results++
			secLat[sec] = append(secLat[sec], s.Latency)
		case OutcomeError:
			r.Timeline[sec].Errors++
		case OutcomeLost:
			r.Timeline[sec].Lost++
		}
		switch s.Outcome {
		case OutcomeSkipped:
			r.Skipped++
		case OutcomeNotAccepted:
			r.NotAccepted[s.Kind]++
		case OutcomeResult:
			r.Results++
			lat = append(lat, s.Latency)
			perVertex[s.Vertex] = append(perVertex[s.Vertex], s.Latency)
			r.ServedBy[s.Vertex]++
			r.ServedByNode[s.Node]++
			accSum += s.Accuracy
			if s.Correct {
				correct++
			}
		case OutcomeError:
			r.Errors++
			r.ErrorsByKind[s.Kind]++
		case OutcomeLost:
			r.Lost++
			r.LostByCause[s.Kind]++
		}
	}
	r.Accepted = r.Results + r.Errors + r.Lost
	r.ResultRatio = 1
	if r.Accepted > 0 {
		r.ResultRatio = float64(r.Results) / float64(r.Accepted)
	}
	if r.Results > 0 {
		r.MeanAccuracy = accSum / float64(r.Results)
		r.CorrectRatio = float64(correct) / float64(r.Results)
	}
	r.LatencyMs = percentiles(lat)
	for i, l := range secLat {
		r.Timeline[i].P99Ms = percentiles(l).P99
	}
	for v, l := range perVertex {
		r.VertexLatencyMs[v] = percentiles(l)
	}
	return r
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// sorted, or 0 when it is empty.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = max(1, min(rank, len(sorted)))
	return sorted[rank-1]
}

func percentiles(l []time.Duration) Percentiles {
	if len(l) == 0 {
		return Percentiles{}
	}
	s := append([]time.Duration(nil), l...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return Percentiles{
		P50: ms(Percentile(s, 50)), P95: ms(Percentile(s, 95)), P99: ms(Percentile(s, 99)),
		Mean: ms(sum / time.Duration(len(s))), Max: ms(s[len(s)-1]),
	}
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

// WriteJSON writes r as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// WriteText writes the human-readable report.
func (r *Report) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	p := ew.printf
	p("IDN scenario %q: %.0fs of load at %.1f req/s\n\n", r.Scenario, r.DurationS, r.RateRPS)
	p("requests   sent %d, skipped %d, not accepted %d\n", r.Sent, r.Skipped, sumCounts(r.NotAccepted))
	p("           accepted %d = results %d + errors %d + lost %d\n", r.Accepted, r.Results, r.Errors, r.Lost)
	p("           result ratio %.4f\n", r.ResultRatio)
	p("latency    p50 %.1f ms, p95 %.1f ms, p99 %.1f ms (mean %.1f, max %.1f; results only, client side)\n",
		r.LatencyMs.P50, r.LatencyMs.P95, r.LatencyMs.P99, r.LatencyMs.Mean, r.LatencyMs.Max)
	p("accuracy   mean model accuracy %.4f, correct %.4f\n", r.MeanAccuracy, r.CorrectRatio)
	p("server     nodes' own counters (never-restarted nodes): requests %d, replies %d, unreplied %d\n",
		r.ServerRequests, r.ServerReplies, r.ServerUnreplied)
	p("\nserved by:\n")
	tw := tabwriter.NewWriter(ew, 2, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "  vertex\tresults\tshare\tp50 ms\tp99 ms\n")
	for _, v := range sortedByCount(r.ServedBy) {
		pc := r.VertexLatencyMs[v]
		fmt.Fprintf(tw, "  %s\t%d\t%.1f%%\t%.1f\t%.1f\n", v, r.ServedBy[v], 100*float64(r.ServedBy[v])/float64(max(1, r.Results)), pc.P50, pc.P99)
	}
	_ = tw.Flush()
	p("\nerrors by kind:%s\n", countsLine(r.ErrorsByKind))
	p("lost by cause: %s\n", countsLine(r.LostByCause))
	if len(r.NotAccepted) > 0 {
		p("not accepted:  %s\n", countsLine(r.NotAccepted))
	}
	var bad []string
	for _, sec := range r.Timeline {
		if sec.Errors > 0 || sec.Lost > 0 {
			bad = append(bad, fmt.Sprintf("%ds: %d/%d", sec.S, sec.Errors+sec.Lost, sec.Sent))
		}
	}
	if len(bad) > 0 {
		p("errors+lost by second sent (of sent): %s\n", strings.Join(bad, ", "))
	}
	p("\nfaults:\n")
	if len(r.Faults) == 0 {
		p("  none\n")
	}
	for _, f := range r.Faults {
		target := f.Node
		if f.Vertex != "" {
			target = fmt.Sprintf("%s (leader of %s)", f.Node, f.Vertex)
		}
		status := "ok"
		if f.Error != "" {
			status = "FAILED: " + f.Error
		}
		p("  %6.1fs %-12s %s  applied at %.1fs  %s\n", f.AtS, f.Action, target, f.AppliedAtS, status)
	}
	p("\nfailovers:\n")
	if len(r.Failovers) == 0 {
		p("  none\n")
	}
	for _, f := range r.Failovers {
		if f.ElectedAfterS == nil {
			p("  %s: leader %s hit by %s at %.1fs, NO new leader seen\n", f.Vertex, f.Killed, f.Fault, f.KilledAtS)
			continue
		}
		p("  %s: leader %s hit by %s at %.1fs, %s elected after %.3fs\n", f.Vertex, f.Killed, f.Fault, f.KilledAtS, f.NewLeader, *f.ElectedAfterS)
	}
	p("\nleaders during the load:\n")
	for _, v := range sortedKeys(r.Leaders) {
		var b strings.Builder
		for i, ch := range r.Leaders[v] {
			if i > 0 {
				b.WriteString(" -> ")
			}
			l := ch.Leader
			if l == "" {
				l = "(none)"
			}
			fmt.Fprintf(&b, "%s @%.1fs", l, ch.AtS)
		}
		p("  %-6s %s\n", v, b.String())
	}
	p("\nnodes at the end (cluster converged: %v):\n", r.ConvergedAtEnd)
	for _, e := range r.EndProblems {
		p("  ! %s\n", e)
	}
	tw = tabwriter.NewWriter(ew, 2, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "  node\tvertex\tstarts\talive\tleader\tmembers\trequests\treplies\tserved\t\n")
	for _, n := range r.Nodes {
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%v\t%v\t%d\t%s\t%s\t%s\t%s\n", n.Name, n.Vertex, n.Starts, n.AliveAtEnd, n.IsLeaderAtEnd, n.Members,
			metricCell(n.Metrics, "idn_requests_total"), metricCell(n.Metrics, "idn_replies_total"), metricCell(n.Metrics, "idn_served_total"), n.Error)
	}
	_ = tw.Flush()
	if r.Infida != nil {
		r.Infida.writeText(ew)
	}
	p("\nassertions:\n")
	if len(r.Assertions) == 0 {
		p("  none\n")
	}
	for _, a := range r.Assertions {
		mark := "PASS"
		if !a.OK {
			mark = "FAIL"
		}
		p("  %s  %s  (value %s)\n", mark, a.Expr, a.Value)
	}
	if r.Passed {
		p("\nresult: PASS\n")
	} else {
		p("\nresult: FAIL\n")
	}
	return ew.err
}

func metricCell(m map[string]float64, name string) string {
	v, ok := m[name]
	if !ok {
		return "-"
	}
	return formatFloat(v)
}

func countsLine(m map[string]int) string {
	if len(m) == 0 {
		return " none"
	}
	var b strings.Builder
	for _, k := range sortedByCount(m) {
		fmt.Fprintf(&b, " %s=%d", k, m[k])
	}
	return b.String()
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(b []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(b)
	if err != nil {
		e.err = fmt.Errorf("report: %w", err)
	}
	return n, err
}

func (e *errWriter) printf(format string, a ...any) { fmt.Fprintf(e, format, a...) }

// sumServerCounters fills the Server* fields from r.Nodes.
func (r *Report) sumServerCounters() {
	r.ServerRequests, r.ServerReplies = 0, 0
	for _, n := range r.Nodes {
		if n.Starts != 1 || !n.AliveAtEnd || n.Metrics == nil {
			continue
		}
		r.ServerRequests += int(n.Metrics["idn_requests_total"])
		r.ServerReplies += int(n.Metrics["idn_replies_total"])
	}
	r.ServerUnreplied = r.ServerRequests - r.ServerReplies
}
