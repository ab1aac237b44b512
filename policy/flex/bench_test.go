package flex

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/idn-net/idn/policy/sim"
)

// table4x13 is the first 13 rows of paper 004 Table 4.
func table4x13() []Model {
	return []Model{
		{Name: "RN18", Alpha: 0.22, Beta: 3.74, ExitPoints: 40},
		{Name: "RN34", Alpha: 0.38, Beta: 5.78, ExitPoints: 46},
		{Name: "RN50", Alpha: 0.75, Beta: 7.96, ExitPoints: 46},
		{Name: "RN101", Alpha: 1.25, Beta: 13.57, ExitPoints: 39},
		{Name: "RN152", Alpha: 1.77, Beta: 18.98, ExitPoints: 84},
		{Name: "RS50", Alpha: 1.18, Beta: 15.39, ExitPoints: 78},
		{Name: "RS101", Alpha: 1.91, Beta: 29.21, ExitPoints: 57},
		{Name: "RS200", Alpha: 3.35, Beta: 45.43, ExitPoints: 96},
		{Name: "RS269", Alpha: 4.37, Beta: 74.20, ExitPoints: 128},
		{Name: "DN121", Alpha: 0.69, Beta: 19.96, ExitPoints: 129},
		{Name: "DN161", Alpha: 1.74, Beta: 23.10, ExitPoints: 171},
		{Name: "DN169", Alpha: 0.83, Beta: 27.47, ExitPoints: 120},
		{Name: "DN201", Alpha: 1.12, Beta: 32.33, ExitPoints: 142},
	}
}

type benchEv struct {
	gpu int
	id  uint64
}

// BenchmarkFlexArrival measures one FLEX arrival event (Algorithm 1 lines
// 9-19) in steady state, with G GPUs serving 13 Table-4 models at about
// twice their capacity (queues stay non-empty, preemptions happen). The
// completions that fall due between two arrivals are processed inside the
// timed loop too, so ns/op is the scheduler's cost per arrival.
func BenchmarkFlexArrival(b *testing.B) {
	for _, g := range []int{1, 12, 48, 400} {
		b.Run(fmt.Sprintf("G=%d", g), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Models = table4x13()
			cfg.GPUs = g
			f, err := NewFlex(cfg)
			if err != nil {
				b.Fatal(err)
			}
			r := rand.New(rand.NewPCG(1, 1))
			rate := 2.0 * float64(g) // requests per ms, ~2x capacity
			var h sim.Heap[benchEv]
			now := 0.0
			var id uint64
			step := func() {
				now += r.ExpFloat64() / rate
				for {
					t, e, ok := h.Peek()
					if !ok || t > now {
						break
					}
					h.Pop()
					f.Complete(e.gpu, e.id, t)
					for _, d := range f.Decisions() {
						if d.Kind == Start {
							h.Push(d.Finish, benchEv{d.GPU, d.BatchID})
						}
					}
				}
				id++
				m := int32(r.IntN(13))
				f.Arrive(Request{ID: id, Model: m, Arrival: now, Deadline: now + 250}, now)
				for _, d := range f.Decisions() {
					if d.Kind == Start {
						h.Push(d.Finish, benchEv{d.GPU, d.BatchID})
					}
				}
			}
			for i := 0; i < 200000; i++ { // warm up: queues and buffers grown
				step()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				step()
			}
		})
	}
}
