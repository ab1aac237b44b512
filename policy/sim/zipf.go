package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// Zipf samples ranks 0..n-1 with P(k) proportional to 1/(k+1)^s, by inverse
// transform over the precomputed CDF (O(log n) per draw, no allocation).
// Unlike math/rand's Zipf it accepts any exponent s >= 0 (the paper-000
// workloads use s = 1.2).
type Zipf struct {
	cdf []float64
}

// NewZipf builds a Zipf sampler over n items with exponent s.
func NewZipf(n int, s float64) (*Zipf, error) {
	if n <= 0 {
		return nil, fmt.Errorf("sim: zipf n must be positive, got %d", n)
	}
	if s < 0 || math.IsNaN(s) || math.IsInf(s, 0) {
		return nil, fmt.Errorf("sim: zipf exponent s must be finite and >= 0, got %v", s)
	}
	cdf := make([]float64, n)
	sum := 0.0
	for k := 0; k < n; k++ {
		sum += math.Pow(float64(k+1), -s)
		cdf[k] = sum
	}
	for k := range cdf {
		cdf[k] /= sum
	}
	cdf[n-1] = 1
	return &Zipf{cdf: cdf}, nil
}

// N is the number of items.
func (z *Zipf) N() int { return len(z.cdf) }

// Prob returns the probability of rank k.
func (z *Zipf) Prob(k int) float64 {
	if k == 0 {
		return z.cdf[0]
	}
	return z.cdf[k] - z.cdf[k-1]
}

// Sample draws one rank.
func (z *Zipf) Sample(r *rand.Rand) int {
	u := r.Float64()
	return sort.SearchFloat64s(z.cdf, u)
}
