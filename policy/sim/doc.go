// Package sim holds the simulation building blocks shared by every policy in
// policy/: a typed event heap for discrete-event simulation, seeded random
// sources, and workload generators (Poisson, Markovian arrival processes such
// as the switched Poisson process and MMPPs, Zipf popularity).
//
// The package is pure: no goroutines, no I/O, no wall clock. Randomness is
// always an injected *rand.Rand (math/rand/v2), so a simulation run is a
// deterministic function of its inputs and seed.
//
// Domain simulators live in sub-packages that build on this core:
//
//	policy/sim/slot       the slot simulator of paper 000 (INFIDA)
//	policy/sim/farm       n servers in K classes with dispatch policies (paper 001)
//	policy/sim/gpucluster emulated GPU workers with batching and preemption (paper 004)
//	policy/sim/instances  model instances with finite buffers under MAP arrivals (paper 002)
package sim
