package rl

import (
	"bytes"
	"errors"
	"math"
	"os"
	"testing"

	"github.com/idn-net/idn/policy/sim"
	"github.com/idn-net/idn/policy/sim/instances"
)

// The density of Proposition 2 (eq. 9), integrated over small boxes of the
// simplex coordinates (y1, y2) for n = 3, must match the frequency with which
// the sampler of eq. (8) lands in those boxes.
func TestProposition2DensityMatchesMonteCarlo(t *testing.T) {
	f := []float64{0.3, -0.2, 0.1}
	sigma := 0.698
	r := sim.NewRand(11)
	const N = 600000
	type box struct{ y1, y2, h float64 }
	boxes := []box{{0.33, 0.25, 0.04}, {0.45, 0.2, 0.04}, {0.2, 0.3, 0.04}, {0.6, 0.15, 0.04}}
	counts := make([]int, len(boxes))
	y := make([]float64, 3)
	ly := make([]float64, 3)
	for k := 0; k < N; k++ {
		SampleAction(r, f, sigma, y, ly)
		for i, b := range boxes {
			if math.Abs(y[0]-b.y1) < b.h/2 && math.Abs(y[1]-b.y2) < b.h/2 {
				counts[i]++
			}
		}
	}
	for i, b := range boxes {
		// integrate eq. (9) over the box with a 20x20 midpoint rule
		const g = 20
		p := 0.0
		for a := 0; a < g; a++ {
			for c := 0; c < g; c++ {
				y1 := b.y1 - b.h/2 + (float64(a)+0.5)*b.h/g
				y2 := b.y2 - b.h/2 + (float64(c)+0.5)*b.h/g
				y3 := 1 - y1 - y2
				lyb := []float64{math.Log(y1), math.Log(y2), math.Log(y3)}
				p += math.Exp(LogDensity(f, lyb, sigma, nil)) * (b.h / g) * (b.h / g)
			}
		}
		mc := float64(counts[i]) / N
		se := math.Sqrt(p * (1 - p) / N)
		if math.Abs(mc-p) > 4*se+1e-4 {
			t.Errorf("box %d at (%.2f,%.2f): eq. 9 gives P = %.5f, Monte Carlo %.5f (4 s.e. = %.5f)", i, b.y1, b.y2, p, mc, 4*se)
		}
	}
}

// The density integrates to 1 over the simplex (n = 3).
func TestProposition2DensityNormalised(t *testing.T) {
	f := []float64{0.5, -0.4, 0}
	sigma := 0.698
	const g = 800
	s := 0.0
	h := 1.0 / g
	for a := 0; a < g; a++ {
		for c := 0; c < g; c++ {
			y1 := (float64(a) + 0.5) * h
			y2 := (float64(c) + 0.5) * h
			y3 := 1 - y1 - y2
			if y3 <= 0 {
				continue
			}
			s += math.Exp(LogDensity(f, []float64{math.Log(y1), math.Log(y2), math.Log(y3)}, sigma, nil)) * h * h
		}
	}
	if math.Abs(s-1) > 0.01 {
		t.Fatalf("integral of eq. 9 over the simplex = %v, want 1", s)
	}
}

func TestLogDensityGradient(t *testing.T) {
	r := sim.NewRand(3)
	n := 4
	f := make([]float64, n)
	for i := range f {
		f[i] = r.NormFloat64()
	}
	y := make([]float64, n)
	ly := make([]float64, n)
	SampleAction(r, f, 0.7, y, ly)
	dF := make([]float64, n)
	LogDensity(f, ly, 0.7, dF)
	for i := range f {
		h := 1e-6
		f[i] += h
		up := LogDensity(f, ly, 0.7, nil)
		f[i] -= 2 * h
		dn := LogDensity(f, ly, 0.7, nil)
		f[i] += h
		fd := (up - dn) / (2 * h)
		if math.Abs(fd-dF[i]) > 1e-6*math.Max(1, math.Abs(fd)) {
			t.Errorf("d logpi/df_%d = %v, finite difference %v", i, dF[i], fd)
		}
	}
}

