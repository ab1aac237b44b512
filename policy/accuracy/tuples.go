package accuracy

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// TupleKind says which of the three families of paper 001 Sec. 5.2/6 a
// routing tuple belongs to.
type TupleKind uint8

const (
	// Proper is a pair {i,j} with a_i < a* < a_j: q >= 0 (Sec. 6, "properly-paired").
	Proper TupleKind = iota
	// Shuffle is a pair with both accuracies on the same side of a*: one
	// entry of q is negative (Sec. 6, "shuffling-pair"); it moves traffic
	// between two classes.
	Shuffle
	// Singleton is {i} with a_i >= a* and q = e_i (Sec. 5.2).
	Singleton
)

// String returns "proper", "shuffle" or "singleton".
func (k TupleKind) String() string {
	switch k {
	case Proper:
		return "proper"
	case Shuffle:
		return "shuffle"
	case Singleton:
		return "singleton"
	}
	return fmt.Sprintf("TupleKind(%d)", uint8(k))
}

// Tuple is a routing tuple (S, q_S, v_S) of paper 001 Definition 2 (eq. 10).
// For a singleton J is -1. Q is the K-dimensional routing vector (q·1 = 1,
// q·a = a* for pairs), V = q·mu^{-1} its cost.
type Tuple struct {
	I, J int
	Q    []float64
	V    float64
	Kind TupleKind
}

// String formats the tuple with 1-based class numbers as in the paper.
func (t Tuple) String() string {
	var b strings.Builder
	if t.J < 0 {
		fmt.Fprintf(&b, "{%d}", t.I+1)
	} else {
		fmt.Fprintf(&b, "{%d,%d}", t.I+1, t.J+1)
	}
	fmt.Fprintf(&b, " %s q=(", t.Kind)
	for i, q := range t.Q {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%.4g", q)
	}
	fmt.Fprintf(&b, ") v=%.6g", t.V)
	return b.String()
}

// RoutingTuples returns S*_opt of paper 001 eq. (11), ordered by cost v
// ascending (ties broken by (I, J) so the order is deterministic):
//
//	{(S^{(i,j)}, q^{(i,j)}, v^{(i,j)}) : i < j, v^{(i,j)} > 0} ∪ {(S^{(i)}, e_i, 1/mu_i) : a_i >= a*}
//
// with q_i^{(i,j)} = (a_j - a*)/(a_j - a_i), q_j^{(i,j)} = (a* - a_i)/(a_j - a_i)
// (Sec. 5.2). Pairs with a_i = a_j have no routing vector and are skipped.
// A pair with a_i = a* or a_j = a* has a zero entry; it is classed Proper.
func RoutingTuples(s System, astar float64) ([]Tuple, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if err := checkAStar(astar); err != nil {
		return nil, err
	}
	return appendTuples(nil, s, astar), nil
}

// appendTuples appends S*_opt to dst (reusing dst's Q storage where it can)
// and sorts it; s must be valid.
func appendTuples(dst []Tuple, s System, astar float64) []Tuple {
	k := s.K()
	dst = dst[:0]
	add := func(i, j int, kind TupleKind) *Tuple {
		n := len(dst)
		if n < cap(dst) {
			dst = dst[:n+1]
		} else {
			dst = append(dst, Tuple{})
		}
		t := &dst[n]
		if len(t.Q) != k {
			t.Q = make([]float64, k)
		} else {
			clear(t.Q)
		}
		t.I, t.J, t.Kind = i, j, kind
		return t
	}
	for i := 0; i < k; i++ {
		for j := i + 1; j < k; j++ {
			if s.A[i] == s.A[j] {
				continue
			}
			qi := (s.A[j] - astar) / (s.A[j] - s.A[i])
			qj := (astar - s.A[i]) / (s.A[j] - s.A[i])
			v := qi/s.Mu[i] + qj/s.Mu[j]
			if !(v > 0) {
				continue
			}
			kind := Proper
			if qi < 0 || qj < 0 {
				kind = Shuffle
			}
			t := add(i, j, kind)
			t.Q[i], t.Q[j], t.V = qi, qj, v
		}
	}
	for i := 0; i < k; i++ {
		if s.A[i] >= astar {
			t := add(i, -1, Singleton)
			t.Q[i], t.V = 1, 1/s.Mu[i]
		}
	}
	sort.SliceStable(dst, func(x, y int) bool {
		a, b := &dst[x], &dst[y]
		if a.V != b.V {
			return a.V < b.V
		}
		if a.I != b.I {
			return a.I < b.I
		}
		return a.J < b.J
	})
	return dst
}

