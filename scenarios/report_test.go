package scenarios

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 100; i++ {
		s = append(s, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {95, 95 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {0.1, time.Millisecond}} {
		if got := Percentile(s, c.p); got != c.want {
			t.Errorf("p%v = %s, want %s", c.p, got, c.want)
		}
	}
	if got := Percentile([]time.Duration{7}, 99); got != 7 {
		t.Errorf("single = %s", got)
	}
	if got := Percentile(nil, 50); got != 0 {
		t.Errorf("empty = %s", got)
	}
	// Nearest rank on 10 values: p95 -> rank ceil(9.5) = 10.
	if got := Percentile(s[:10], 95); got != 10*time.Millisecond {
		t.Errorf("p95 of 10 = %s", got)
	}
}

func synthetic() []Sample {
	var s []Sample
	for i := 0; i < 90; i++ { // 90 results, latencies 1..90 ms, 60 at bs-0, 30 at cloud
		v, acc := "bs-0", 0.4
		if i%3 == 2 {
			v, acc = "cloud", 0.7
		}
		s = append(s, Sample{Outcome: OutcomeResult, Latency: time.Duration(i+1) * time.Millisecond, Vertex: v, Node: v + "-n1", Accuracy: acc, Correct: i%2 == 0})
	}
	for i := 0; i < 4; i++ {
		s = append(s, Sample{Outcome: OutcomeError, Kind: "deadline_exceeded", Latency: time.Second})
	}
	s = append(s,
		Sample{Outcome: OutcomeError, Kind: "unreachable"},
		Sample{Outcome: OutcomeLost, Kind: "timeout"},
		Sample{Outcome: OutcomeLost, Kind: "entry_killed"},
		Sample{Outcome: OutcomeNotAccepted, Kind: "connect"},
		Sample{Outcome: OutcomeNotAccepted, Kind: "no_live_entry"},
		Sample{Outcome: OutcomeSkipped, Kind: "max_in_flight"},
	)
	return s
}

func TestSummarizeAccounting(t *testing.T) {
	r := Summarize(synthetic())
	if r.Sent != 100 || r.Skipped != 1 || sumCounts(r.NotAccepted) != 2 {
		t.Errorf("sent %d skipped %d not accepted %v", r.Sent, r.Skipped, r.NotAccepted)
	}
	// Skipped and not-accepted requests never reached an API: not accepted.
	if r.Accepted != 97 || r.Results != 90 || r.Errors != 5 || r.Lost != 2 {
		t.Errorf("accepted %d results %d errors %d lost %d", r.Accepted, r.Results, r.Errors, r.Lost)
	}
	if r.Accepted != r.Results+r.Errors+r.Lost {
		t.Error("accepted != results + errors + lost")
	}
	if r.ErrorsByKind["deadline_exceeded"] != 4 || r.ErrorsByKind["unreachable"] != 1 {
		t.Errorf("errors by kind %v", r.ErrorsByKind)
	}
	if r.LostByCause["timeout"] != 1 || r.LostByCause["entry_killed"] != 1 {
		t.Errorf("lost by cause %v", r.LostByCause)
	}
	if math.Abs(r.ResultRatio-90.0/97) > 1e-12 {
		t.Errorf("result ratio %v", r.ResultRatio)
	}
	// Latencies are over results only: 1..90 ms.
	if r.LatencyMs.P50 != 45 || r.LatencyMs.P95 != 86 || r.LatencyMs.P99 != 90 || r.LatencyMs.Max != 90 || r.LatencyMs.Mean != 45.5 {
		t.Errorf("latency %+v", r.LatencyMs)
	}
	if math.Abs(r.MeanAccuracy-0.5) > 1e-12 || r.CorrectRatio != 0.5 {
		t.Errorf("accuracy %v correct %v", r.MeanAccuracy, r.CorrectRatio)
	}
	if len(r.Timeline) != 1 || r.Timeline[0].Sent != 100 || r.Timeline[0].Results != 90 || r.Timeline[0].Errors != 5 || r.Timeline[0].Lost != 2 {
		t.Errorf("timeline %+v", r.Timeline)
	}
	if r.ServedBy["bs-0"] != 60 || r.ServedBy["cloud"] != 30 || len(r.ServedBy) != 2 || r.ServedByNode["cloud-n1"] != 30 {
		t.Errorf("served by %v / %v", r.ServedBy, r.ServedByNode)
	}
}

func TestSummarizeEmpty(t *testing.T) {
	r := Summarize(nil)
	if r.Accepted != 0 || r.ResultRatio != 1 || r.LatencyMs != (Percentiles{}) {
		t.Errorf("%+v", r)
	}
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"failovers": []`) || !strings.Contains(b.String(), `"served_by": {}`) {
		t.Errorf("empty collections must encode as [] / {}:\n%s", b.String())
	}
}

func checkScenario(t *testing.T, asserts ...string) *Scenario {
	t.Helper()
	y := "name: t\nworkload: {rate: 1, duration: 10s, tasks: {task-00: 1}}\nassertions:\n"
	for _, a := range asserts {
		y += "  - " + a + "\n"
	}
	sc, err := Parse([]byte(y), "")
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func TestCheckAssertions(t *testing.T) {
	r := Summarize(synthetic())
	d := 1.5
	r.Failovers = []Failover{{Vertex: "dc-0", Killed: "dc-0-n1", NewLeader: "dc-0-n2", ElectedAfterS: &d}}
	sc := checkScenario(t, "lost <= 2", "result_ratio >= 0.9", "failover_max_s <= 5", "failovers == 1", "served_vertices >= 2", "errors.unreachable == 1", "p99_ms < 100")
	if err := r.Check(sc); err != nil {
		t.Fatal(err)
	}
	if !r.Passed || len(r.Assertions) != 7 {
		t.Errorf("passed %v, %d assertions", r.Passed, len(r.Assertions))
	}

	sc = checkScenario(t, "lost == 0", "failover_max_s <= 5", "served_vertices >= 3")
	r.Failovers = append(r.Failovers, Failover{Vertex: "dc-0", Killed: "dc-0-n2"}) // missed
	err := r.Check(sc)
	if !errors.Is(err, ErrAssertionFailed) || r.Passed {
		t.Fatalf("err %v passed %v", err, r.Passed)
	}
	for _, want := range []string{"lost == 0 (got 2)", "failover_max_s <= 5 (got +Inf)", "served_vertices >= 3 (got 2)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if v, _ := r.Metric("failover_missed"); v != 1 {
		t.Errorf("failover_missed = %v", v)
	}
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil { // +Inf must not break the JSON
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"accepted", "results", "errors", "lost", "latency_ms", "mean_accuracy", "served_by", "failovers"} {
		if _, ok := back[k]; !ok {
			t.Errorf("JSON report lacks %q", k)
		}
	}
	fo := back["failovers"].([]any)
	if fo[0].(map[string]any)["elected_after_s"] != 1.5 || fo[1].(map[string]any)["elected_after_s"] != nil {
		t.Errorf("failovers %v", fo)
	}
}

func TestFaultErrorFailsRun(t *testing.T) {
	r := Summarize(nil)
	r.Faults = []FaultRecord{{Action: ActionKillLeader, Vertex: "dc-0", AtS: 20, Error: "vertex dc-0: no live node reports is_leader"}}
	if err := r.Check(checkScenario(t)); !errors.Is(err, ErrAssertionFailed) || !strings.Contains(err.Error(), "no live node reports is_leader") {
		t.Errorf("err = %v", err)
	}
}

func TestWriteText(t *testing.T) {
	r := Summarize(synthetic())
	d := 0.42
	r.Scenario = "t"
	r.Failovers = []Failover{{Vertex: "dc-0", Killed: "dc-0-n1", NewLeader: "dc-0-n2", KilledAtS: 20, ElectedAfterS: &d}}
	r.Nodes = []NodeReport{{Name: "bs-0-n1", Vertex: "bs-0", Starts: 1, AliveAtEnd: true, Metrics: map[string]float64{"idn_requests_total": 12}}}
	_ = r.Check(checkScenario(t, "lost == 0"))
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"accepted 97 = results 90 + errors 5 + lost 2", "p50 45.0 ms, p95 86.0 ms, p99 90.0 ms", "bs-0", "66.7%",
		"deadline_exceeded=4", "timeout=1", "dc-0-n2 elected after 0.420s", "FAIL  lost == 0", "result: FAIL"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestParseMetrics(t *testing.T) {
	text := `# HELP idn_requests_total requests
# TYPE idn_requests_total counter
idn_requests_total 120
idn_replies_total{result="ok"} 100
idn_replies_total{result="error"} 20
idn_served_total{vertex="bs-0",model="m{1}"} 60
idn_served_total{vertex="cloud",model="m2"} 40
idn_request_latency_seconds_bucket{le="0.1"} 3
idn_is_leader{vertex="dc-0"} 1
garbage line
idn_members NaN
`
	m := parseMetrics([]byte(text), reportedMetrics)
	if m["idn_requests_total"] != 120 || m["idn_replies_total"] != 120 || m[`idn_replies_total{result="error"}`] != 20 ||
		m["idn_served_total"] != 100 || m["idn_is_leader"] != 1 {
		t.Errorf("%v", m)
	}
	if _, ok := m["idn_request_latency_seconds_bucket"]; ok {
		t.Error("kept an unwanted family")
	}
	if _, ok := m["idn_members"]; ok {
		t.Error("kept NaN")
	}
	for k := range m {
		if strings.HasPrefix(k, "idn_served_total{") {
			t.Errorf("kept per-model series %s", k)
		}
	}
}

func TestArrivals(t *testing.T) {
	w := Workload{Rate: 50, Duration: Duration(20 * time.Second), Arrivals: ArrivalsPoisson, Seed: 3}
	a := arrivals(w)
	if n := len(a); n < 900 || n > 1100 {
		t.Errorf("poisson: %d arrivals in 20 s at 50/s", n)
	}
	for i := 1; i < len(a); i++ {
		if a[i] < a[i-1] || a[i] >= 20*time.Second {
			t.Fatalf("arrival %d at %s", i, a[i])
		}
	}
	b := arrivals(w)
	if len(a) != len(b) || a[len(a)-1] != b[len(b)-1] {
		t.Error("arrivals not deterministic for a seed")
	}
	w.Arrivals = ArrivalsConstant
	if c := arrivals(w); len(c) != 1000 || c[1] != 20*time.Millisecond {
		t.Errorf("constant: %d arrivals, second at %s", len(c), c[1])
	}
	p := newTaskPicker(Workload{Seed: 1, Tasks: map[string]float64{"a": 3, "b": 1}})
	count := map[string]int{}
	for i := 0; i < 4000; i++ {
		count[p.pick()]++
	}
	if count["a"] < 2800 || count["a"] > 3200 || count["a"]+count["b"] != 4000 {
		t.Errorf("task mix %v", count)
	}
}