func randomInput(r interface{ Float64() float64 }, n int) []float64 {
	x := make([]float64, n)
	for i := range x {
		if r.Float64() < 0.4 { // sparse like the observation
			x[i] = r.Float64()
		}
	}
	return x
}

func TestMLPGradientMatchesFiniteDifferences(t *testing.T) {
	r := sim.NewRand(5)
	for _, sizes := range [][]int{{9, 7, 5, 3}, {9, 6, 1}} {
		m, err := NewMLP(sizes)
		if err != nil {
			t.Fatal(err)
		}
		m.Init(r, 1)
		for i := range m.P { // non-zero biases too
			m.P[i] += 0.1 * r.NormFloat64()
		}
		x := randomInput(r, sizes[0])
		dOut := make([]float64, m.Out())
		for i := range dOut {
			dOut[i] = r.NormFloat64()
		}
		w := m.NewWork()
		obj := func() float64 {
			out := m.Forward(x, w)
			s := 0.0
			for i := range out {
				s += dOut[i] * out[i]
			}
			return s
		}
		obj()
		g := make([]float64, len(m.P))
		m.Backward(dOut, w, g)
		for i := range m.P {
			h := 1e-6
			old := m.P[i]
			m.P[i] = old + h
			up := obj()
			m.P[i] = old - h
			dn := obj()
			m.P[i] = old
			fd := (up - dn) / (2 * h)
			if math.Abs(fd-g[i]) > 1e-6*math.Max(1, math.Abs(fd)) {
				t.Fatalf("sizes %v param %d: backprop %v, finite difference %v", sizes, i, g[i], fd)
			}
		}
	}
}

// tinyAgent builds a small agent and a batch whose old log-densities come
// from a perturbed policy, so ratios differ from 1 and both PPO branches
// occur.
func tinyAgent(t *testing.T) (*Agent, *Batch) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Hidden = []int{6, 5}
	cfg.Rollout, cfg.Minibatch, cfg.Epochs = 12, 12, 1
	a, err := NewAgent(cfg, 8, 3, 1, 9)
	if err != nil {
		t.Fatal(err)
	}
	r := sim.NewRand(10)
	a.Actor.Init(r, 1)
	b := NewBatch(12, 8, 3)
	w := a.Actor.NewWork()
	y := make([]float64, 3)
	for k := 0; k < b.T; k++ {
		copy(b.Obs[k*8:], randomInput(r, 8))
		f := a.Actor.Forward(b.Obs[k*8:(k+1)*8], w)
		SampleAction(r, f, cfg.Sigma, y, b.LogY[k*3:(k+1)*3])
		b.LogP[k] = LogDensity(f, b.LogY[k*3:(k+1)*3], cfg.Sigma, nil) + 0.15*r.NormFloat64()
		b.Adv[k] = r.NormFloat64()
		b.Ret[k] = r.NormFloat64()
	}
	return a, b
}

func TestPPOLossGradientMatchesFiniteDifferences(t *testing.T) {
	a, b := tinyAgent(t)
	idx := make([]int, b.T)
	for i := range idx {
		idx[i] = i
	}
	gA := make([]float64, len(a.Actor.P))
	gC := make([]float64, len(a.Critic.P))
	st := a.Gradient(b, idx, float64(len(idx)), gA, gC, a.NewScratch())
	if st.ClipFrac == 0 || st.ClipFrac == float64(b.T) {
		t.Logf("clip fraction %v: only one PPO branch exercised", st.ClipFrac)
	}
	check := func(name string, p, g []float64, pick func(actor, critic float64) float64) {
		for i := range p {
			h := 1e-6
			old := p[i]
			p[i] = old + h
			up := pick(a.Loss(b, idx, float64(len(idx))))
			p[i] = old - h
			dn := pick(a.Loss(b, idx, float64(len(idx))))
			p[i] = old
			fd := (up - dn) / (2 * h)
			if math.Abs(fd-g[i]) > 1e-5*math.Max(1, math.Abs(fd)) {
				t.Fatalf("%s param %d: gradient %v, finite difference %v", name, i, g[i], fd)
			}
		}
	}
	check("actor (PPO clipped loss, eq. 10)", a.Actor.P, gA, func(x, _ float64) float64 { return x })
	check("critic (squared error)", a.Critic.P, gC, func(_, y float64) float64 { return y })
}

