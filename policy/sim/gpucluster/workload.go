package gpucluster

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"

	"github.com/idn-net/idn/policy/sim"
)

// Stream is one request stream: requests of one model with one SLO (ms).
// Rate is its long-run mean arrival rate in requests per ms (used by the
// planners; the arrivals themselves come from a Source).
type Stream struct {
	Model int
	SLO   float64
	Rate  float64
}

// Arrival is one request of a workload: time (ms), stream index.
type Arrival struct {
	T      float64
	Stream int32
}

// Source yields arrivals in non-decreasing time order.
type Source interface {
	Next() (Arrival, bool)
}

// Workload is a reproducible workload: its streams and a factory of fresh
// arrival sources (each call restarts the same sequence).
type Workload struct {
	Name     string
	Streams  []Stream
	Duration float64 // ms; arrivals are in [0, Duration)
	New      func() Source
}

// ErrWorkload is wrapped by workload configuration errors.
var ErrWorkload = errors.New("gpucluster: invalid workload")

// MAFConfig configures the synthetic stand-in for the Microsoft Azure
// Functions (MAF) trace that paper 004 Sec. 7 replays. The real trace (per-
// minute invocation counts of ~46k applications over two weeks) is not
// available offline, so this generator reproduces the properties Sec. 2.2
// states instead:
//
//   - heavy-tailed per-stream mean rates (log-normal, sigma RateSigma),
//     normalised so that the streams add up to Load requests/s;
//   - per-minute rate variation: each stream's rate in minute t is its mean
//     times a log-normal factor (sigma MinuteSigma, mean 1); a fraction
//     OnOffFraction of the streams is on/off (active in a minute with
//     probability OnProb, rate scaled by 1/OnProb so the mean is kept), and
//     all streams follow a diurnal cycle of relative amplitude Diurnal over
//     1,440 minutes. This makes the coefficient of variation of per-window
//     counts grow as the window shrinks (Fig. 2), see WindowCV;
//   - within a minute, arrivals are Poisson ("MAF-stable") or a two-phase
//     MMPP ("MAF-bursty"): a high phase at BurstFactor times the minute's
//     rate for a fraction BurstShare of the time (mean sojourn BurstMs), a
//     low phase that keeps the mean.
//
// Streams are assigned to Models round-robin, as the paper assigns MAF
// applications to its models, each with SLO ms.
type MAFConfig struct {
	Streams       int
	Models        []int
	Load          float64 // requests per second, all streams together
	SLO           float64 // ms
	Duration      float64 // ms
	MinuteMs      float64 // length of a trace "minute" (60,000 ms)
	Bursty        bool
	RateSigma     float64
	MinuteSigma   float64
	OnOffFraction float64
	OnProb        float64
	Diurnal       float64
	BurstFactor   float64
	BurstShare    float64
	BurstMs       float64
	Seed          uint64
}

// DefaultMAFConfig returns 1,000 streams over models 0..12 at 3,000 req/s,
// 250 ms SLO, 10 s, Poisson within minutes, RateSigma 1.5, MinuteSigma 0.5,
// 20% on/off streams active 30% of minutes, diurnal amplitude 0.3, bursts
// at 4x for 15% of the time with 500 ms mean sojourn.
func DefaultMAFConfig() MAFConfig {
	models := make([]int, 13)
	for i := range models {
		models[i] = i
	}
	return MAFConfig{
		Streams: 1000, Models: models, Load: 3000, SLO: 250, Duration: 10000, MinuteMs: 60000,
		RateSigma: 1.5, MinuteSigma: 0.5, OnOffFraction: 0.2, OnProb: 0.3, Diurnal: 0.3,
		BurstFactor: 4, BurstShare: 0.15, BurstMs: 500, Seed: 1,
	}
}

