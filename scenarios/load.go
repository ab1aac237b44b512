package scenarios

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// inferRequest is the KServe v2 request body.
type inferRequest struct {
	ID         string         `json:"id"`
	Inputs     []inferTensor  `json:"inputs"`
	Parameters map[string]any `json:"parameters,omitempty"`
}

type inferTensor struct {
	Name     string   `json:"name"`
	Shape    []int    `json:"shape"`
	Datatype string   `json:"datatype"`
	Data     []string `json:"data"`
}

// inferReply is the part of a KServe v2 reply (or error) the runner reads.
type inferReply struct {
	Parameters struct {
		ServedByVertex string  `json:"served_by_vertex"`
		ServedByNode   string  `json:"served_by_node"`
		Model          string  `json:"model"`
		Correct        bool    `json:"correct"`
		Accuracy       float64 `json:"accuracy"`
	} `json:"parameters"`
	Error string `json:"error"`
	Kind  string `json:"kind"`
}

// loader drives the open-loop workload against the live entry nodes.
type loader struct {
	w       Workload
	entries []string // node names that may receive requests
	c       *cluster
	client  *http.Client
	logf    func(string, ...any)

	mu      sync.Mutex
	samples []Sample

	inFlight atomic.Int64
	rr       atomic.Uint64
}

func newLoader(w Workload, entries []string, c *cluster, logf func(string, ...any)) *loader {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		MaxIdleConnsPerHost: w.MaxInFlight,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	return &loader{w: w, entries: entries, c: c, client: &http.Client{Transport: tr}, logf: logf}
}

// arrivals returns the send offsets of the whole workload.
func arrivals(w Workload) []time.Duration {
	rng := rand.New(rand.NewPCG(uint64(w.Seed), 0x1d4))
	var out []time.Duration
	t := 0.0
	end := w.Duration.D().Seconds()
	for {
		if w.Arrivals == ArrivalsConstant {
			t = float64(len(out)) / w.Rate
		} else {
			t += rng.ExpFloat64() / w.Rate
		}
		if t >= end {
			return out
		}
		out = append(out, time.Duration(t*float64(time.Second)))
	}
}

// taskPicker draws tasks with the workload's weights.
type taskPicker struct {
	names []string
	cum   []float64
	rng   *rand.Rand
}

func newTaskPicker(w Workload) *taskPicker {
	p := &taskPicker{rng: rand.New(rand.NewPCG(uint64(w.Seed), 0x7a5c))}
	sum := 0.0
	for _, t := range sortedKeys(w.Tasks) {
		sum += w.Tasks[t]
		p.names = append(p.names, t)
		p.cum = append(p.cum, sum)
	}
	for i := range p.cum {
		p.cum[i] /= sum
	}
	return p
}

func (p *taskPicker) pick() string {
	u := p.rng.Float64()
	i := sort.SearchFloat64s(p.cum, u)
	return p.names[min(i, len(p.names)-1)]
}

// run issues the workload from start until its duration ends or ctx is
// cancelled, then waits for every outstanding request. It never returns
// before all its goroutines have ended.
func (l *loader) run(ctx context.Context, start time.Time) {
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		l.client.CloseIdleConnections()
	}()
	picker := newTaskPicker(l.w)
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for i, at := range arrivals(l.w) {
		timer.Reset(time.Until(start.Add(at)))
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		task := picker.pick()
		if l.inFlight.Load() >= int64(l.w.MaxInFlight) {
			l.record(Sample{Start: time.Since(start), Task: task, Outcome: OutcomeSkipped, Kind: "max_in_flight"})
			continue
		}
		l.inFlight.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer l.inFlight.Add(-1)
			l.record(l.send(ctx, start, i, task))
		}()
	}
}

func (l *loader) record(s Sample) {
	l.mu.Lock()
	l.samples = append(l.samples, s)
	l.mu.Unlock()
}

// snapshot returns counts for progress lines.
func (l *loader) snapshot() (sent, results, errs, lost int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.samples {
		sent++
		switch s.Outcome {
		case OutcomeResult:
			results++
		case OutcomeError:
			errs++
		case OutcomeLost:
			lost++
		}
	}
	return
}

