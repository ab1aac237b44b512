package gpucluster

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestTable4MatchesPaperStatements(t *testing.T) {
	ms := Table4()
	if len(ms) != 17 {
		t.Fatalf("%d models, want the 17 rows of Table 4", len(ms))
	}
	rn18, _ := ModelIndex(ms, "RN18")
	rs269, _ := ModelIndex(ms, "RS269")
	bert, err := ModelIndex(ms, "BERT")
	if err != nil || ms[bert].Alpha != 40.98 || ms[bert].Beta != 5.67 {
		t.Fatalf("BERT row: %+v %v", ms[bert], err)
	}
	// Sec. 7.2: ResNet18 ~4 ms at batch 1, ~32 ms at 128; ResNeSt269 79 ms at 1.
	if l := ms[rn18].Latency(1); math.Abs(l-4) > 0.1 {
		t.Fatalf("RN18 l(1) = %v", l)
	}
	if l := ms[rn18].Latency(128); math.Abs(l-32) > 0.5 {
		t.Fatalf("RN18 l(128) = %v", l)
	}
	if l := ms[rs269].Latency(1); math.Abs(l-79) > 0.5 {
		t.Fatalf("RS269 l(1) = %v", l)
	}
	if _, err := ModelIndex(ms, "nope"); err == nil {
		t.Fatal("unknown model accepted")
	}
}

func count(wl *Workload) (n int, perStream []int, last float64) {
	perStream = make([]int, len(wl.Streams))
	src := wl.New()
	prev := -1.0
	for {
		a, ok := src.Next()
		if !ok {
			return
		}
		if a.T < prev {
			panic("arrivals out of order")
		}
		prev, last = a.T, a.T
		n++
		perStream[a.Stream]++
	}
}

func TestTwoStreamWorkload(t *testing.T) {
	c := DefaultTwoStreamConfig()
	c.Duration = 250
	wl, err := TwoStream(c)
	if err != nil {
		t.Fatal(err)
	}
	// bursts at 5, 125, 245 (3 x 1024) and B at 0..249 (250)
	n, per, _ := count(wl)
	if per[0] != 3*1024 || per[1] != 250 || n != 3*1024+250 {
		t.Fatalf("counts %v", per)
	}
	c.Burst = 0
	if _, err := TwoStream(c); !errors.Is(err, ErrWorkload) {
		t.Fatalf("bad config: %v", err)
	}
}

func TestMAFMeanRate(t *testing.T) {
	for _, bursty := range []bool{false, true} {
		c := DefaultMAFConfig()
		c.Streams, c.Load, c.Duration = 200, 2000, 20000
		c.RateSigma, c.MinuteSigma, c.OnOffFraction, c.Diurnal = 0, 0, 0, 0
		c.Bursty = bursty
		wl, err := MAF(c, 17)
		if err != nil {
			t.Fatal(err)
		}
		n, _, _ := count(wl)
		rate := float64(n) / (c.Duration / 1000)
		// 40,000 expected arrivals; MMPP phases add variance, allow 10%
		if math.Abs(rate-c.Load)/c.Load > 0.10 {
			t.Fatalf("bursty=%v: rate %v, want ~%v", bursty, rate, c.Load)
		}
		sum := 0.0
		for _, s := range wl.Streams {
			sum += s.Rate
		}
		if math.Abs(sum*1000-c.Load) > 1e-6 {
			t.Fatalf("stream rates add to %v req/s", sum*1000)
		}
	}
	bad := DefaultMAFConfig()
	bad.Load = -1
	if _, err := MAF(bad, 17); !errors.Is(err, ErrWorkload) || !strings.Contains(err.Error(), "load") {
		t.Fatalf("bad load: %v", err)
	}
}

