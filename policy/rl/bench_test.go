package rl

import (
	"testing"

	"github.com/idn-net/idn/policy/sim"
	"github.com/idn-net/idn/policy/sim/instances"
)

func benchAgent(b *testing.B, T, mb, epochs int) (*Agent, *Batch) {
	b.Helper()
	cfg := DefaultConfig()
	cfg.Rollout, cfg.Minibatch, cfg.Epochs = T, mb, epochs
	w := instances.SPPWorkload()
	a, err := NewAgent(cfg, instances.ObsSize(4, 15, 2, false), 4, w.MeanRate(), 1)
	if err != nil {
		b.Fatal(err)
	}
	sys, err := instances.New(instances.DefaultConfig(), w, 2)
	if err != nil {
		b.Fatal(err)
	}
	batch := NewBatch(T, a.Actor.In(), 4)
	a.Rollout(sys, sim.NewRand(3), batch)
	return a, batch
}

// BenchmarkPPOUpdate10k is one PPO update (one epoch, one mini-batch: the
// actor and critic gradients over 10^4 samples and one Adam step each), on
// one core.
func BenchmarkPPOUpdate10k(b *testing.B) {
	a, batch := benchAgent(b, 10000, 10000, 1)
	r := sim.NewRand(4)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a.Update(batch, r, nil)
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/update")
}

// BenchmarkPPOUpdate10kPaper is the paper's 5 epochs over 10^4 samples
// (Sec. 5.1.5 with T = 10^4), on one core.
func BenchmarkPPOUpdate10kPaper(b *testing.B) {
	a, batch := benchAgent(b, 10000, 10000, 5)
	r := sim.NewRand(4)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a.Update(batch, r, nil)
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/update")
}

// BenchmarkRolloutSlots is training rollout throughput: the simulator plus
// the observation encoding, actor and critic forward passes and action
// sampling, per slot, on one core.
func BenchmarkRolloutSlots(b *testing.B) {
	a, _ := benchAgent(b, 1000, 1000, 1)
	sys, _ := instances.New(instances.DefaultConfig(), instances.SPPWorkload(), 5)
	batch := NewBatch(1000, a.Actor.In(), 4)
	r := sim.NewRand(6)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a.Rollout(sys, r, batch)
	}
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "slots/s")
}
