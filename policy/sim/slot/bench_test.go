package slot

import (
	"syscall"
	"testing"
	"time"

	"github.com/idn-net/idn/policy/idn"
)

// BenchmarkSlidingExperiment720 runs the 12-hour sliding-popularity
// experiment (720 one-minute slots) on Network Topology I with all four
// policies (INFIDA, OLAG, SG, INFIDA_OFFLINE), alpha = 1, 7,500 rps.
func BenchmarkSlidingExperiment720(b *testing.B) {
	c := DefaultExperimentConfig()
	c.Graph = idn.TopologyI()
	c.Workload.Profile = Sliding
	b.ReportAllocs()
	c0 := cpuTime()
	for i := 0; i < b.N; i++ {
		if _, err := RunExperiment(c, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime()-c0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// cpuTime returns the process's user+system CPU time (see the infida
// benchmark: wall-clock ns/op is inflated on an oversubscribed machine).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
