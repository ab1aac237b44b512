package sim

// Heap is a binary min-heap of events ordered by time, then by insertion
// sequence so that simultaneous events pop in FIFO order (which keeps runs
// deterministic). E is stored by value: pushing and popping do not allocate
// once the backing slice has grown.
type Heap[E any] struct {
	items []heapItem[E]
	seq   uint64
}

type heapItem[E any] struct {
	t   float64
	seq uint64
	e   E
}

// Len reports the number of pending events.
func (h *Heap[E]) Len() int { return len(h.items) }

// Reset empties the heap, keeping its storage.
func (h *Heap[E]) Reset() { h.items = h.items[:0]; h.seq = 0 }

// Push schedules event e at time t.
func (h *Heap[E]) Push(t float64, e E) {
	h.seq++
	h.items = append(h.items, heapItem[E]{t: t, seq: h.seq, e: e})
	h.up(len(h.items) - 1)
}

// Peek returns the earliest event without removing it. ok is false when the
// heap is empty.
func (h *Heap[E]) Peek() (t float64, e E, ok bool) {
	if len(h.items) == 0 {
		return 0, e, false
	}
	it := h.items[0]
	return it.t, it.e, true
}

// Pop removes and returns the earliest event. ok is false when the heap is
// empty.
func (h *Heap[E]) Pop() (t float64, e E, ok bool) {
	n := len(h.items)
	if n == 0 {
		return 0, e, false
	}
	it := h.items[0]
	h.items[0] = h.items[n-1]
	var zero heapItem[E]
	h.items[n-1] = zero
	h.items = h.items[:n-1]
	if n > 1 {
		h.down(0)
	}
	return it.t, it.e, true
}

func (h *Heap[E]) less(i, j int) bool {
	a, b := &h.items[i], &h.items[j]
	if a.t != b.t {
		return a.t < b.t
	}
	return a.seq < b.seq
}

func (h *Heap[E]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.items[i], h.items[p] = h.items[p], h.items[i]
		i = p
	}
}

func (h *Heap[E]) down(i int) {
	n := len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h.items[i], h.items[m] = h.items[m], h.items[i]
		i = m
	}
}
