// Package slot is the slot simulator of paper 000 (INFIDA, Sec. VI): per
// slot a request batch r_t arrives, the current integral allocation serves
// it along each request's path with the strategy of eq. 12, the potential
// available capacities l_t are determined at run time from the allocation
// and the batch (eq. 7), the gain (eq. 13) and the metrics NTAG (eq. 23),
// MU (eq. 24), average latency and inaccuracy are recorded, and the policy
// observes (r_t, l_t). Workloads: fixed Zipf(1.2) popularity or the sliding
// profile (cyclic shift of 5 tasks every W requests), each task entering at
// random base stations, constant rate.
//
// The package is pure: no goroutines, no I/O; randomness is injected.
package slot

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/idn-net/idn/policy/idn"
	"github.com/idn-net/idn/policy/sim"
)

// ErrInvalidConfig marks a configuration validation failure.
var ErrInvalidConfig = errors.New("slot: invalid config")

// Profile is a task popularity profile of paper 000 Sec. VI (Fig. 4).
type Profile int

const (
	// Fixed is the fixed popularity profile: task i has probability
	// p(i) proportional to (i+1)^-1.2.
	Fixed Profile = iota
	// Sliding is the sliding popularity profile: the l-th request is for
	// task i with probability p((i + Shift*floor(l/W)) mod N).
	Sliding
)

// String names the profile.
func (p Profile) String() string {
	if p == Sliding {
		return "sliding"
	}
	return "fixed"
}

// ParseProfile parses "fixed" or "sliding".
func ParseProfile(s string) (Profile, error) {
	switch s {
	case "fixed":
		return Fixed, nil
	case "sliding":
		return Sliding, nil
	}
	return 0, fmt.Errorf("%w: profile: %q is not fixed or sliding", ErrInvalidConfig, s)
}

// WorkloadConfig describes the request process of paper 000 Sec. VI.
type WorkloadConfig struct {
	// Rate is the constant request rate (requests per second).
	Rate float64
	// SlotSeconds is the slot length (1 minute in the paper).
	SlotSeconds float64
	// Zipf is the popularity exponent (1.2).
	Zipf float64
	// Profile is Fixed or Sliding.
	Profile Profile
	// Shift is the cyclic shift of the sliding profile (5 tasks).
	Shift int
	// Window is W, the number of requests between shifts (2.7e7: one hour
	// at 7,500 rps).
	Window float64
	// EntriesPerTask is the number of random base stations each task's
	// requests enter at (2); each makes one request type.
	EntriesPerTask int
	// Expected, when true, uses the expected counts instead of sampling the
	// multinomial counts of i.i.d. requests.
	Expected bool
}

// DefaultWorkloadConfig returns the workload of Sec. VI: 7,500 rps, 1-min
// slots, Zipf(1.2), fixed profile, shift 5 every 2.7e7 requests, 2 base
// stations per task.
func DefaultWorkloadConfig() WorkloadConfig {
	return WorkloadConfig{Rate: 7500, SlotSeconds: 60, Zipf: 1.2, Profile: Fixed, Shift: 5, Window: 2.7e7, EntriesPerTask: 2}
}

// Validate checks the configuration.
func (c WorkloadConfig) Validate() error {
	switch {
	case !(c.Rate >= 0) || math.IsInf(c.Rate, 0):
		return fmt.Errorf("%w: rate: %v must be finite and >= 0", ErrInvalidConfig, c.Rate)
	case !(c.SlotSeconds > 0) || math.IsInf(c.SlotSeconds, 0):
		return fmt.Errorf("%w: slot_seconds: %v must be > 0", ErrInvalidConfig, c.SlotSeconds)
	case !(c.Zipf >= 0) || math.IsInf(c.Zipf, 0):
		return fmt.Errorf("%w: zipf: %v must be finite and >= 0", ErrInvalidConfig, c.Zipf)
	case c.Profile != Fixed && c.Profile != Sliding:
		return fmt.Errorf("%w: profile: unknown %d", ErrInvalidConfig, c.Profile)
	case c.Profile == Sliding && !(c.Window > 0):
		return fmt.Errorf("%w: window: %v must be > 0 for the sliding profile", ErrInvalidConfig, c.Window)
	case c.EntriesPerTask <= 0:
		return fmt.Errorf("%w: entries_per_task: %d must be > 0", ErrInvalidConfig, c.EntriesPerTask)
	}
	return nil
}

