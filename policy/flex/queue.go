package flex

// queue holds requests sorted by ascending deadline (ties in insertion
// order): the per-model priority queue Q_m of paper 004 Algorithm 1 line 3.
// It is a slice with a moving head so that dropping expired requests from the
// front and appending in deadline order are O(1); a batch is removed as one
// contiguous range.
type queue struct {
	buf  []Request
	head int
}

func (q *queue) len() int { return len(q.buf) - q.head }

// at returns the i-th request in deadline order.
func (q *queue) at(i int) *Request { return &q.buf[q.head+i] }

// insert places r after every request with deadline <= r.Deadline.
func (q *queue) insert(r Request) {
	n := len(q.buf)
	if n == cap(q.buf) && q.head > 0 {
		// reclaim the consumed prefix before growing
		m := copy(q.buf, q.buf[q.head:])
		clear(q.buf[m:])
		q.buf = q.buf[:m]
		q.head = 0
		n = m
	}
	if n == q.head || q.buf[n-1].Deadline <= r.Deadline {
		q.buf = append(q.buf, r)
		return
	}
	// upper bound by binary search over [head, n)
	lo, hi := q.head, n
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if q.buf[mid].Deadline <= r.Deadline {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	q.buf = append(q.buf, Request{})
	copy(q.buf[lo+1:], q.buf[lo:n])
	q.buf[lo] = r
}

// popFront removes and returns the earliest-deadline request.
func (q *queue) popFront() Request {
	r := q.buf[q.head]
	q.head++
	if q.head == len(q.buf) {
		q.buf = q.buf[:0]
		q.head = 0
	}
	return r
}

// countAtLeast returns the number of requests with deadline >= t.
func (q *queue) countAtLeast(t float64) int {
	return len(q.buf) - q.firstAtLeast(t)
}

// firstAtLeast returns the absolute buf index of the first request with
// deadline >= t (len(buf) if none).
func (q *queue) firstAtLeast(t float64) int {
	lo, hi := q.head, len(q.buf)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if q.buf[mid].Deadline < t {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// take appends k requests starting at absolute index i to dst and removes
// them from the queue.
func (q *queue) take(dst []Request, i, k int) []Request {
	dst = append(dst, q.buf[i:i+k]...)
	if i == q.head {
		q.head += k
		if q.head == len(q.buf) {
			q.buf = q.buf[:0]
			q.head = 0
		}
		return dst
	}
	n := copy(q.buf[i:], q.buf[i+k:])
	clear(q.buf[i+n:])
	q.buf = q.buf[:i+n]
	return dst
}

// largestFeasible implements the batch-size search of paper 004 Algorithm 2
// (lines 5-13) exactly: the largest k <= maxB such that k requests of the
// queue (plus the sorted extra set, used for the running batch B_c(n) when
// it runs the same model) can all finish by their deadlines when a batch of
// size k starts at time start: count(d >= start + alpha*k + beta) >= k.
// The predicate is monotone in k (the count falls, k rises), so a binary
// search finds the largest k. It returns k and the finish time of the batch.
func largestFeasible(q *queue, extra []Request, m *Model, start float64, maxB int) (int, float64) {
	n := q.len() + len(extra)
	if n > maxB {
		n = maxB
	}
	lo, hi := 0, n // invariant: lo feasible (0 trivially), answer in [lo, hi]
	if len(extra) == 0 {
		// count(d >= fin) >= k  <=>  the k-th largest deadline >= fin: O(1)
		end := len(q.buf)
		for lo < hi {
			k := (lo + hi + 1) / 2
			if q.buf[end-k].Deadline >= start+m.Alpha*float64(k)+m.Beta {
				lo = k
			} else {
				hi = k - 1
			}
		}
		return lo, start + m.Alpha*float64(lo) + m.Beta
	}
	for lo < hi {
		k := (lo + hi + 1) / 2
		fin := start + m.Alpha*float64(k) + m.Beta
		c := q.countAtLeast(fin)
		if c < k && len(extra) > 0 {
			c += countAtLeast(extra, fin)
		}
		if c >= k {
			lo = k
		} else {
			hi = k - 1
		}
	}
	return lo, start + m.Alpha*float64(lo) + m.Beta
}

// countAtLeast counts requests of a deadline-sorted slice with deadline >= t.
func countAtLeast(rs []Request, t float64) int {
	lo, hi := 0, len(rs)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if rs[mid].Deadline < t {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return len(rs) - lo
}

// BatchGen is the per-model core of paper 004 Algorithm 2 (BATCHGEN, lines
// 4-13) as a stand-alone function: from the queued requests of one model
// (any order) plus, when the GPU's running batch uses the same model, that
// batch's requests (lines 6-7), it drops nothing but returns the largest
// batch that can start at start and finish by every member's deadline under
// l(B) = alpha*|B| + beta (eq. (1)), capped at maxBatch. Among batches of
// that size it takes the earliest deadlines that can still wait (the
// ascending-deadline scan of line 9). The result is sorted by deadline and
// freshly allocated; nil when no request fits.
func BatchGen(queued, running []Request, m Model, start float64, maxBatch int) []Request {
	var q queue
	for _, r := range queued {
		q.insert(r)
	}
	for _, r := range running {
		q.insert(r)
	}
	k, fin := largestFeasible(&q, nil, &m, start, maxBatch)
	if k == 0 {
		return nil
	}
	return q.take(nil, q.firstAtLeast(fin), k)
}
