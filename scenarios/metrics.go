package scenarios

import (
	"bufio"
	"bytes"
	"math"
	"strconv"
	"strings"
)

// reportedMetrics are the /metrics families summed into NodeReport.Metrics.
var reportedMetrics = []string{
	"idn_requests_total", "idn_replies_total", "idn_served_total", "idn_errors_total",
	"idn_members", "idn_is_leader", "idn_leader_changes_total",
}

// parseMetrics sums the samples of each family of a Prometheus text
// exposition over their labels, keeping the families in want. Lines it
// cannot read are skipped: the report must not fail on a metrics detail.
// Labelled series (but the many of idn_served_total) are also kept as
// name{labels}.
func parseMetrics(text []byte, want []string) map[string]float64 {
	keep := map[string]bool{}
	for _, w := range want {
		keep[w] = true
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		series, rest, ok := splitSeries(line)
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil || math.IsNaN(v) {
			continue
		}
		name := series
		if i := strings.IndexByte(series, '{'); i >= 0 {
			name = series[:i]
		}
		if !keep[name] {
			continue
		}
		out[name] += v
		if name != series && name != "idn_served_total" {
			out[series] = v
		}
	}
	return out
}

// splitSeries splits "name{labels} value ..." after the series.
func splitSeries(line string) (series, rest string, ok bool) {
	if i := strings.IndexByte(line, '{'); i >= 0 && i < strings.IndexAny(line+" ", " \t") {
		j := strings.LastIndexByte(line, '}')
		if j < i {
			return "", "", false
		}
		return line[:j+1], line[j+1:], true
	}
	i := strings.IndexAny(line, " \t")
	if i < 0 {
		return "", "", false
	}
	return line[:i], line[i:], true
}
