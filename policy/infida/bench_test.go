package infida_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/idn-net/idn/policy/idn"
	"github.com/idn-net/idn/policy/infida"
	"github.com/idn-net/idn/policy/sim"
	"github.com/idn-net/idn/policy/sim/slot"
)

// BenchmarkINFIDASlotTopologyI measures one INFIDA slot for all 36 vertices
// of Network Topology I at 7,500 rps: subgradient eq. 18, mirror step,
// projection (Algorithm 2) and DepRound at every vertex (B = 1).
func BenchmarkINFIDASlotTopologyI(b *testing.B) {
	c := slot.DefaultExperimentConfig()
	c.Graph = idn.TopologyI()
	c.Slots = 1
	s, err := slot.Prepare(c)
	if err != nil {
		b.Fatal(err)
	}
	in := s.Instance
	p, err := infida.New(in, c.INFIDA, sim.NewRand(1))
	if err != nil {
		b.Fatal(err)
	}
	srv, _ := slot.NewServer(in, c.Serving)
	_, l, served := srv.Serve(s.Batches[0], p.Allocation(), sim.NewRand(2))
	obs := &infida.Observation{R: s.Batches[0], L: l, Served: served}
	b.ReportAllocs()
	b.ResetTimer()
	c0 := cpuTime()
	for i := 0; i < b.N; i++ {
		p.Update(obs)
	}
	b.ReportMetric(float64((cpuTime()-c0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// cpuTime returns the process's user+system CPU time: on a shared,
// oversubscribed machine it measures the work per op better than the
// wall-clock ns/op (reported alongside).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSubgradientTopologyI measures the centralised eq. 18 alone.
func BenchmarkSubgradientTopologyI(b *testing.B) {
	c := slot.DefaultExperimentConfig()
	c.Graph = idn.TopologyI()
	c.Slots = 1
	s, _ := slot.Prepare(c)
	in := s.Instance
	p, _ := infida.New(in, c.INFIDA, sim.NewRand(1))
	srv, _ := slot.NewServer(in, c.Serving)
	_, l, _ := srv.Serve(s.Batches[0], p.Allocation(), sim.NewRand(2))
	g := make([]float64, in.NV*in.NM)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		infida.Subgradient(in, s.Batches[0], l, p.Fractional(), g, nil)
	}
}
