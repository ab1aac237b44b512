package allocator

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/idn-net/idn/actors/scheduler"
	"github.com/idn-net/idn/policy/idn"
)

// Meter counts, per slot, the measurements of paper 000 Sec. III-D at one
// vertex v: the arrivals r_rho of the request types entering the network at
// v, and the requests each type has been served by each model at v, from
// which Measure derives the potential available capacities l of eq. 7
// (before the clamp with r_rho, done by the allocator Core with the r_rho of
// the upstream message). Slot s covers Unix time [s*S, (s+1)*S).
//
// The vertex scheduler records into it (it implements scheduler.Meter) and
// the allocator reads it at the end of each slot; it is safe for concurrent
// use. Names it does not know (a task, entry or model outside the instance)
// are ignored.
type Meter struct {
	in      *idn.Instance
	v       int
	slotLen int64 // ns
	// local lists the candidates at v of the types through v.
	local []localCand
	// byTypeModel maps (rho, model index) to an index into local.
	byTypeModel map[[2]int]int

	mu    sync.Mutex
	slots map[int64]*slotCounts
}

// localCand is candidate k of type rho: model m at the meter's vertex.
type localCand struct {
	rho, k, m int
}

// slotCounts are one slot's counters.
type slotCounts struct {
	arrivals []float64 // per type (only types entering at v)
	served   []float64 // per local candidate
	total    []float64 // per model: requests served at v in the slot
}

var _ scheduler.Meter = (*Meter)(nil)

// NewMeter returns the meter of vertex index v of in, with slots of slotLen
// (epoch Unix 0). It panics when v is not a vertex index or slotLen <= 0
// (programming errors: both come from a validated node configuration).
func NewMeter(in *idn.Instance, v int, slotLen time.Duration) *Meter {
	if in == nil {
		panic("allocator: NewMeter: in: nil instance")
	}
	if v < 0 || v >= in.NV {
		panic(fmt.Sprintf("allocator: NewMeter: v: %d out of range [0,%d)", v, in.NV))
	}
	if slotLen <= 0 {
		panic(fmt.Sprintf("allocator: NewMeter: slotLen: %v must be > 0", slotLen))
	}
	m := &Meter{in: in, v: v, slotLen: int64(slotLen), byTypeModel: map[[2]int]int{},
		slots: map[int64]*slotCounts{}}
	for rho, t := range in.Types {
		for k, c := range t.Cands {
			if c.V == v {
				m.byTypeModel[[2]int{rho, c.M}] = len(m.local)
				m.local = append(m.local, localCand{rho: rho, k: k, m: c.M})
			}
		}
	}
	return m
}

// SlotAt returns the slot containing t: floor(t.UnixNano() / slotLen).
func (m *Meter) SlotAt(t time.Time) int64 {
	ns := t.UnixNano()
	s := ns / m.slotLen
	if ns%m.slotLen < 0 {
		s--
	}
	return s
}

// counts returns the counters of slot s, created if needed. m.mu must be held.
func (m *Meter) counts(s int64) *slotCounts {
	sc := m.slots[s]
	if sc == nil {
		sc = &slotCounts{arrivals: make([]float64, len(m.in.Types)), served: make([]float64, len(m.local)),
			total: make([]float64, m.in.NM)}
		m.slots[s] = sc
	}
	return sc
}

// Arrive records one request of type (task, entry) entering the network at
// this vertex at now. Types not in the instance, or entering elsewhere, are ignored.
func (m *Meter) Arrive(now time.Time, task, entry string) {
	rho, ok := m.in.TypeIndex(idn.TypeKey{Task: task, Entry: entry})
	if !ok || m.in.Types[rho].Path[0] != m.v {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.counts(m.SlotAt(now)).arrivals[rho]++
}

// Serve records one request of type (task, entry) admitted at this vertex
// at now for model. The request counts against the model's capacity
// whenever the model is known (even for a type outside the instance); it
// counts as served by the type's candidate only when (this vertex, model)
// is a candidate of a known type.
func (m *Meter) Serve(now time.Time, task, entry, model string) {
	mi, ok := m.in.Catalog.ModelIndex(model)
	if !ok {
		return
	}
	idx := -1
	if rho, ok := m.in.TypeIndex(idn.TypeKey{Task: task, Entry: entry}); ok {
		if i, ok := m.byTypeModel[[2]int{rho, mi}]; ok {
			idx = i
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	sc := m.counts(m.SlotAt(now))
	sc.total[mi]++
	if idx >= 0 {
		sc.served[idx]++
	}
}

// Remaining returns the capacity L_m^v left for model in the slot
// containing now: +Inf for a repository model of this vertex (omega_m^v = 1)
// and for an unknown model; it is <= 0 once the slot's load reaches L_m^v.
func (m *Meter) Remaining(now time.Time, model string) float64 {
	mi, ok := m.in.Catalog.ModelIndex(model)
	if !ok {
		return math.Inf(1)
	}
	i := m.in.Index(m.v, mi)
	if m.in.Omega[i] {
		return math.Inf(1)
	}
	s := m.SlotAt(now)
	m.mu.Lock()
	defer m.mu.Unlock()
	load := 0.0
	if sc := m.slots[s]; sc != nil {
		load = sc.total[mi]
	}
	return m.in.Cap[i] - load
}

// Measure returns the measurements of slot: r (len in.Types; r[rho] = the
// arrivals of type rho if it enters at this vertex, else 0) and l (shaped
// like in.Types[rho].Cands): for each candidate k at this vertex of a type
// through it, l[rho][k] = max(0, L_m^v - (load_m^v - served_rho^k)) (paper
// 000 eq. 7 without the clamp at r_rho) for non-repository models and +Inf
// for repository models; every other entry is 0. It then forgets every slot
// <= slot (events recorded later for such a slot start it afresh: measure a
// slot once it is over).
func (m *Meter) Measure(slot int64) ([]float64, idn.Loads) {
	r := make([]float64, len(m.in.Types))
	l := make(idn.Loads, len(m.in.Types))
	for rho, t := range m.in.Types {
		l[rho] = make([]float64, len(t.Cands))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	sc := m.slots[slot]
	if sc != nil {
		copy(r, sc.arrivals)
	}
	for j, lc := range m.local {
		if m.in.Types[lc.rho].Cands[lc.k].Repo {
			l[lc.rho][lc.k] = math.Inf(1)
			continue
		}
		others := 0.0
		if sc != nil {
			others = sc.total[lc.m] - sc.served[j]
		}
		l[lc.rho][lc.k] = math.Max(0, m.in.Cap[m.in.Index(m.v, lc.m)]-others)
	}
	for s := range m.slots {
		if s <= slot {
			delete(m.slots, s)
		}
	}
	return r, l
}