// Fig. 2 property (Sec. 2.2): the mean per-stream coefficient of variation
// of per-window counts grows as the window shrinks.
func TestMAFCVGrowsAsWindowShrinks(t *testing.T) {
	c := DefaultMAFConfig()
	c.Streams, c.Load, c.Duration = 40, 4, 4*3600*1000
	wl, err := MAF(c, 13)
	if err != nil {
		t.Fatal(err)
	}
	taus := []float64{60 * 60000, 10 * 60000, 60000, 10000}
	cv := WindowCV(wl, taus)
	for i := 1; i < len(cv); i++ {
		if !(cv[i] > cv[i-1]) {
			t.Fatalf("CV by window %v = %v: not increasing as the window shrinks", taus, cv)
		}
	}
}

func TestTraceRoundTripAndErrors(t *testing.T) {
	models := Table4()
	names := make([]string, len(models))
	for i, m := range models {
		names[i] = m.Name
	}
	c := DefaultTwoStreamConfig()
	c.Duration = 500
	wl, _ := TwoStream(c)
	var buf bytes.Buffer
	if err := WriteTrace(&buf, wl, names); err != nil {
		t.Fatal(err)
	}
	back, err := ReadTrace(bytes.NewReader(buf.Bytes()), names)
	if err != nil {
		t.Fatal(err)
	}
	n1, p1, _ := count(wl)
	n2, p2, _ := count(back)
	// stream ids follow first appearance: B (t = 0) becomes stream 0
	if n1 != n2 || p1[0] != p2[1] || p1[1] != p2[0] || back.Streams[0].Model != 8 || back.Streams[1].SLO != 250 {
		t.Fatalf("round trip: %d/%v vs %d/%v", n1, p1, n2, p2)
	}
	cfg := DefaultConfig()
	cfg.Workers = 1
	r1, err := Run(cfg, wl)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := Run(cfg, back)
	if err != nil {
		t.Fatal(err)
	}
	if r1.Good != r2.Good {
		t.Fatalf("replayed trace: good %d vs %d", r2.Good, r1.Good)
	}
	for _, tc := range []struct{ in, want string }{
		{"arrival_ms,stream,model\n1,a,RN18\n", "slo_ms"},
		{"arrival_ms,stream,model,slo_ms\nx,a,RN18,100\n", "arrival_ms"},
		{"arrival_ms,stream,model,slo_ms\n1,a,RN18,-3\n", "slo_ms"},
		{"arrival_ms,stream,model,slo_ms\n1,a,NOPE,100\n", "model"},
		{"arrival_ms,stream,model,slo_ms\n1,a,RN18,100\n2,a,RN50,100\n", "stream"},
		{"", "empty"},
	} {
		_, err := ReadTrace(strings.NewReader(tc.in), names)
		if !errors.Is(err, ErrWorkload) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("ReadTrace(%q) = %v, want an error naming %q", tc.in, err, tc.want)
		}
	}
}

// Sec. 7.2 (Fig. 11a): with a 90 ms SLO FLEX beats both SHEPHERD-NP and
// Clockwork-like by a large factor; with 250 ms both FLEX variants beat
// Clockwork-like. No scheme completes a batch late.
func TestTwoStreamCase(t *testing.T) {
	good := map[float64]map[Scheme]float64{}
	for _, slo := range []float64{90, 250} {
		c := DefaultTwoStreamConfig()
		c.SLO, c.Duration = slo, 3000
		wl, _ := TwoStream(c)
		good[slo] = map[Scheme]float64{}
		for _, s := range []Scheme{FLEX, FLEXNP, Clockwork, Nexus} {
			cfg := DefaultConfig()
			cfg.Workers, cfg.Scheme = 1, s
			r, err := Run(cfg, wl)
			if err != nil {
				t.Fatal(err)
			}
			if r.Late != 0 {
				t.Fatalf("%s slo %v: %d late", s, slo, r.Late)
			}
			good[slo][s] = r.Goodput
		}
	}
	g := good[90]
	if g[FLEX] < 2*g[FLEXNP] || g[FLEX] < 2*g[Clockwork] {
		t.Fatalf("90 ms: %v", g)
	}
	g = good[250]
	if g[FLEX] < 2*g[Clockwork] || g[FLEXNP] < 2*g[Clockwork] {
		t.Fatalf("250 ms: %v", g)
	}
	t.Logf("goodput/s: 90 ms %v; 250 ms %v", good[90], good[250])
}