func TestGAEHandComputed(t *testing.T) {
	rew := []float64{1, 2, 3}
	val := []float64{0.5, 1, 1.5, 2}
	gamma, lambda := 0.9, 0.8
	// delta = r + gamma V' - V: 1.4, 2.35, 3.3; A_t = delta_t + 0.72 A_{t+1}
	want := []float64{1.4 + 0.72*(2.35+0.72*3.3), 2.35 + 0.72*3.3, 3.3}
	adv := make([]float64, 3)
	ret := make([]float64, 3)
	GAE(rew, val, gamma, lambda, adv, ret)
	for i := range want {
		if math.Abs(adv[i]-want[i]) > 1e-12 || math.Abs(ret[i]-(want[i]+val[i])) > 1e-12 {
			t.Errorf("t=%d: A = %v, ret = %v; want %v, %v", i, adv[i], ret[i], want[i], want[i]+val[i])
		}
	}
	if math.Abs(want[0]-4.80272) > 1e-12 {
		t.Fatalf("hand computation wrong: %v", want[0])
	}
}

func TestAdamFirstStepIsSignedLR(t *testing.T) {
	cfg := DefaultConfig()
	o := NewAdam(3)
	p := []float64{1, 2, 3}
	o.Step(p, []float64{0.5, -2, 0}, cfg)
	want := []float64{1 - cfg.LR, 2 + cfg.LR, 3}
	for i := range p {
		if math.Abs(p[i]-want[i]) > 1e-9 {
			t.Errorf("p[%d] = %v, want %v", i, p[i], want[i])
		}
	}
}

