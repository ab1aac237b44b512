package node

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// latencyBuckets are the upper bounds (seconds) of idn_request_latency_seconds.
var latencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// Metrics are the node's Prometheus counters, written by hand in the text format.
type Metrics struct {
	requests      atomic.Uint64
	repliesOK     atomic.Uint64
	repliesErr    atomic.Uint64
	correct       atomic.Uint64
	leaderChanges atomic.Uint64

	mu      sync.Mutex
	served  map[[2]string]uint64 // {vertex, model}
	errors  map[string]uint64    // kind
	buckets []uint64
	count   uint64
	sum     float64
}

func newMetrics() *Metrics {
	return &Metrics{served: map[[2]string]uint64{}, errors: map[string]uint64{}, buckets: make([]uint64, len(latencyBuckets))}
}

func (m *Metrics) observe(ok bool, vertex, model, errKind string, correct bool, lat time.Duration) {
	if ok {
		m.repliesOK.Add(1)
		if correct {
			m.correct.Add(1)
		}
	} else {
		m.repliesErr.Add(1)
	}
	s := lat.Seconds()
	i := sort.SearchFloat64s(latencyBuckets, s)
	m.mu.Lock()
	if ok {
		m.served[[2]string{vertex, model}]++
	} else {
		m.errors[errKind]++
	}
	if i < len(m.buckets) {
		m.buckets[i]++
	}
	m.count++
	m.sum += s
	m.mu.Unlock()
}

func (m *Metrics) badRequest() {
	m.mu.Lock()
	m.errors["bad_request"]++
	m.mu.Unlock()
}

func escapeLabel(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	s = strings.ReplaceAll(s, `"`, `\"`)
	return strings.ReplaceAll(s, "\n", `\n`)
}

func fmtFloat(f float64) string {
	if math.IsInf(f, 1) {
		return "+Inf"
	}
	return fmt.Sprintf("%g", f)
}

// gauges are the values read from the node at scrape time.
type gauges struct {
	members  int
	vertex   string
	isLeader bool
	guardDropped,
	guardPanics uint64
}

// write renders every metric in the Prometheus text exposition format.
func (m *Metrics) write(w io.Writer, g gauges) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("# HELP idn_requests_total Inference requests accepted at this entry node.\n# TYPE idn_requests_total counter\nidn_requests_total %d\n", m.requests.Load())
	p("# HELP idn_replies_total Replies to accepted requests by result.\n# TYPE idn_replies_total counter\n")
	p("idn_replies_total{result=\"ok\"} %d\nidn_replies_total{result=\"error\"} %d\n", m.repliesOK.Load(), m.repliesErr.Load())
	p("# HELP idn_correct_total Results whose emulated answer was correct.\n# TYPE idn_correct_total counter\nidn_correct_total %d\n", m.correct.Load())
	m.mu.Lock()
	served := make([][2]string, 0, len(m.served))
	for k := range m.served {
		served = append(served, k)
	}
	sort.Slice(served, func(i, j int) bool {
		if served[i][0] != served[j][0] {
			return served[i][0] < served[j][0]
		}
		return served[i][1] < served[j][1]
	})
	p("# HELP idn_served_total Results of requests entered here, by serving vertex and model.\n# TYPE idn_served_total counter\n")
	for _, k := range served {
		p("idn_served_total{vertex=\"%s\",model=\"%s\"} %d\n", escapeLabel(k[0]), escapeLabel(k[1]), m.served[k])
	}
	kinds := []string{"bad_request", "deadline_exceeded", "overloaded", "unreachable", "internal"}
	p("# HELP idn_errors_total Error replies by kind (bad_request counts rejected HTTP requests).\n# TYPE idn_errors_total counter\n")
	for _, k := range kinds {
		p("idn_errors_total{kind=\"%s\"} %d\n", k, m.errors[k])
	}
	p("# HELP idn_request_latency_seconds End-to-end latency of replies at the entry node.\n# TYPE idn_request_latency_seconds histogram\n")
	var cum uint64
	for i, b := range latencyBuckets {
		cum += m.buckets[i]
		p("idn_request_latency_seconds_bucket{le=\"%s\"} %d\n", fmtFloat(b), cum)
	}
	p("idn_request_latency_seconds_bucket{le=\"+Inf\"} %d\n", m.count)
	p("idn_request_latency_seconds_sum %g\nidn_request_latency_seconds_count %d\n", m.sum, m.count)
	m.mu.Unlock()
	p("# HELP idn_members Alive cluster members seen by this node.\n# TYPE idn_members gauge\nidn_members %d\n", g.members)
	leader := 0
	if g.isLeader {
		leader = 1
	}
	p("# HELP idn_is_leader 1 when this node leads its vertex group.\n# TYPE idn_is_leader gauge\nidn_is_leader{vertex=\"%s\"} %d\n", escapeLabel(g.vertex), leader)
	p("# HELP idn_leader_changes_total Leader changes of this node's vertex group seen here.\n# TYPE idn_leader_changes_total counter\nidn_leader_changes_total %d\n", m.leaderChanges.Load())
	p("# HELP idn_wire_dropped_total Malformed wire messages dropped at the remote boundary.\n# TYPE idn_wire_dropped_total counter\nidn_wire_dropped_total %d\n", g.guardDropped)
	p("# HELP idn_wire_panics_total Panics recovered at the remote boundary.\n# TYPE idn_wire_panics_total counter\nidn_wire_panics_total %d\n", g.guardPanics)
}