// Validate checks the configuration.
func (c MAFConfig) Validate() error {
	switch {
	case c.Streams <= 0:
		return fmt.Errorf("%w: streams = %d must be positive", ErrWorkload, c.Streams)
	case len(c.Models) == 0:
		return fmt.Errorf("%w: models: need at least one", ErrWorkload)
	case !(c.Load > 0):
		return fmt.Errorf("%w: load = %v req/s must be positive", ErrWorkload, c.Load)
	case !(c.SLO > 0):
		return fmt.Errorf("%w: slo = %v ms must be positive", ErrWorkload, c.SLO)
	case !(c.Duration > 0):
		return fmt.Errorf("%w: duration = %v ms must be positive", ErrWorkload, c.Duration)
	case !(c.MinuteMs > 0):
		return fmt.Errorf("%w: minute = %v ms must be positive", ErrWorkload, c.MinuteMs)
	case c.RateSigma < 0 || c.MinuteSigma < 0:
		return fmt.Errorf("%w: rate sigma = %v and minute sigma = %v must be >= 0", ErrWorkload, c.RateSigma, c.MinuteSigma)
	case c.OnOffFraction < 0 || c.OnOffFraction > 1:
		return fmt.Errorf("%w: on/off fraction = %v must be in [0,1]", ErrWorkload, c.OnOffFraction)
	case !(c.OnProb > 0 && c.OnProb <= 1):
		return fmt.Errorf("%w: on probability = %v must be in (0,1]", ErrWorkload, c.OnProb)
	case c.Diurnal < 0 || c.Diurnal >= 1:
		return fmt.Errorf("%w: diurnal amplitude = %v must be in [0,1)", ErrWorkload, c.Diurnal)
	}
	if c.Bursty {
		if !(c.BurstFactor >= 1) || !(c.BurstShare > 0 && c.BurstShare < 1) || c.BurstFactor*c.BurstShare >= 1 || !(c.BurstMs > 0) {
			return fmt.Errorf("%w: burst factor = %v, share = %v (need factor >= 1, share in (0,1), factor*share < 1) and sojourn = %v ms (> 0)", ErrWorkload, c.BurstFactor, c.BurstShare, c.BurstMs)
		}
	}
	return nil
}

// MAF builds the synthetic Azure-Functions-like workload.
func MAF(c MAFConfig, models int) (*Workload, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	for i, m := range c.Models {
		if m < 0 || m >= models {
			return nil, fmt.Errorf("%w: models[%d] = %d out of range [0,%d)", ErrWorkload, i, m, models)
		}
	}
	r := sim.NewRand(c.Seed)
	w := make([]float64, c.Streams)
	sum := 0.0
	for i := range w {
		w[i] = math.Exp(c.RateSigma * r.NormFloat64())
		sum += w[i]
	}
	streams := make([]Stream, c.Streams)
	onoff := make([]bool, c.Streams)
	for i := range streams {
		streams[i] = Stream{Model: c.Models[i%len(c.Models)], SLO: c.SLO, Rate: c.Load / 1000 * w[i] / sum}
		onoff[i] = r.Float64() < c.OnOffFraction
	}
	name := "maf-stable"
	if c.Bursty {
		name = "maf-bursty"
	}
	wl := &Workload{Name: name, Streams: streams, Duration: c.Duration}
	wl.New = func() Source { return newMAFSource(c, streams, onoff) }
	return wl, nil
}

type mafStream struct {
	minute   int
	rate     float64 // req/ms in the current minute
	high     bool
	nextFlip float64
	r        *rand.Rand
}

type mafSource struct {
	c       MAFConfig
	streams []Stream
	onoff   []bool
	st      []mafStream
	h       sim.Heap[int32]
	lowF    float64
}

