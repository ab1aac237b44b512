package farm

import (
	"testing"

	"github.com/idn-net/idn/policy/sim"
)

// heapEngine is the straightforward alternative to the race engine: one
// sim.Heap event per pending arrival and per busy server's departure. It is
// kept only to measure the choice (BenchmarkHeapEngine vs BenchmarkRaceEngine).
func heapEngine(n int, lambda, mu float64, deps int64, seed uint64) (events int64) {
	type ev struct{ server int32 } // -1 = arrival
	r := sim.NewRand(seed)
	var h sim.Heap[ev]
	q := make([]int32, n)
	h.Push(sim.Exp(r, lambda*float64(n)), ev{-1})
	var done int64
	for done < deps {
		t, e, _ := h.Pop()
		events++
		if e.server < 0 {
			s := r.IntN(n)
			q[s]++
			if q[s] == 1 {
				h.Push(t+sim.Exp(r, mu), ev{int32(s)})
			}
			h.Push(t+sim.Exp(r, lambda*float64(n)), ev{-1})
			continue
		}
		done++
		q[e.server]--
		if q[e.server] > 0 {
			h.Push(t+sim.Exp(r, mu), e)
		}
	}
	return events
}

type randomServer struct {
	r *randSrc
	n int
}

type randSrc = struct{ x uint64 }

func (p *randomServer) Dispatch() int {
	p.r.x = p.r.x*6364136223846793005 + 1442695040888963407
	return int((p.r.x >> 33) % uint64(p.n))
}
func (p *randomServer) Departed(int, bool) {}
func (p *randomServer) Blocked(int)        {}

// BenchmarkHeapEngine: n=4096 homogeneous servers (mu=1, load 0.9, random
// dispatch), 10^6 departures per op, with the generic event heap.
func BenchmarkHeapEngine(b *testing.B) {
	var ev int64
	for i := 0; i < b.N; i++ {
		ev += heapEngine(4096, 0.9, 1, 1_000_000, uint64(i))
	}
	b.ReportMetric(float64(ev)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkRaceEngine: the same model on farm's exponential race engine.
func BenchmarkRaceEngine(b *testing.B) {
	var ev int64
	for i := 0; i < b.N; i++ {
		res, err := Run(Config{Mu: []float64{1}, A: []float64{1}, Counts: []int{4096}, Lambda: 0.9, MaxDepartures: 1_000_000, Seed: uint64(i)},
			&randomServer{r: &randSrc{x: uint64(i)}, n: 4096})
		if err != nil {
			b.Fatal(err)
		}
		ev += res.Events
	}
	b.ReportMetric(float64(ev)/b.Elapsed().Seconds(), "events/s")
}
