package infida

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
)

// ResidualMode chooses how DepRound handles the residual fractional
// variable (paper 000 Sec. IV-C, last paragraphs).
type ResidualMode int

const (
	// ResidualRandom rounds the residual variable to 1 with probability
	// equal to its value, keeping E[x] = y; the budget may be exceeded by at
	// most the residual model's size.
	ResidualRandom ResidualMode = iota
	// ResidualBudget never exceeds the budget: when the residual variable
	// is rounded to 1 but does not fit, it is dropped and the free budget is
	// filled with the models of best score (marginal gain) that fit.
	ResidualBudget
)

// String names the mode.
func (m ResidualMode) String() string {
	switch m {
	case ResidualRandom:
		return "random"
	case ResidualBudget:
		return "budget"
	}
	return "unknown"
}

// intEps is the distance to 0 or 1 under which a variable counts as integral.
const intEps = 1e-9

// DepRound samples an integral allocation x from the fractional state y of
// one vertex (paper 000 Sec. IV-C, DepRound of [61]): it repeatedly picks
// two fractional variables y_i, y_j and moves mass between them so that at
// least one becomes integral while s_i y_i + s_j y_j is unchanged and the
// expectation of each is preserved. At most one residual fractional
// variable remains; it is handled according to mode. y is not modified; x
// receives the 0/1 result. score(m) ranks candidates for filling the free
// budget in ResidualBudget mode (nil: by y_m). It runs in O(n).
func DepRound(rng *rand.Rand, y, s []float64, b float64, mode ResidualMode, score func(m int) float64, x []float64) {
	var r Rounder
	r.DepRound(rng, y, s, b, mode, score, x)
}

// Rounder runs DepRound with reusable scratch space (no allocation in
// steady state). The zero value is ready to use.
type Rounder struct {
	cand []scored
}

type scored struct {
	m     int
	score float64
}

// DepRound is the package-level DepRound using r's scratch space.
func (r *Rounder) DepRound(rng *rand.Rand, y, s []float64, b float64, mode ResidualMode, score func(m int) float64, x []float64) {
	copy(x, y)
	cur := -1 // index of the pending fractional variable
	for j := range x {
		if x[j] <= intEps {
			x[j] = 0
			continue
		}
		if x[j] >= 1-intEps {
			x[j] = 1
			continue
		}
		if cur < 0 {
			cur = j
			continue
		}
		i := cur
		// move mass: y_i up by a (y_j down by a*s_i/s_j) or y_i down by c.
		a := math.Min(1-x[i], x[j]*s[j]/s[i])
		c := math.Min(x[i], (1-x[j])*s[j]/s[i])
		if rng.Float64()*(a+c) < c {
			x[i] += a
			x[j] -= a * s[i] / s[j]
		} else {
			x[i] -= c
			x[j] += c * s[i] / s[j]
		}
		iInt := x[i] <= intEps || x[i] >= 1-intEps
		jInt := x[j] <= intEps || x[j] >= 1-intEps
		x[i] = snap(x[i])
		x[j] = snap(x[j])
		switch {
		case iInt && jInt:
			cur = -1
		case iInt:
			cur = j
		default:
			cur = i
		}
	}
	if cur < 0 {
		return
	}
	p := x[cur]
	if rng.Float64() < p {
		x[cur] = 1
	} else {
		x[cur] = 0
	}
	if mode != ResidualBudget || x[cur] == 0 {
		return
	}
	used := 0.0
	for m, v := range x {
		used += v * s[m]
	}
	if used <= b*(1+1e-12) {
		return
	}
	x[cur] = 0
	used -= s[cur]
	// fill the free budget with the best-scoring models that fit: visiting
	// the candidates by decreasing score and taking each one that still
	// fits picks, at every step, the best-scoring model that fits.
	free := b*(1+1e-12) - used
	cand := r.cand[:0]
	for m, v := range x {
		if v == 0 && m != cur && s[m] <= free {
			sc := y[m]
			if score != nil {
				sc = score(m)
			}
			if sc > 0 {
				cand = append(cand, scored{m, sc})
			}
		}
	}
	r.cand = cand
	slices.SortStableFunc(cand, func(a, b scored) int { return cmp.Compare(b.score, a.score) })
	for _, c := range cand {
		if s[c.m] <= free {
			x[c.m] = 1
			free -= s[c.m]
		}
	}
}

func snap(v float64) float64 {
	if v <= intEps {
		return 0
	}
	if v >= 1-intEps {
		return 1
	}
	return v
}