func mafSmall(load float64, streams int, dur float64, bursty bool) *Workload {
	c := DefaultMAFConfig()
	c.Load, c.Streams, c.Duration, c.Bursty = load, streams, dur, bursty
	wl, err := MAF(c, 17)
	if err != nil {
		panic(err)
	}
	return wl
}

// Every scheme on MAF-like workloads: nothing late, every request accounted
// for (Run checks good + late + dropped == offered), FLEX's goodput at least
// Clockwork-like's under overload.
func TestMAFAllSchemes(t *testing.T) {
	for _, bursty := range []bool{false, true} {
		wl := mafSmall(20000, 200, 2000, bursty)
		res := map[Scheme]Result{}
		for _, s := range []Scheme{FLEX, FLEXNP, Clockwork, Nexus} {
			cfg := DefaultConfig()
			cfg.Scheme = s
			r, err := Run(cfg, wl)
			if err != nil {
				t.Fatal(err)
			}
			if r.Late != 0 || r.Offered == 0 || r.Utilization <= 0 || r.Utilization > 1+1e-9 {
				t.Fatalf("%s: %+v", s, r)
			}
			res[s] = r
		}
		if res[FLEX].Goodput < res[Clockwork].Goodput || res[FLEX].Goodput < res[Nexus].Goodput {
			t.Fatalf("bursty=%v: flex %v clockwork %v nexus %v", bursty, res[FLEX].Goodput, res[Clockwork].Goodput, res[Nexus].Goodput)
		}
	}
}

// Fig. 10 property: with G-bar = 12 and load proportional to the workers,
// FLEX's goodput per worker stays flat (linear scaling).
func TestFlexScalesLinearly(t *testing.T) {
	var per []float64
	for _, n := range []int{12, 48, 96} {
		wl := mafSmall(250*float64(n), 80*n/12, 2000, false)
		cfg := DefaultConfig()
		cfg.Workers = n
		r, err := Run(cfg, wl)
		if err != nil {
			t.Fatal(err)
		}
		if r.Groups < n/12 {
			t.Fatalf("%d workers in %d groups", n, r.Groups)
		}
		per = append(per, r.Goodput/r.OfferedRate)
	}
	for _, p := range per {
		if p < 0.9 {
			t.Fatalf("served fraction by size %v: not linear", per)
		}
	}
}

// The scheduler-cost model: one scheduler over many GPUs falls behind when
// its per-event cost exceeds the inter-arrival time; G-bar = 12 groups don't.
func TestSchedulerCostModel(t *testing.T) {
	wl := mafSmall(12000, 400, 2000, false)
	run := func(gbar int) Result {
		cfg := DefaultConfig()
		cfg.Workers, cfg.GroupLimit = 48, gbar
		cfg.SchedCostPerGPU = 0.004 // 4 us per GPU per event
		r, err := Run(cfg, wl)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	one, grouped := run(0), run(12)
	if !(one.SchedLag > grouped.SchedLag) || !(grouped.Goodput > one.Goodput) {
		t.Fatalf("one group: lag %v goodput %v; G-bar 12: lag %v goodput %v", one.SchedLag, one.Goodput, grouped.SchedLag, grouped.Goodput)
	}
}

func TestConfigValidate(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for i, mut := range []func(*Config){
		func(c *Config) { c.Workers = 0 },
		func(c *Config) { c.Scheme = "x" },
		func(c *Config) { c.Lambda = 0 },
		func(c *Config) { c.NexusPeakWindow = 0 },
		func(c *Config) { c.SchedCostBase = -1 },
		func(c *Config) { c.Models = nil },
	} {
		cc := DefaultConfig()
		mut(&cc)
		if err := cc.Validate(); !errors.Is(err, ErrConfig) {
			t.Fatalf("mutation %d: %v", i, err)
		}
	}
}
