package rl

import (
	"math"
	"math/rand/v2"
)

// SampleAction draws the routing distribution of paper 002 eq. (8):
// y = softmax(f + xi), xi ~ N(0, sigma^2 I). It writes y into y and log y
// into logY (computed stably as z_i - logsumexp(z), so log y is finite even
// when y_i underflows). With sigma = 0 it is the deterministic action
// softmax(f) used in evaluation (Sec. 5.1.6).
func SampleAction(r *rand.Rand, f []float64, sigma float64, y, logY []float64) {
	mx := math.Inf(-1)
	for i, fi := range f {
		z := fi
		if sigma > 0 {
			z += sigma * r.NormFloat64()
		}
		logY[i] = z
		if z > mx {
			mx = z
		}
	}
	s := 0.0
	for _, z := range logY {
		s += math.Exp(z - mx)
	}
	lse := mx + math.Log(s)
	for i := range logY {
		logY[i] -= lse
		y[i] = math.Exp(logY[i])
	}
}

// LogDensity is log pi_theta(a|o) of paper 002 Proposition 2, eq. (9), for
// the action a = y (given by logY = log y) when the network outputs f:
//
//	q_i = -f_i + log y_i
//	log pi = (sum q)^2/(2 n sigma^2) - sum q^2/(2 sigma^2)
//	         - (1/2) log n - (n-1) log(sigma sqrt(2 pi)) - sum log y_j.
//
// The density is with respect to the Lebesgue measure on the first n-1
// coordinates of the simplex. If dF is not nil it receives
// d log pi / d f_i = (q_i - mean(q))/sigma^2.
func LogDensity(f, logY []float64, sigma float64, dF []float64) float64 {
	n := float64(len(f))
	s2 := sigma * sigma
	sq, sq2, sly := 0.0, 0.0, 0.0
	for i := range f {
		q := logY[i] - f[i]
		sq += q
		sq2 += q * q
		sly += logY[i]
	}
	lp := sq*sq/(2*n*s2) - sq2/(2*s2) - 0.5*math.Log(n) - (n-1)*math.Log(sigma*math.Sqrt(2*math.Pi)) - sly
	if dF != nil {
		mean := sq / n
		for i := range f {
			dF[i] = (logY[i] - f[i] - mean) / s2
		}
	}
	return lp
}
