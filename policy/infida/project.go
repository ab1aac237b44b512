package infida

import (
	"math"
)

// tiny is the floor applied to fractional states after a projection so the
// negative-entropy mirror map stays finite (y > 0, domain D of Appendix C).
const tiny = 1e-300

// Project computes the Bregman projection of paper 000 Appendix C
// (Algorithm 2, Theorem C.1) of yp > 0 onto the weighted capped simplex
// {y in [0,1]^n : sum_m s_m y_m = b} (eq. 17) under the weighted negative
// entropy Phi(y) = sum_m s_m y_m log y_m, writing the result to out (which
// may alias yp). The solution is y_m = min{1, m_k yp_m} with m_k = e^tau of
// eq. 67 and the k of eq. 68.
//
// Corner cases: if sum_m s_m <= b every y_m is 1 (Sec. IV-A); if b <= 0
// every y_m is 0. Entries equal to 0 cannot be scaled up; if the positive
// entries cannot reach the budget even when capped, the zero entries share
// the remaining budget uniformly (a reading: the projection is undefined
// there, this keeps y feasible).
//
// Instead of sorting all of yp (O(n log n)), the entries are visited in
// decreasing order through a binary heap built in O(n); only the capped
// entries are popped, so the cost is O(n + c log n) for c capped entries,
// within the O(|M| log |M|) of Theorem C.1. heap is scratch space of
// length >= n (allocated when nil or short) and is returned for reuse.
func Project(yp, s []float64, b float64, out []float64, heap []int32) []int32 {
	n := len(yp)
	total := 0.0
	for _, v := range s[:n] {
		total += v
	}
	if total <= b {
		for i := range out[:n] {
			out[i] = 1
		}
		return heap
	}
	if b <= 0 {
		for i := range out[:n] {
			out[i] = 0
		}
		return heap
	}
	rest := 0.0 // sum of s_m yp_m over uncapped entries
	for i, v := range yp[:n] {
		rest += s[i] * v
	}
	if cap(heap) < n {
		heap = make([]int32, n)
	}
	heap = heap[:n]
	for i := range heap {
		heap[i] = int32(i)
	}
	h := maxHeap{idx: heap, key: yp}
	h.init()
	budget := b // b minus the sizes of capped entries
	var mk float64
	exact := true // rest was summed directly over the uncapped entries
	sub := 0.0    // magnitude subtracted from rest since the last exact sum
	for {
		if rest <= 0 || !exact && rest < 1e-6*sub {
			// cancellation in the running difference: re-sum exactly.
			rest = 0
			for _, i := range heap[:h.n] {
				rest += s[i] * yp[i]
			}
			exact, sub = true, 0
		}
		if rest <= 0 {
			mk = math.Inf(1)
			break
		}
		mk = budget / rest                      // eq. 67
		if h.len() == 0 || yp[h.top()]*mk < 1 { // eq. 68: y'_k m_k < 1 <= y'_{k+1} m_k
			if exact {
				break
			}
			// confirm with an exactly summed rest before accepting k.
			rest = 0
			for _, i := range heap[:h.n] {
				rest += s[i] * yp[i]
			}
			exact, sub = true, 0
			continue
		}
		top := h.top()
		h.pop()
		budget -= s[top]
		rest -= s[top] * yp[top]
		sub += s[top] * yp[top]
		exact = false
	}
	// The popped (capped) entries sit at heap[h.n:].
	for _, i := range heap[:h.n] {
		out[i] = yp[i] * mk
	}
	if math.IsInf(mk, 1) {
		// only zero entries remain uncapped: share the remaining budget.
		zs := 0.0
		for _, i := range heap[:h.n] {
			zs += s[i]
		}
		for _, i := range heap[:h.n] {
			out[i] = math.Min(1, budget/zs)
		}
	}
	for _, i := range heap[h.n:] {
		out[i] = 1
	}
	for i := range out[:n] {
		if out[i] < tiny {
			out[i] = tiny
		}
	}
	return heap
}

// maxHeap is a binary max-heap of indices keyed by key[idx]; popped
// elements are moved to the tail of idx (idx[n:]). Ties are broken by the
// smaller index so the result is deterministic.
type maxHeap struct {
	idx []int32
	key []float64
	n   int
}

func (h *maxHeap) less(a, b int32) bool { // a above b
	ka, kb := h.key[a], h.key[b]
	if ka != kb {
		return ka > kb
	}
	return a < b
}

func (h *maxHeap) init() {
	h.n = len(h.idx)
	for i := h.n/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *maxHeap) len() int   { return h.n }
func (h *maxHeap) top() int32 { return h.idx[0] }

func (h *maxHeap) pop() {
	h.n--
	h.idx[0], h.idx[h.n] = h.idx[h.n], h.idx[0]
	h.down(0)
}

func (h *maxHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= h.n {
			return
		}
		j := l
		if r := l + 1; r < h.n && h.less(h.idx[r], h.idx[l]) {
			j = r
		}
		if !h.less(h.idx[j], h.idx[i]) {
			return
		}
		h.idx[i], h.idx[j] = h.idx[j], h.idx[i]
		i = j
	}
}

// MirrorStep performs lines 3-5 of Algorithm 1 of paper 000 for one vertex
// with the weighted negative entropy mirror map Phi^v(y) = sum_m s_m y_m
// log y_m: grad Phi^v(y)_m = s_m(1 + log y_m), so the dual step
// s_m(1+log h_m) = s_m(1+log y_m) + eta g_m gives h_m = y_m exp(eta g_m/s_m).
// The result is written to out, scaled by a common positive factor (the
// projection onto the capped simplex is invariant to it) so that no entry
// overflows.
func MirrorStep(y, g, s []float64, eta float64, out []float64) {
	maxE := 0.0
	for i := range y {
		if e := eta * g[i] / s[i]; e > maxE {
			maxE = e
		}
	}
	shift := 0.0
	if maxE > 600 {
		shift = maxE - 600
	}
	for i := range y {
		e := eta*g[i]/s[i] - shift
		if e == 0 {
			out[i] = y[i]
			continue
		}
		out[i] = y[i] * math.Exp(e)
	}
}
