package farm_test

import (
	"testing"

	"github.com/idn-net/idn/policy/accuracy"
	"github.com/idn-net/idn/policy/sim"
	"github.com/idn-net/idn/policy/sim/farm"
)

func farmRun(b *testing.B, name string, n int, rho float64, svc farm.Service, deps int64) farm.Result {
	c := accuracy.DefaultConfig()
	c.N = n
	lm, _ := accuracy.LambdaMax(c.System, c.AStar)
	c.Lambda = rho * lm
	p, err := accuracy.New(name, c, sim.NewRand(7))
	if err != nil {
		b.Fatal(err)
	}
	l, _ := accuracy.NewLayout(n, c.System.Alpha)
	res, err := farm.Run(farm.Config{Mu: c.System.Mu, A: c.System.A, Counts: l.Count, Lambda: c.Lambda,
		Service: svc, MaxDepartures: deps, Seed: 3}, p)
	if err != nil {
		b.Fatal(err)
	}
	return res
}

// BenchmarkEvents reports simulated events per second (arrivals and
// departures, each including the policy's decision or token update) on one
// core: n=4096, a*=76, load 0.9 of lambda^max, 10^6 departures per op.
func BenchmarkEvents(b *testing.B) {
	for _, svc := range []farm.Service{farm.Exponential, farm.Deterministic} {
		for _, name := range []string{"tadop", "rjiq", "jfiq"} {
			b.Run(svc.String()+"/"+name, func(b *testing.B) {
				b.ReportAllocs()
				var ev int64
				for i := 0; i < b.N; i++ {
					ev += farmRun(b, name, 4096, 0.9, svc, 1_000_000).Events
				}
				b.ReportMetric(float64(ev)/b.Elapsed().Seconds(), "events/s")
			})
		}
	}
}

// BenchmarkPaperPoint4096 is one point of Fig. 7 at full length: n=4096,
// TAD-OP, load 0.9, n*10^5 departures (run with -benchtime=1x).
func BenchmarkPaperPoint4096(b *testing.B) {
	for i := 0; i < b.N; i++ {
		res := farmRun(b, "tadop", 4096, 0.9, farm.Exponential, 4096*100_000)
		b.ReportMetric(float64(res.Events)/b.Elapsed().Seconds(), "events/s")
		b.ReportMetric(res.MeanResponse, "T")
		b.ReportMetric(res.MeanAccuracy, "acc")
	}
}