func newMAFSource(c MAFConfig, streams []Stream, onoff []bool) *mafSource {
	s := &mafSource{c: c, streams: streams, onoff: onoff, st: make([]mafStream, len(streams))}
	if c.Bursty {
		s.lowF = (1 - c.BurstFactor*c.BurstShare) / (1 - c.BurstShare)
	}
	for i := range s.st {
		st := &s.st[i]
		st.r = sim.NewRand(sim.SplitSeed(c.Seed, uint64(i)+1))
		st.minute = -1
		if c.Bursty {
			st.high = st.r.Float64() < c.BurstShare
			st.nextFlip = s.sojourn(st)
		} else {
			st.nextFlip = math.Inf(1)
		}
		if t, ok := s.advance(i, 0); ok {
			s.h.Push(t, int32(i))
		}
	}
	return s
}

func (s *mafSource) sojourn(st *mafStream) float64 {
	if st.high {
		return st.r.ExpFloat64() * s.c.BurstMs
	}
	return st.r.ExpFloat64() * s.c.BurstMs * (1 - s.c.BurstShare) / s.c.BurstShare
}

func (s *mafSource) minuteRate(i int, st *mafStream, minute int) float64 {
	c := s.c
	f := math.Exp(c.MinuteSigma*st.r.NormFloat64() - c.MinuteSigma*c.MinuteSigma/2)
	if s.onoff[i] {
		if st.r.Float64() < c.OnProb {
			f /= c.OnProb
		} else {
			f = 0
		}
	}
	f *= 1 + c.Diurnal*math.Sin(2*math.Pi*float64(minute)/1440)
	return s.streams[i].Rate * f
}

// advance returns stream i's next arrival after t.
func (s *mafSource) advance(i int, t float64) (float64, bool) {
	st := &s.st[i]
	for t < s.c.Duration {
		m := int(t / s.c.MinuteMs)
		if m != st.minute {
			st.minute = m
			st.rate = s.minuteRate(i, st, m)
		}
		rate := st.rate
		if s.c.Bursty {
			if st.high {
				rate *= s.c.BurstFactor
			} else {
				rate *= s.lowF
			}
		}
		bound := math.Min(float64(m+1)*s.c.MinuteMs, st.nextFlip)
		dt := sim.Exp(st.r, rate)
		if t+dt < bound {
			if t+dt >= s.c.Duration {
				return 0, false
			}
			return t + dt, true
		}
		t = bound
		if t >= st.nextFlip {
			st.high = !st.high
			st.nextFlip = t + s.sojourn(st)
		}
	}
	return 0, false
}

// Next returns the next arrival over all streams.
func (s *mafSource) Next() (Arrival, bool) {
	t, i, ok := s.h.Pop()
	if !ok {
		return Arrival{}, false
	}
	if nt, ok := s.advance(int(i), t); ok {
		s.h.Push(nt, i)
	}
	return Arrival{T: t, Stream: i}, true
}

// TwoStreamConfig is the synthetic case of paper 004 Sec. 7.2 (Fig. 11a):
// stream A sends bursts of Burst requests for ModelA every Period ms from
// FirstBurst; stream B sends one request for ModelB every Gap ms from 0.
type TwoStreamConfig struct {
	ModelA, ModelB int
	Burst          int
	FirstBurst     float64
	Period         float64
	Gap            float64
	SLO            float64
	Duration       float64
}

// DefaultTwoStreamConfig is the paper's case with Table 4 indices: ResNet18
// bursts of 1,024 every 120 ms from t = 5 ms, ResNeSt269 one request per ms,
// 250 ms SLO, 12 s.
func DefaultTwoStreamConfig() TwoStreamConfig {
	return TwoStreamConfig{ModelA: 0, ModelB: 8, Burst: 1024, FirstBurst: 5, Period: 120, Gap: 1, SLO: 250, Duration: 12000}
}

// Validate checks the configuration.
func (c TwoStreamConfig) Validate() error {
	if c.Burst <= 0 || !(c.Period > 0) || !(c.Gap > 0) || !(c.SLO > 0) || !(c.Duration > 0) || c.FirstBurst < 0 {
		return fmt.Errorf("%w: two-stream burst = %d, period = %v, gap = %v, slo = %v, duration = %v, first burst = %v: all must be positive (first burst >= 0)",
			ErrWorkload, c.Burst, c.Period, c.Gap, c.SLO, c.Duration, c.FirstBurst)
	}
	return nil
}

