package sim

import (
	"math"
	"math/rand/v2"
)

// NewRand returns a deterministic PCG-backed random source for seed. Two
// sources made from the same seed produce the same stream.
func NewRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// SplitSeed derives the i-th independent child seed from a parent seed
// (SplitMix64 finaliser), so parallel runs or per-entity streams stay
// reproducible without sharing one *rand.Rand.
func SplitSeed(seed uint64, i uint64) uint64 {
	z := seed + (i+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Exp draws an exponential variate with the given rate (mean 1/rate).
// A rate <= 0 yields +Inf (the event never happens).
func Exp(r *rand.Rand, rate float64) float64 {
	if rate <= 0 {
		return math.Inf(1)
	}
	return r.ExpFloat64() / rate
}
