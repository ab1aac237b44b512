package instances

import (
	"errors"
	"math"
	"testing"

	"github.com/idn-net/idn/policy/sim"
)

func randomAction(r interface{ Float64() float64 }, y []float64) {
	s := 0.0
	for i := range y {
		y[i] = r.Float64()
		s += y[i]
	}
	for i := range y {
		y[i] /= s
	}
}

// Every request that arrived is served (on time or late), rejected, or still
// in a buffer; per phase as well as in total.
func TestConservation(t *testing.T) {
	for _, eager := range []bool{false, true} {
		cfg := DefaultConfig()
		cfg.EagerReject = eager
		sys, err := New(cfg, SPPWorkload(), 7)
		if err != nil {
			t.Fatal(err)
		}
		r := sim.NewRand(8)
		y := make([]float64, 4)
		var rewardSum float64
		var slotArr, slotRej, slotDel, slotOn int
		for k := 0; k < 20000; k++ {
			randomAction(r, y)
			if k%100 < 30 { // push hard to the heavyweight instances at times
				y[0], y[1], y[2], y[3] = 0.5, 0.5, 0, 0
			}
			res := sys.Step(y)
			rewardSum += res.Reward
			slotArr += res.Arrivals
			slotRej += res.Rejected
			slotDel += res.Delayed
			slotOn += res.OnTime
			if k%997 == 0 {
				tot := sys.Metrics().Total()
				if tot.Arrivals != tot.OnTime+tot.Delayed+tot.Rejected+int64(sys.InSystem()) {
					t.Fatalf("eager=%v slot %d: arrivals %d != on time %d + delayed %d + rejected %d + in system %d",
						eager, k, tot.Arrivals, tot.OnTime, tot.Delayed, tot.Rejected, sys.InSystem())
				}
			}
		}
		m := sys.Metrics()
		tot := m.Total()
		if tot.Arrivals != tot.OnTime+tot.Delayed+tot.Rejected+int64(sys.InSystem()) {
			t.Fatalf("eager=%v: conservation violated: %+v in system %d", eager, tot, sys.InSystem())
		}
		if int64(slotArr) != tot.Arrivals || int64(slotRej) != tot.Rejected || int64(slotDel) != tot.Delayed || int64(slotOn) != tot.OnTime {
			t.Fatalf("eager=%v: slot sums (%d,%d,%d,%d) differ from metrics %+v", eager, slotArr, slotRej, slotDel, slotOn, tot)
		}
		// eq. (2) summed over slots = -delayed - rejected + sum of accuracies
		want := -float64(tot.Delayed) - float64(tot.Rejected) + tot.Goodput
		if math.Abs(rewardSum-want) > 1e-6*math.Abs(want) {
			t.Fatalf("eager=%v: sum of rewards %v, want %v", eager, rewardSum, want)
		}
		if tot.Rejected == 0 || tot.Delayed == 0 && !eager {
			t.Fatalf("eager=%v: test did not exercise rejections/delays: %+v", eager, tot)
		}
		if eager && tot.Delayed != 0 {
			t.Fatalf("eager rejection let %d requests complete late", tot.Delayed)
		}
	}
}

func TestSingleQueueConservation(t *testing.T) {
	s, err := NewSingleQueue(DefaultConfig(), SPPWorkload(), 3)
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 50; k++ {
		s.Run(200)
		tot := s.Metrics().Total()
		if tot.Arrivals != tot.OnTime+tot.Delayed+tot.Rejected+int64(s.InSystem()) {
			t.Fatalf("arrivals %d != %d + %d + %d + %d", tot.Arrivals, tot.OnTime, tot.Delayed, tot.Rejected, s.InSystem())
		}
	}
}

// The SPP's long-run arrival rate and time in each phase match its
// stationary distribution (pi D1 1), and within each phase arrivals are
// Poisson with that phase's rate.
func TestSPPLongRunRateMatchesStationary(t *testing.T) {
	w := SPPWorkload()
	pi := w.Stationary()
	r := sim.NewRand(21)
	w.Reset(r)
	const horizon = 1e6 // seconds: about 1900 burst cycles
	var arr [2]float64
	var tm [2]float64
	tt := 0.0
	for tt < horizon {
		// step in 1 s slots to observe phase occupancy at boundaries as the
		// simulator does
		end := tt + 1
		ph := w.Phase()
		tm[ph]++
		for {
			tn, ok, p := w.Next(r, tt, end)
			if !ok {
				break
			}
			arr[p]++
			tt = tn
		}
		tt = end
	}
	rate := (arr[0] + arr[1]) / horizon
	if want := w.MeanRate(); math.Abs(rate-want) > 0.06*want {
		t.Errorf("long-run rate %.3f, pi D1 1 = %.3f", rate, want)
	}
	if frac := tm[0] / horizon; math.Abs(frac-pi[0]) > 0.1*pi[0] {
		t.Errorf("time in bursty phase %.4f, stationary %.4f", frac, pi[0])
	}
	for p := 0; p < 2; p++ {
		if got, want := arr[p]/tm[p], w.PhaseRate(p); math.Abs(got-want) > 0.03*want {
			t.Errorf("phase %d: arrivals per second %.3f, D1 row rate %.3f", p, got, want)
		}
	}
}