// pickEntry returns a live entry node, round robin.
func (l *loader) pickEntry() (string, ReadyLine, bool) {
	n := len(l.entries)
	base := int(l.rr.Add(1))
	for k := 0; k < n; k++ {
		name := l.entries[(base+k)%n]
		if r, ok := l.c.live(name); ok {
			return name, r, true
		}
	}
	return "", ReadyLine{}, false
}

// send issues one request to a live entry node, round robin, and
// classifies its outcome (see Outcome).
func (l *loader) send(ctx context.Context, start time.Time, seq int, task string) Sample {
	sentAt := time.Now()
	s := Sample{Start: sentAt.Sub(start), Task: task}
	name, ready, ok := l.pickEntry()
	if !ok {
		s.Outcome, s.Kind = OutcomeNotAccepted, "no_live_entry"
		return s
	}
	return l.sendTo(ctx, s, sentAt, seq, name, ready)
}

// sendTo issues request s (Start and Task set) to node name.
func (l *loader) sendTo(ctx context.Context, s Sample, sentAt time.Time, seq int, name string, ready ReadyLine) Sample {
	task := s.Task
	s.Entry = name
	params := map[string]any{}
	if l.w.SLOms > 0 {
		params["slo_ms"] = l.w.SLOms
	}
	if l.w.MinAccuracy > 0 {
		params["min_accuracy"] = l.w.MinAccuracy
	}
	body, err := json.Marshal(inferRequest{
		ID:         "scn-" + strconv.Itoa(seq),
		Inputs:     []inferTensor{{Name: "image", Shape: []int{1}, Datatype: "BYTES", Data: []string{"frame-" + strconv.Itoa(seq)}}},
		Parameters: params,
	})
	if err != nil {
		s.Outcome, s.Kind = OutcomeNotAccepted, "encode"
		return s
	}
	rctx, cancel := context.WithTimeout(ctx, l.w.ClientTimeout())
	defer cancel()
	var wrote atomic.Bool
	trace := &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err == nil {
			wrote.Store(true)
		}
	}}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(rctx, trace), http.MethodPost,
		"http://"+ready.API+"/v2/models/"+task+"/infer", bytes.NewReader(body))
	if err != nil {
		s.Outcome, s.Kind = OutcomeNotAccepted, "request"
		return s
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.client.Do(req)
	if err != nil {
		fault := l.c.faultedSince(name, sentAt)
		switch {
		case !wrote.Load():
			s.Outcome, s.Kind = OutcomeNotAccepted, "connect"
			if errors.Is(err, context.DeadlineExceeded) {
				s.Kind = "connect_timeout"
			}
		case ctx.Err() != nil:
			s.Outcome, s.Kind = OutcomeLost, "aborted"
		case fault != "":
			s.Outcome, s.Kind = OutcomeLost, fault
		case errors.Is(err, context.DeadlineExceeded):
			s.Outcome, s.Kind = OutcomeLost, "timeout"
		default:
			s.Outcome, s.Kind = OutcomeLost, "conn_closed"
		}
		return s
	}
	defer resp.Body.Close()
	raw, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	s.Latency = time.Since(sentAt)
	s.Outcome = OutcomeError
	if rerr != nil {
		// A status line arrived, so the node did reply; the body was cut.
		s.Kind = "truncated_reply"
		return s
	}
	var rep inferReply
	derr := json.Unmarshal(raw, &rep)
	if resp.StatusCode != http.StatusOK {
		s.Kind = rep.Kind
		if derr != nil || s.Kind == "" {
			s.Kind = fmt.Sprintf("http_%d", resp.StatusCode)
		}
		return s
	}
	if derr != nil || rep.Parameters.ServedByVertex == "" {
		s.Kind = "bad_reply"
		return s
	}
	s.Outcome = OutcomeResult
	s.Kind = ""
	s.Vertex, s.Node, s.Model = rep.Parameters.ServedByVertex, rep.Parameters.ServedByNode, rep.Parameters.Model
	s.Accuracy, s.Correct = rep.Parameters.Accuracy, rep.Parameters.Correct
	return s
}

// results returns a copy of the samples.
func (l *loader) results() []Sample {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Sample(nil), l.samples...)
}