// TwoStream builds the Sec. 7.2 workload (stream 0 = A, stream 1 = B).
func TwoStream(c TwoStreamConfig) (*Workload, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	nb := 0
	for t := c.FirstBurst; t < c.Duration; t += c.Period {
		nb++
	}
	na := float64(nb*c.Burst) / c.Duration
	streams := []Stream{{Model: c.ModelA, SLO: c.SLO, Rate: na}, {Model: c.ModelB, SLO: c.SLO, Rate: 1 / c.Gap}}
	return &Workload{Name: "two-stream", Streams: streams, Duration: c.Duration, New: func() Source {
		return &twoSource{c: c, nextA: c.FirstBurst}
	}}, nil
}

type twoSource struct {
	c      TwoStreamConfig
	nextA  float64
	leftA  int
	nextBi int
}

// Next returns the next arrival of the two streams in time order.
func (s *twoSource) Next() (Arrival, bool) {
	tb := float64(s.nextBi) * s.c.Gap
	if s.leftA == 0 && s.nextA < s.c.Duration && s.nextA <= tb {
		s.leftA = s.c.Burst
	}
	if s.leftA > 0 && s.nextA <= tb {
		s.leftA--
		t := s.nextA
		if s.leftA == 0 {
			s.nextA += s.c.Period
		}
		return Arrival{T: t, Stream: 0}, true
	}
	if tb >= s.c.Duration {
		return Arrival{}, false
	}
	s.nextBi++
	return Arrival{T: tb, Stream: 1}, true
}

// TraceRow is one line of a request trace CSV.
type TraceRow struct {
	ArrivalMs float64
	Stream    string
	Model     string
	SLOMs     float64
}

// ReadTrace parses a request trace CSV with a header naming the columns
// arrival_ms, stream, model, slo_ms (any order, extra columns ignored), as
// `idn experiment shepherd --trace FILE` replays. Streams are numbered in
// order of first appearance; a stream must keep one model and one SLO.
// Rows may come in any order; they are sorted by arrival time.
func ReadTrace(r io.Reader, models []string) (*Workload, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	line := 0
	col := map[string]int{}
	var arr []Arrival
	var streams []Stream
	ids := map[string]int{}
	mi := map[string]int{}
	for i, m := range models {
		mi[m] = i
	}
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		f := strings.Split(text, ",")
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		if len(col) == 0 {
			for i, name := range f {
				col[strings.ToLower(name)] = i
			}
			for _, need := range []string{"arrival_ms", "stream", "model", "slo_ms"} {
				if _, ok := col[need]; !ok {
					return nil, fmt.Errorf("%w: trace line %d: header lacks column %q", ErrWorkload, line, need)
				}
			}
			continue
		}
		get := func(name string) (string, error) {
			i := col[name]
			if i >= len(f) {
				return "", fmt.Errorf("%w: trace line %d: missing field %s", ErrWorkload, line, name)
			}
			return f[i], nil
		}
		var row TraceRow
		s, err := get("arrival_ms")
		if err != nil {
			return nil, err
		}
		if row.ArrivalMs, err = strconv.ParseFloat(s, 64); err != nil || row.ArrivalMs < 0 || math.IsInf(row.ArrivalMs, 0) {
			return nil, fmt.Errorf("%w: trace line %d: arrival_ms = %q must be a finite number >= 0", ErrWorkload, line, s)
		}
		if row.Stream, err = get("stream"); err != nil {
			return nil, err
		}
		if row.Model, err = get("model"); err != nil {
			return nil, err
		}
		if s, err = get("slo_ms"); err != nil {
			return nil, err
		}
		if row.SLOMs, err = strconv.ParseFloat(s, 64); err != nil || !(row.SLOMs > 0) || math.IsInf(row.SLOMs, 0) {
			return nil, fmt.Errorf("%w: trace line %d: slo_ms = %q must be a positive number", ErrWorkload, line, s)
		}
		m, ok := mi[row.Model]
		if !ok {
			return nil, fmt.Errorf("%w: trace line %d: model = %q is not in the catalog", ErrWorkload, line, row.Model)
		}
		id, ok := ids[row.Stream]
		if !ok {
			id = len(streams)
			ids[row.Stream] = id
			streams = append(streams, Stream{Model: m, SLO: row.SLOMs})
		} else if streams[id].Model != m || streams[id].SLO != row.SLOMs {
			return nil, fmt.Errorf("%w: trace line %d: stream %q changes model or slo_ms", ErrWorkload, line, row.Stream)
		}
		streams[id].Rate++
		arr = append(arr, Arrival{T: row.ArrivalMs, Stream: int32(id)})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("gpucluster: reading trace: %w", err)
	}
	if len(col) == 0 {
		return nil, fmt.Errorf("%w: trace is empty (no header)", ErrWorkload)
	}
	if len(arr) == 0 {
		return nil, fmt.Errorf("%w: trace has no requests", ErrWorkload)
	}
	sort.SliceStable(arr, func(a, b int) bool { return arr[a].T < arr[b].T })
	dur := arr[len(arr)-1].T + 1
	for i := range streams {
		streams[i].Rate /= dur
	}
	return &Workload{Name: "trace", Streams: streams, Duration: dur, New: func() Source {
		return &sliceSource{a: arr}
	}}, nil
}