func TestPeriodicWorkload(t *testing.T) {
	w := NonMarkovian()
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	r := sim.NewRand(2)
	w.Reset(r)
	var arr [2]float64
	tt := 0.0
	const horizon = 3 * (500 + 1/0.036)
	for {
		tn, ok, p := w.Next(r, tt, horizon)
		if !ok {
			break
		}
		arr[p]++
		tt = tn
	}
	rate := (arr[0] + arr[1]) / horizon
	if want := w.MeanRate(); math.Abs(rate-want) > 0.05*want {
		t.Errorf("periodic workload rate %.3f, want %.3f", rate, want)
	}
}

func TestObserve(t *testing.T) {
	cfg := DefaultConfig()
	// a constant arrival stream at a single instance
	m, _ := sim.MMPP([]float64{100}, [][]float64{{0}})
	sys, err := New(cfg, NewMAPWorkload(m), 1)
	if err != nil {
		t.Fatal(err)
	}
	sys.Step([]float64{1, 0, 0, 0})
	o := make([]float64, ObsSize(4, 15, 1, true))
	sys.Observe(o, true)
	per := 2*16 + 1
	l := sys.QueueLen(0)
	if l == 0 || o[l] != 1 {
		t.Fatalf("queue length %d not one-hot in %v", l, o[:16])
	}
	ones := 0
	for _, x := range o[:16] {
		ones += int(x)
	}
	if ones != 1 {
		t.Fatalf("one-hot has %d ones", ones)
	}
	if el := o[16]; !(el >= 0 && el <= 1) {
		t.Fatalf("elapsed service %v not in [0,1]", el)
	}
	for j := 0; j < 16; j++ {
		a := o[17+j]
		if j < l && !(a > 0 && a <= 1) || j >= l && a != 0 {
			t.Fatalf("age %d = %v with %d requests", j, a, l)
		}
		if j > 0 && j < l && a > o[17+j-1] {
			t.Fatalf("ages not oldest first: %v", o[17:17+l])
		}
	}
	for i := 1; i < 4; i++ {
		if o[i*per] != 1 {
			t.Fatalf("idle instance %d: queue one-hot %v", i, o[i*per:i*per+16])
		}
	}
	if o[len(o)-1] != 1 {
		t.Fatalf("full-observability phase one-hot missing")
	}
}

func TestDeterministic(t *testing.T) {
	run := func() PhaseMetrics {
		sys, _ := New(DefaultConfig(), SPPWorkload(), 42)
		y := []float64{0.3, 0.3, 0.2, 0.2}
		for k := 0; k < 3000; k++ {
			sys.Step(y)
		}
		return sys.Metrics().Total()
	}
	if a, b := run(), run(); a != b {
		t.Fatalf("same seed, different metrics: %+v vs %+v", a, b)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.Capacity = 0
	if err := c.Validate(); !errors.Is(err, ErrConfig) {
		t.Fatalf("Capacity 0: err = %v", err)
	}
	c = DefaultConfig()
	c.Instances = append([]Model(nil), c.Instances...)
	c.Instances[1].Service = -1
	if err := c.Validate(); !errors.Is(err, ErrConfig) {
		t.Fatalf("negative service: err = %v", err)
	}
}

// BenchmarkSimulatorSlots measures simulated slots per second on the SPP
// with a fixed routing distribution (the simulator alone, no network).
func BenchmarkSimulatorSlots(b *testing.B) {
	sys, _ := New(DefaultConfig(), SPPWorkload(), 1)
	y := []float64{0.3, 0.3, 0.2, 0.2}
	o := make([]float64, ObsSize(4, 15, 2, false))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sys.Observe(o, false)
		sys.Step(y)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "slots/s")
}
