// Package flex implements the online serving side of paper 004 (Zhang, Tang,
// Khandelwal, Stoica — "SHEPHERD: Serving DNNs in the Wild", NSDI 2023):
// FLEX (Algorithm 1) with its batch generation (Algorithm 2), the
// non-preemptive variant SHEPHERD-NP, and two baselines, a Clockwork-like
// global earliest-deadline-first scheduler and a Nexus-like periodic
// per-stream planner. It also holds the model-affinity metric A(m_i, m_j) and
// K of paper 004 eq. (4).
//
// Every scheduler is a pure state machine in the style of etcd-raft's
// RawNode: events go in (Arrive, Complete, Tick, with the current time passed
// in), decisions come out (Decisions: start a batch on a GPU, preempt a GPU,
// drop a request). There are no goroutines, no I/O and no clock; the caller
// (the discrete-event simulator in policy/sim/gpucluster, or later the node's
// scheduler actor driving gpu executors) applies the decisions.
//
// Time is a float64 in milliseconds throughout. Batch latency follows paper
// 004 eq. (1): l_m(B) = alpha_m*|B| + beta_m. A batch started at time s
// meets its deadline when s + l_m(B) <= min deadline of its requests.
//
// Readings chosen where paper 004 is ambiguous:
//
//   - Expiry (Algorithm 2 line 4, "dequeue requests passing their
//     deadlines"): a request is dropped, with a Drop decision so the caller
//     can reply, as soon as it cannot finish even alone: now + l_m(1) >
//     deadline.
//   - Largest feasible batch (Algorithm 2 lines 5-13, whose "else" branch is
//     cut in the extracted text): we compute the exact largest k <= MaxBatch
//     such that k requests can all meet their deadlines, i.e. the largest k
//     with #{r : d_r >= start + alpha*k + beta} >= k, and take the k earliest
//     such deadlines. A plain ascending scan that stops at the first misfit
//     can miss larger batches when the earliest deadline is tight.
//   - Ties between models of equal batch size go to the lowest model index.
//   - An idle GPU starts the best candidate at once on every arrival
//     (Algorithm 1 line 14-15); on a completion every idle GPU is refilled
//     (the paper only names the completing one; the others are idle only when
//     nothing was feasible, so this changes nothing but robustness).
//   - Preemption with exit points (Sec. 6): the preempted batch stops at its
//     next exit point (exit points evenly spaced over the batch), and the
//     candidate B_g(n) is evaluated for a start at that exit point, so a
//     batch is never started that cannot finish in time. The execution-time
//     overhead of exit points (< 5% in Fig. 12) is not modelled.
//   - The preemption rule is applied per GPU in index order, looping until
//     no GPU changes, since re-enqueued requests are new arrivals (line 19).
package flex
