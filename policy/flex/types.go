package flex

import (
	"errors"
	"fmt"
	"math"
)

// Model is one DNN model's batch-latency profile, paper 004 eq. (1):
// l(B) = Alpha*|B| + Beta, both in milliseconds. ExitPoints is the number of
// preemption exit points of Table 4 (0 means preemption takes effect at once).
type Model struct {
	Name       string
	Alpha      float64
	Beta       float64
	ExitPoints int
}

// Latency is l_m(B) of paper 004 eq. (1) for a batch of n requests, in ms.
func (m Model) Latency(n int) float64 { return m.Alpha*float64(n) + m.Beta }

// Validate checks that the profile is usable.
func (m Model) Validate() error {
	if !(m.Alpha > 0) || math.IsInf(m.Alpha, 0) {
		return fmt.Errorf("flex: model %q: alpha = %v must be positive and finite", m.Name, m.Alpha)
	}
	if !(m.Beta >= 0) || math.IsInf(m.Beta, 0) {
		return fmt.Errorf("flex: model %q: beta = %v must be >= 0 and finite", m.Name, m.Beta)
	}
	if m.ExitPoints < 0 {
		return fmt.Errorf("flex: model %q: exit points = %d must be >= 0", m.Name, m.ExitPoints)
	}
	return nil
}

// Request is one inference request (paper 004 Table 3: a_r, d_r, m_r).
// Model indexes the scheduler's model list; Stream is the request stream it
// belongs to (same model and SLO).
type Request struct {
	ID       uint64
	Stream   int32
	Model    int32
	Arrival  float64
	Deadline float64
}

// Kind is the kind of a Decision.
type Kind uint8

// Decision kinds.
const (
	// Start: run Batch (all of model Model) on GPU from At until Finish.
	Start Kind = iota + 1
	// Preempt: stop the batch BatchID running on GPU at its next exit point
	// (At). Batch lists the preempted requests; those that can still meet
	// their SLO were re-enqueued, the others appear in Drop decisions.
	Preempt
	// Drop: Batch[0] can no longer meet its deadline; reply with an error.
	Drop
)

// String names the kind.
func (k Kind) String() string {
	switch k {
	case Start:
		return "start"
	case Preempt:
		return "preempt"
	case Drop:
		return "drop"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Decision is one output of a scheduler. Batch aliases the scheduler's
// output buffer: it is valid until the next event method is called.
type Decision struct {
	Kind    Kind
	GPU     int
	Model   int
	BatchID uint64
	At      float64
	Finish  float64
	Batch   []Request
}

// Scheduler is the event interface shared by FLEX, SHEPHERD-NP and the
// baselines. Event methods must be called with non-decreasing now.
type Scheduler interface {
	// Name identifies the scheme ("flex", "flex-np", "clockwork", "nexus").
	Name() string
	// Arrive enqueues a new request.
	Arrive(r Request, now float64)
	// Complete reports that batch batchID finished on gpu. Stale reports
	// (a preempted batch's) are ignored.
	Complete(gpu int, batchID uint64, now float64)
	// Tick lets the scheduler drop expired requests.
	Tick(now float64)
	// Decisions returns the decisions made by the last event call.
	Decisions() []Decision
	// Queued reports the number of requests waiting in queues.
	Queued() int
}

// ErrConfig is wrapped by every configuration validation error of this package.
var ErrConfig = errors.New("flex: invalid config")

// Affinity is A(m_i, m_j) of paper 004 Sec. 5.2 (the definition just before
// eq. (4)):
//
//	A = (a_i+b_i)/a_j                                        if a_j+b_j-b_i <= 0
//	A = min((a_i+b_i)/a_j, max(a_i/(a_j+b_j-b_i), a_i/a_j))  otherwise
func Affinity(mi, mj Model) float64 {
	first := (mi.Alpha + mi.Beta) / mj.Alpha
	den := mj.Alpha + mj.Beta - mi.Beta
	if den <= 0 {
		return first
	}
	return math.Min(first, math.Max(mi.Alpha/den, mi.Alpha/mj.Alpha))
}

// K is paper 004 eq. (4): the largest affinity A(m_i, m_j) over all ordered
// pairs of models (including i = j). FLEX is 12.62*K-competitive (Theorem
// 5.2). K of an empty set is 0.
func K(models []Model) float64 {
	k := 0.0
	for i := range models {
		for j := range models {
			k = math.Max(k, Affinity(models[i], models[j]))
		}
	}
	return k
}

// CompetitiveRatio is the bound of paper 004 Theorem 5.2 for a model set:
// 12.62*K.
func CompetitiveRatio(models []Model) float64 { return 12.62 * K(models) }
