package allocator

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/idn-net/idn/messages"
	"github.com/idn-net/idn/policy/idn"
	"github.com/idn-net/idn/policy/sim"
	"github.com/idn-net/idn/policy/sim/slot"
)

// BenchmarkProtocolSlot runs one slot of the distributed subgradient
// protocol (paper 000 Sec. IV-B) for every vertex of a topology in one
// goroutine, each batch marshalled and unmarshalled as on the wire, then
// every vertex's mirror-ascent step: the CPU one slot of control costs the
// whole network.
func BenchmarkProtocolSlot(b *testing.B) {
	for _, tc := range []struct {
		name string
		g    *idn.Graph
	}{{"TopologyII", idn.TopologyII()}, {"TopologyI", idn.TopologyI()}} {
		b.Run(tc.name, func(b *testing.B) {
			cat := idn.YOLOv4Catalog()
			keys := slot.BuildTypes(tc.g, cat, slot.WorkloadConfig{EntriesPerTask: 2}, sim.NewRand(1))
			in, err := idn.NewInstance(tc.g, cat, idn.DefaultInstanceConfig(), keys)
			if err != nil {
				b.Fatal(err)
			}
			rng := sim.NewRand(2)
			r := make([]float64, len(in.Types))
			for i := range r {
				r[i] = float64(rng.IntN(20000))
			}
			l := in.FullLoads(r)
			cores := make([]*Core, in.NV)
			for v := range cores {
				cores[v] = NewCore(in, v, 3e-3)
			}
			var bytes int
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var queue []Out
				for _, c := range cores {
					outs, err := c.Start(int64(i), r, l)
					if err != nil {
						b.Fatal(err)
					}
					queue = append(queue, outs...)
				}
				for len(queue) > 0 {
					o := queue[0]
					queue = queue[1:]
					raw, err := proto.Marshal(o.Batch)
					if err != nil {
						b.Fatal(err)
					}
					bytes += len(raw)
					var got messages.ControlBatch
					if err := proto.Unmarshal(raw, &got); err != nil {
						b.Fatal(err)
					}
					outs, err := cores[o.To].Handle(&got)
					if err != nil {
						b.Fatal(err)
					}
					queue = append(queue, outs...)
				}
				for _, c := range cores {
					if !c.Done() {
						b.Fatal("a vertex did not complete its slot")
					}
					c.Step()
				}
			}
			b.ReportMetric(float64(bytes)/float64(b.N), "wireB/slot")
		})
	}
}