// Waterfill is the output of paper 001 Algorithm 1.
type Waterfill struct {
	Lambda float64   // normalised arrival rate
	P      []float64 // class mix p (lambda p = sum_k w_k q_k); all zero when lambda = 0
	W      []float64 // tuple weights w_k, aligned with Tuples
	Tuples []Tuple   // S*_opt in the order used
	N      float64   // N_WF(lambda) = sum_k w_k v_k (eq. 12: equals lambda T_LP-LB)
	T      float64   // N_WF / lambda (the latency bound); 0 when lambda = 0
}

// Waterfilling runs paper 001 Algorithm 1: walk S*_opt in cost order; give
// tuple k the largest weight w_k with 0 <= lambda p + w_k q_k <= mu_alpha,
// clipped to [0, lambda_tr]; accumulate lambda p += w_k q_k, N_WF += w_k v_k,
// lambda_tr -= w_k; stop when lambda_tr = 0. If traffic remains the problem is
// infeasible (lambda > lambda^max). Theorem 1: N_WF(lambda) = N_LP-LB(lambda).
//
// Reading: the paper's "lambda_tr = 0" test is done with a relative tolerance
// of 1e-12·lambda, and p is the traffic vector divided by lambda.
func Waterfilling(s System, astar, lambda float64) (Waterfill, error) {
	if err := s.Validate(); err != nil {
		return Waterfill{}, err
	}
	if err := checkAStar(astar); err != nil {
		return Waterfill{}, err
	}
	if !(lambda >= 0) || math.IsInf(lambda, 0) {
		return Waterfill{}, fmt.Errorf("lambda = %v: must be non-negative and finite: %w", lambda, ErrInvalid)
	}
	k := s.K()
	tuples := appendTuples(nil, s, astar)
	wf := Waterfill{Lambda: lambda, P: make([]float64, k), W: make([]float64, len(tuples)), Tuples: tuples}
	x := make([]float64, k) // lambda p
	tr := lambda
	eps := 1e-12 * math.Max(lambda, 1e-300)
	for ti := range tuples {
		if tr <= eps {
			break
		}
		q := tuples[ti].Q
		w := math.Inf(1)
		for i := 0; i < k; i++ {
			cap := s.Alpha[i] * s.Mu[i]
			switch {
			case q[i] > 0:
				w = math.Min(w, (cap-x[i])/q[i])
			case q[i] < 0:
				w = math.Min(w, x[i]/(-q[i]))
			}
		}
		if !(w >= 0) || w > tr {
			w = math.Max(0, math.Min(w, tr))
		}
		if w <= eps { // rounding residue of a class filled by an earlier tuple
			continue
		}
		for i := 0; i < k; i++ {
			x[i] += w * q[i]
			if x[i] < 0 { // rounding guard: a shuffle pair empties a class
				x[i] = 0
			}
		}
		wf.W[ti] = w
		wf.N += w * tuples[ti].V
		tr -= w
	}
	if tr > eps {
		lm, err := LambdaMax(s, astar)
		if err != nil {
			return Waterfill{}, err
		}
		return Waterfill{}, fmt.Errorf("waterfilling: lambda = %v is above lambda^max = %v for astar = %v (%.6g traffic left over): %w", lambda, lm, astar, tr, ErrInfeasible)
	}
	if lambda > 0 {
		for i := 0; i < k; i++ {
			wf.P[i] = x[i] / lambda
		}
		wf.T = wf.N / lambda
	}
	return wf, nil
}