type sliceSource struct {
	a []Arrival
	i int
}

// Next returns the next arrival of the trace.
func (s *sliceSource) Next() (Arrival, bool) {
	if s.i >= len(s.a) {
		return Arrival{}, false
	}
	s.i++
	return s.a[s.i-1], true
}

// WriteTrace writes a workload's arrivals as a trace CSV (header arrival_ms,
// stream, model, slo_ms); stream names are "s<index>".
func WriteTrace(w io.Writer, wl *Workload, models []string) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "arrival_ms,stream,model,slo_ms")
	src := wl.New()
	for {
		a, ok := src.Next()
		if !ok {
			break
		}
		s := wl.Streams[a.Stream]
		fmt.Fprintf(bw, "%.4f,s%d,%s,%g\n", a.T, a.Stream, models[s.Model], s.SLO)
	}
	return bw.Flush()
}

// WindowCV is the Fig. 2 statistic of paper 004 Sec. 2.2: the window is cut
// into non-overlapping windows of tau ms, r_{t,s} counts stream s's requests
// in window t, and the result is the coefficient of variation (std/mean over
// t) averaged over the streams with at least one request, for each tau.
// Windows beyond the last full one are ignored.
func WindowCV(wl *Workload, taus []float64) []float64 {
	out := make([]float64, len(taus))
	for k, tau := range taus {
		nw := int(wl.Duration / tau)
		if nw < 2 {
			out[k] = math.NaN()
			continue
		}
		counts := make([][]float64, len(wl.Streams))
		for i := range counts {
			counts[i] = make([]float64, nw)
		}
		src := wl.New()
		for {
			a, ok := src.Next()
			if !ok {
				break
			}
			if w := int(a.T / tau); w < nw {
				counts[a.Stream][w]++
			}
		}
		sum, n := 0.0, 0
		for _, c := range counts {
			mean := 0.0
			for _, x := range c {
				mean += x
			}
			mean /= float64(nw)
			if mean == 0 {
				continue
			}
			v := 0.0
			for _, x := range c {
				v += (x - mean) * (x - mean)
			}
			sum += math.Sqrt(v/float64(nw)) / mean
			n++
		}
		out[k] = sum / float64(n)
	}
	return out
}
