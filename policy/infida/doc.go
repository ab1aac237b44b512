// Package infida implements INFIDA (Algorithm 1 of paper 000, Si Salem et
// al., "Towards Inference Delivery Networks", ../shared/seeds/000_*.txt)
// and its baselines as pure policies: state machines with no goroutines,
// no I/O, no clock, and randomness injected as a *rand.Rand, in the style
// of etcd's raft.RawNode. A driver (policy/sim/slot, or the allocator
// actor) calls Allocation() to read x_t and Update(obs) at the end of each
// slot with the batch r_t and the potential available capacities l_t.
//
// Pieces, each named after the paper:
//
//   - VertexState: the fractional state y^v on the capped weighted simplex
//     of eq. 17 (repository models excluded, the corner case ||s^v||_1 <=
//     b^v giving all ones), initialised per Lemma E.5.
//   - Subgradient: eq. 18, centralised. KStar: K*_rho(y) and gamma^{K*}.
//   - LocalEntries, UpstreamStep, DownstreamStep: the per-vertex pieces of
//     the control messages of Sec. IV-B (Z accumulated in increasing cost
//     order, out-of-order (z, gamma) entries carried upstream in
//     UpMsg.Pending, gamma^{K*} carried downstream, h_m of eq. 19).
//     DistributedSubgradient chains them sequentially; it equals
//     Subgradient to 1e-9 (a test), the reference for an actor version.
//   - MirrorStep and Project: Algorithm 1 lines 3-6, the weighted negative
//     entropy mirror map and its Bregman projection (Appendix C, Algorithm
//     2), in O(|M| + c log |M|) for c capped entries.
//   - DepRound: Sec. IV-C, with ResidualRandom (E[x] = y, budget exceeded
//     by at most one model) or ResidualBudget (never exceed b^v; fill the
//     freed budget with the best-scoring models that fit).
//   - Config: eta (or the Appendix F theory value, TheoryEta), the refresh
//     period B and its linear stretching (Sec. VI-B).
//   - Infida (INFIDA), OLAG, StaticGreedy (SG), Static; INFIDA_OFFLINE is
//     trained by policy/sim/slot.TrainOffline (it needs the simulator).
//
// Readings where the paper is ambiguous are stated on the functions: the
// OLAG counters (OLAGCounters), SG's hindsight capacities (contention-free
// min{L, r}) and its first stopping rule ("until either the intermediate
// allocation is capable of serving all requests or none of the remaining
// valid allocations introduces a positive marginal gain", SGConfig), the
// residual rounding, the handling of zero entries in the
// projection, and a floor of 1e-300 on y so the entropy stays finite.
package infida