// The M/D/1 waiting-time distribution matches a long simulation of a single
// FIFO instance with a large buffer under Poisson arrivals.
func TestMD1WaitCDFMatchesSimulation(t *testing.T) {
	lambda, d := 15.0, 0.043
	m, err := sim.MMPP([]float64{lambda}, [][]float64{{0}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := instances.DefaultConfig()
	cfg.Instances = []instances.Model{instances.Heavyweight()}
	cfg.Capacity = instances.MaxCapacity
	for _, deadline := range []float64{0.1, 0.2, 0.3} {
		cfg.Deadline = deadline
		sys, err := instances.New(cfg, instances.NewMAPWorkload(m), 4)
		if err != nil {
			t.Fatal(err)
		}
		got := Run(sys, &Fixed{Label: "one", Weights: []float64{1}}, 40000).Total()
		simP := float64(got.Delayed) / float64(got.Completed)
		want := 1 - MD1WaitCDF(lambda, d, deadline-d)
		if got.Rejected != 0 {
			t.Fatalf("unexpected rejections %d", got.Rejected)
		}
		if math.Abs(simP-want) > 0.1*want+0.002 {
			t.Errorf("deadline %v: P(sojourn > D) simulated %.4f, M/D/1 formula %.4f", deadline, simP, want)
		}
	}
}

func TestStationaryApproxIsAdaptive(t *testing.T) {
	cfg := instances.DefaultConfig()
	sa, err := StationaryApprox(cfg, instances.SPPWorkload(), 0.02)
	if err != nil {
		t.Fatal(err)
	}
	hb := sa.PerPhase[0][0] + sa.PerPhase[0][1]
	hn := sa.PerPhase[1][0] + sa.PerPhase[1][1]
	if !(hn > 0.95 && hb < 0.35 && hb > 0) {
		t.Fatalf("SA heavyweight share bursty %.3f normal %.3f: want mostly light in bursty, heavy in normal", hb, hn)
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	a, _ := tinyAgent(t)
	a.Steps, a.Updates = 1234, 5
	var buf bytes.Buffer
	if err := WriteCheckpoint(&buf, a, CheckpointMeta{Workload: "spp", Command: "test"}); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	b, meta, err := ReadCheckpoint(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if meta.Version != CheckpointVersion || meta.Steps != 1234 || meta.Command != "test" || b.Updates != 5 {
		t.Fatalf("meta = %+v", meta)
	}
	for i := range a.Actor.P {
		if a.Actor.P[i] != b.Actor.P[i] {
			t.Fatalf("actor param %d differs", i)
		}
	}
	for i := range a.Critic.P {
		if a.Critic.P[i] != b.Critic.P[i] {
			t.Fatalf("critic param %d differs", i)
		}
	}
	bad := append([]byte(nil), data...)
	bad[len(bad)/2] ^= 1
	if _, _, err := ReadCheckpoint(bytes.NewReader(bad)); !errors.Is(err, ErrCheckpoint) {
		t.Fatalf("corrupted checkpoint: err = %v, want ErrCheckpoint", err)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.ClipEps = 0
	if err := c.Validate(); !errors.Is(err, ErrConfig) {
		t.Fatalf("ClipEps 0: err = %v", err)
	}
	c = DefaultConfig()
	c.Minibatch = c.Rollout + 1
	if err := c.Validate(); !errors.Is(err, ErrConfig) {
		t.Fatalf("Minibatch > Rollout: err = %v", err)
	}
}

// A short training run is a deterministic function of its seeds, and the
// agent learns to route the normal state's requests to the heavyweight
// instances more often than the bursty state's.
func TestRolloutAndUpdateDeterministic(t *testing.T) {
	run := func() []float64 {
		cfg := DefaultConfig()
		cfg.Rollout, cfg.Minibatch, cfg.Epochs = 400, 200, 2
		icfg := instances.DefaultConfig()
		w := instances.SPPWorkload()
		a, err := NewAgent(cfg, instances.ObsSize(4, 15, 2, false), 4, w.MeanRate(), 1)
		if err != nil {
			t.Fatal(err)
		}
		sys, err := instances.New(icfg, w, 2)
		if err != nil {
			t.Fatal(err)
		}
		b := NewBatch(cfg.Rollout, a.Actor.In(), 4)
		a.Rollout(sys, sim.NewRand(3), b)
		a.Update(b, sim.NewRand(4), nil)
		return append([]float64(nil), a.Actor.P[:50]...)
	}
	x, y := run(), run()
	for i := range x {
		if x[i] != y[i] {
			t.Fatalf("param %d: %v vs %v: not deterministic", i, x[i], y[i])
		}
	}
}

// The committed checkpoints (see testdata/README.md) decode, match the
// serving system they were trained for, and act on it.
func TestCommittedCheckpoints(t *testing.T) {
	for _, tc := range []struct {
		file string
		fo   bool
	}{{"testdata/rl-po-spp.ckpt", false}, {"testdata/rl-fo-spp.ckpt", true}} {
		fh, err := os.Open(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		a, meta, err := ReadCheckpoint(fh)
		fh.Close()
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if a.Cfg.FullObs != tc.fo || meta.Workload != "spp" || meta.Command == "" {
			t.Fatalf("%s: fo=%v workload=%q command=%q", tc.file, a.Cfg.FullObs, meta.Workload, meta.Command)
		}
		icfg := instances.DefaultConfig()
		if a.Actor.In() != instances.ObsSize(4, icfg.Capacity, 2, tc.fo) {
			t.Fatalf("%s: observation size %d", tc.file, a.Actor.In())
		}
		sys, err := instances.New(icfg, instances.SPPWorkload(), 1)
		if err != nil {
			t.Fatal(err)
		}
		m := Run(sys, NewPolicy("p", a), 2000).Total()
		if m.Arrivals == 0 || m.Goodput <= 0 {
			t.Fatalf("%s: no service: %+v", tc.file, m)
		}
	}
}
