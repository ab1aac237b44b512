package sim

import (
	"math"
	"sort"
	"testing"
)

func TestHeapOrdersByTimeThenFIFO(t *testing.T) {
	r := NewRand(1)
	var h Heap[int]
	var want []float64
	for i := 0; i < 1000; i++ {
		x := math.Floor(r.Float64() * 50) // many ties
		h.Push(x, i)
		want = append(want, x)
	}
	sort.Float64s(want)
	lastT, lastSeq := -1.0, -1
	for i := 0; h.Len() > 0; i++ {
		tm, e, _ := h.Pop()
		if tm != want[i] {
			t.Fatalf("pop %d: time %v, want %v", i, tm, want[i])
		}
		if tm == lastT && e < lastSeq {
			t.Fatalf("tie at %v popped %d after %d: not FIFO", tm, e, lastSeq)
		}
		lastT, lastSeq = tm, e
	}
}

func TestZipfMatchesClosedForm(t *testing.T) {
	z, err := NewZipf(20, 1.2)
	if err != nil {
		t.Fatal(err)
	}
	h := 0.0
	for k := 1; k <= 20; k++ {
		h += math.Pow(float64(k), -1.2)
	}
	for k := 0; k < 20; k++ {
		want := math.Pow(float64(k+1), -1.2) / h
		if math.Abs(z.Prob(k)-want) > 1e-12 {
			t.Fatalf("P(%d)=%v want %v", k, z.Prob(k), want)
		}
	}
	r := NewRand(7)
	const n = 200000
	counts := make([]int, 20)
	for i := 0; i < n; i++ {
		counts[z.Sample(r)]++
	}
	for k := 0; k < 20; k++ {
		p := z.Prob(k)
		sd := math.Sqrt(p * (1 - p) / n)
		if d := math.Abs(float64(counts[k])/n - p); d > 5*sd {
			t.Fatalf("rank %d empirical %v vs %v (%.1f sd)", k, float64(counts[k])/n, p, d/sd)
		}
	}
	if _, err := NewZipf(0, 1); err == nil {
		t.Fatal("NewZipf(0) accepted")
	}
}

func TestSPPStationaryAndLongRunRate(t *testing.T) {
	p := SPP()
	pi := p.Stationary()
	// Two-state CTMC: pi0 = q10/(q01+q10) with q01 = 0.036, q10 = 0.002.
	want0 := 0.002 / (0.036 + 0.002)
	if math.Abs(pi[0]-want0) > 1e-12 || math.Abs(pi[0]+pi[1]-1) > 1e-12 {
		t.Fatalf("pi = %v, want [%v %v]", pi, want0, 1-want0)
	}
	wantRate := want0*180 + (1-want0)*10
	// The paper's text: arrivals are a fifty-fifty mixture of both states.
	if a, b := want0*180, (1-want0)*10; math.Abs(a-b)/b > 1e-9 {
		t.Fatalf("bursty and normal arrival rates %v and %v are not equal", a, b)
	}
	if math.Abs(p.Rate()-wantRate) > 1e-9 {
		t.Fatalf("rate %v want %v", p.Rate(), wantRate)
	}
	// A long realisation's empirical rate approaches the stationary one.
	r := NewRand(3)
	s := p.Start(r)
	total, n := 0.0, 0
	for total < 2e6 {
		dt, _ := s.Next(r)
		total += dt
		n++
	}
	if got := float64(n) / total; math.Abs(got-wantRate)/wantRate > 0.05 {
		t.Fatalf("empirical rate %v, stationary %v", got, wantRate)
	}
}

func TestNewMAPRejectsBadRows(t *testing.T) {
	if _, err := NewMAP([][]float64{{-1}}, [][]float64{{2}}); err == nil {
		t.Fatal("row sum != 0 accepted")
	}
	if _, err := NewMAP([][]float64{{1}}, [][]float64{{-1}}); err == nil {
		t.Fatal("positive diagonal accepted")
	}
	if _, err := MMPP([]float64{1, 2}, [][]float64{{0, 1}, {1, 0}}); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkHeapPushPop(b *testing.B) {
	var h Heap[int]
	r := NewRand(1)
	for i := 0; i < 1024; i++ {
		h.Push(r.Float64(), i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tm, e, _ := h.Pop()
		h.Push(tm+r.Float64(), e)
	}
}
