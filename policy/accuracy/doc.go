// Package accuracy implements paper 001 (latency-optimal dispatch under an
// average-accuracy constraint): the LP lower bound T_LP-LB(lambda) (eq. 3)
// and lambda^max (Definition 1) solved exactly with a rational simplex, the
// relaxed LP (eq. 8) and its Lemma 3 closed form, the routing tuples and
// S*_opt (Definition 2, eqs. 10-11), Waterfilling (Algorithm 1), and the
// dispatch policies R-JIQ (eq. 4), TAD (Sec. 4), TAD-OP (Algorithm 2) with
// the JIQ baselines of Fig. 1 (fastest-first JFIQ, most-accurate-first) and
// R-JSQ(d) (Sec. 3.2 variants).
//
// The policies are pure state machines: events in (an arrival asks for a
// server; a departure reports the server and whether it became idle), a
// decision out. No goroutines, no I/O, no clock; randomness is an injected
// *rand.Rand. A decision does not allocate.
package accuracy
