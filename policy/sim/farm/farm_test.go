package farm

import (
	"math"
	"testing"
)

// one sends every query to server 0.
type one struct{}

func (one) Dispatch() int      { return 0 }
func (one) Departed(int, bool) {}
func (one) Blocked(int)        {}

func single(lambda, mu float64, svc Service, buf int, deps int64, seed uint64) Config {
	return Config{Mu: []float64{mu}, A: []float64{1}, Counts: []int{1}, Lambda: lambda, Service: svc,
		Buffer: buf, MaxDepartures: deps, WarmupDepartures: deps / 20, Seed: seed}
}

func TestMM1(t *testing.T) {
	res, err := Run(single(0.5, 1, Exponential, 0, 400_000, 1), one{})
	if err != nil {
		t.Fatal(err)
	}
	// E[T] = 1/(mu-lambda) = 2
	if math.Abs(res.MeanResponse-2) > 0.06 {
		t.Fatalf("M/M/1 mean response %v, want 2", res.MeanResponse)
	}
	if math.Abs(res.MeanInSystem-1) > 0.05 { // Little: L = lambda T = 1
		t.Fatalf("M/M/1 mean in system %v, want 1", res.MeanInSystem)
	}
}

func TestMD1(t *testing.T) {
	res, err := Run(single(0.5, 1, Deterministic, 0, 400_000, 2), one{})
	if err != nil {
		t.Fatal(err)
	}
	// Pollaczek-Khinchine: E[T] = 1/mu + rho/(2 mu (1-rho)) = 1.5
	if math.Abs(res.MeanResponse-1.5) > 0.03 {
		t.Fatalf("M/D/1 mean response %v, want 1.5", res.MeanResponse)
	}
}

func TestMM1Blocking(t *testing.T) {
	const rho, b = 0.8, 3
	res, err := Run(single(rho, 1, Exponential, b, 400_000, 3), one{})
	if err != nil {
		t.Fatal(err)
	}
	want := (1 - rho) * math.Pow(rho, b) / (1 - math.Pow(rho, b+1))
	if math.Abs(res.BlockingProb-want) > 0.01 {
		t.Fatalf("M/M/1/%d blocking %v, want %v", b, res.BlockingProb, want)
	}
}

// rr is a round robin over all servers.
type rr struct{ i, n int }

func (p *rr) Dispatch() int      { p.i = (p.i + 1) % p.n; return p.i }
func (p *rr) Departed(int, bool) {}
func (p *rr) Blocked(int)        {}

func TestDeterministicSeed(t *testing.T) {
	for _, svc := range []Service{Exponential, Deterministic} {
		cfg := DefaultConfig()
		cfg.Service = svc
		cfg.SampleEvery = 10
		a, err := Run(cfg, &rr{n: 64})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Run(cfg, &rr{n: 64})
		if a.MeanResponse != b.MeanResponse || a.Events != b.Events || len(a.Samples) != len(b.Samples) {
			t.Fatalf("%v: runs differ: %+v vs %+v", svc, a, b)
		}
		cfg.Seed = 2
		c, _ := Run(cfg, &rr{n: 64})
		if c.MeanResponse == a.MeanResponse {
			t.Fatalf("%v: seed has no effect", svc)
		}
		if len(a.Samples) == 0 || a.Samples[0].T != 10 {
			t.Fatalf("%v: samples %v", svc, a.Samples[:1])
		}
	}
}

type target struct {
	rr
	got []float64
}

func (p *target) SetAStar(a float64) error { p.got = append(p.got, a); return nil }

func TestPhases(t *testing.T) {
	for _, svc := range []Service{Exponential, Deterministic} {
		cfg := DefaultConfig()
		cfg.Service = svc
		cfg.MaxDepartures = 0
		cfg.MaxTime = 100
		cfg.SampleEvery = 1
		cfg.Phases = []Phase{{Duration: 25, Lambda: 0.1, AStar: 70}, {Duration: 25, Lambda: 0.5, AStar: 80}}
		p := &target{rr: rr{n: 64}}
		res, err := Run(cfg, p)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.got) != 4 || p.got[0] != 70 || p.got[1] != 80 || p.got[3] != 80 {
			t.Fatalf("%v: targets %v", svc, p.got)
		}
		// arrivals: 64*(0.1*50 + 0.5*50) = 1920
		if math.Abs(float64(res.Arrivals)-1920) > 5*math.Sqrt(1920) {
			t.Fatalf("%v: %d arrivals, want about 1920", svc, res.Arrivals)
		}
		if len(res.Samples) != 100 || res.Samples[30].Phase != 1 || res.Samples[10].Phase != 0 {
			t.Fatalf("%v: %d samples", svc, len(res.Samples))
		}
	}
}

func TestValidate(t *testing.T) {
	bad := []Config{
		{},
		{Mu: []float64{1}, A: []float64{1}, Counts: []int{0}, Lambda: 1, MaxDepartures: 1},
		{Mu: []float64{1}, A: []float64{1}, Counts: []int{1}, Lambda: -1, MaxDepartures: 1},
		{Mu: []float64{1}, A: []float64{1}, Counts: []int{1}, Lambda: 1},
		{Mu: []float64{1}, A: []float64{1}, Counts: []int{1}, Lambda: 1, MaxDepartures: 1, Buffer: -1},
	}
	for i, c := range bad {
		if err := c.Validate(); err == nil {
			t.Fatalf("config %d accepted", i)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

// coin sends each query to server 0 or 1 with probability 1/2 (a Bernoulli
// split of a Poisson stream: each server is an independent M/G/1 queue).
type coin struct{ x uint64 }

func (p *coin) Dispatch() int {
	p.x = p.x*6364136223846793005 + 1442695040888963407
	return int(p.x >> 63)
}
func (p *coin) Departed(int, bool) {}
func (p *coin) Blocked(int)        {}

// Two classes (mu = 1 and 0.5), one server each, random split of rate 0.6:
// the mean response time is the average of two M/M/1 (or M/D/1) queues with
// arrival rate 0.3 each, which checks both engines across classes.
func TestTwoClassesClosedForm(t *testing.T) {
	for _, tc := range []struct {
		svc  Service
		want float64
	}{
		{Exponential, 0.5 * (1/(1-0.3) + 1/(0.5-0.3))},                         // 3.2143
		{Deterministic, 0.5 * ((1 + 0.3/(2*(1-0.3))) + (2 + 0.6/(2*0.5*0.4)))}, // P-K: 2.3571
	} {
		cfg := Config{Mu: []float64{1, 0.5}, A: []float64{1, 2}, Counts: []int{1, 1}, Lambda: 0.3, Service: tc.svc,
			MaxDepartures: 600_000, WarmupDepartures: 20_000, Seed: 9}
		res, err := Run(cfg, &coin{x: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%v: mean response %.4f, closed form %.4f", tc.svc, res.MeanResponse, tc.want)
		if math.Abs(res.MeanResponse-tc.want) > 0.03*tc.want {
			t.Errorf("%v: mean response %v, want %v", tc.svc, res.MeanResponse, tc.want)
		}
		if math.Abs(res.ClassShare[0]-0.5) > 0.01 {
			t.Errorf("%v: class share %v", tc.svc, res.ClassShare)
		}
	}
}