// Workload generates request batches for an instance built on its types.
type Workload struct {
	cfg   WorkloadConfig
	zipf  *sim.Zipf
	tasks int
	// byTask[i] lists the type indices of task i.
	byTask [][]int
	ntypes int
}

// BuildTypes draws the request types of Sec. VI: each task is assigned to
// EntriesPerTask distinct random base stations (vertices of the highest
// tier; all of them if there are fewer). Reading of "Each request type is
// assigned randomly to two base stations in tier 4": a request type
// rho = (i, p) has one entry vertex p_1 (Sec. III-B), so the sentence can
// only mean that each task's requests enter at two random base stations,
// i.e. two request types per task (40 for 20 tasks), and the task's
// requests are split evenly between them; the 7,500 rps are the whole
// network's rate ("requests arrive at a constant rate of 7,500 requests
// per second"), split over the tasks by the popularity profile.
func BuildTypes(g *idn.Graph, c *idn.Catalog, cfg WorkloadConfig, rng *rand.Rand) []idn.TypeKey {
	bs := g.BaseStations()
	var keys []idn.TypeKey
	for _, t := range c.Tasks {
		perm := rng.Perm(len(bs))
		n := min(cfg.EntriesPerTask, len(bs))
		for _, p := range perm[:n] {
			keys = append(keys, idn.TypeKey{Task: t, Entry: bs[p]})
		}
	}
	return keys
}

// NewWorkload returns the generator for the instance's request types.
func NewWorkload(in *idn.Instance, cfg WorkloadConfig) (*Workload, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := len(in.Catalog.Tasks)
	z, err := sim.NewZipf(n, cfg.Zipf)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	w := &Workload{cfg: cfg, zipf: z, tasks: n, byTask: make([][]int, n), ntypes: len(in.Types)}
	for rho, t := range in.Types {
		w.byTask[t.Task] = append(w.byTask[t.Task], rho)
	}
	return w, nil
}

// PerSlot returns the number of requests per slot.
func (w *Workload) PerSlot() float64 { return w.cfg.Rate * w.cfg.SlotSeconds }

// TaskProb returns the probability of task i in sliding phase phase.
func (w *Workload) TaskProb(i, phase int) float64 {
	if w.cfg.Profile == Fixed {
		return w.zipf.Prob(i)
	}
	return w.zipf.Prob(((i+w.cfg.Shift*phase)%w.tasks + w.tasks) % w.tasks)
}

// Batch returns r_t, the requests per type in slot t. Requests of a task
// with no request type are dropped (they have no entry point).
func (w *Workload) Batch(t int, rng *rand.Rand) []float64 {
	r := make([]float64, w.ntypes)
	per := w.PerSlot()
	start, end := float64(t)*per, float64(t+1)*per
	// split the slot's request index range at the phase boundaries.
	for lo := start; lo < end; {
		phase, hi := 0, end
		if w.cfg.Profile == Sliding {
			phase = int(math.Floor(lo / w.cfg.Window))
			hi = math.Min(end, float64(phase+1)*w.cfg.Window)
		}
		n := math.Round(hi) - math.Round(lo)
		lo = hi
		left, pleft := n, 1.0
		for i := 0; i < w.tasks; i++ {
			p := w.TaskProb(i, phase)
			var cnt float64
			if w.cfg.Expected {
				cnt = n * p
			} else {
				cnt = binomial(rng, left, math.Min(1, p/pleft))
				left -= cnt
				pleft -= p
			}
			types := w.byTask[i]
			if len(types) == 0 {
				continue
			}
			// split uniformly among the task's entry base stations.
			rem, share := cnt, float64(len(types))
			for j, rho := range types {
				var c float64
				if w.cfg.Expected {
					c = cnt / float64(len(types))
				} else if j == len(types)-1 {
					c = rem
				} else {
					c = binomial(rng, rem, 1/(share-float64(j)))
				}
				rem -= c
				r[rho] += c
			}
		}
	}
	return r
}

// binomial draws Binomial(n, p) for integral n >= 0: exactly for n <= 64,
// by the rounded, clamped normal approximation otherwise (n is ~10^5 per
// slot in the paper's workloads).
func binomial(rng *rand.Rand, n, p float64) float64 {
	if n <= 0 || p <= 0 {
		return 0
	}
	if p >= 1 {
		return n
	}
	if n <= 64 {
		k := 0.0
		for i := 0; i < int(n); i++ {
			if rng.Float64() < p {
				k++
			}
		}
		return k
	}
	k := math.Round(n*p + rng.NormFloat64()*math.Sqrt(n*p*(1-p)))
	return math.Max(0, math.Min(n, k))
}
