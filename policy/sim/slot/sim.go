package slot

import (
	"fmt"
	"math/rand/v2"

	"github.com/idn-net/idn/policy/idn"
	"github.com/idn-net/idn/policy/infida"
)

// Config configures the serving model of the simulator.
type Config struct {
	// Rounds splits each type's batch into this many equal chunks served in
	// round-robin over the types, in a fresh random type order each round:
	// a fluid model of interleaved arrivals that decides which types get a
	// shared model's capacity first (eq. 7 depends on arrival order).
	Rounds int
}

// DefaultConfig returns 10 rounds.
func DefaultConfig() Config { return Config{Rounds: 10} }

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.Rounds <= 0 {
		return fmt.Errorf("%w: rounds: %d must be > 0", ErrInvalidConfig, c.Rounds)
	}
	return nil
}

// Server serves batches under integral allocations (reusable scratch).
type Server struct {
	in     *idn.Instance
	cfg    Config
	rem    []float64
	total  []float64
	served [][]float64
	loads  idn.Loads
	posRTT [][]float64
}

// NewServer returns a server for the instance.
func NewServer(in *idn.Instance, cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{in: in, cfg: cfg, rem: make([]float64, len(in.Cap)), total: make([]float64, len(in.Cap)),
		served: make([][]float64, len(in.Types)), posRTT: make([][]float64, len(in.Types))}
	for rho, t := range in.Types {
		s.served[rho] = make([]float64, len(t.Cands))
		s.posRTT[rho] = make([]float64, len(t.Path))
		for j := 1; j < len(t.Path); j++ {
			s.posRTT[rho][j] = s.posRTT[rho][j-1] + in.Graph.RTT(in.Graph.Vertices[t.Path[j-1]].ID, in.Graph.Vertices[t.Path[j]].ID)
		}
	}
	return s, nil
}

// SlotStats are the per-slot outcomes of serving one batch.
type SlotStats struct {
	// Requests is ||r_t||_1.
	Requests float64
	// Gain is G(r_t, l_t, x_t) of eq. 13.
	Gain float64
	// Cost is C(r_t, l_t, x_t) of eq. 12 (the cost actually incurred).
	Cost float64
	// LatencySum and InaccuracySum add, over served requests, the
	// end-to-end latency (path RTT to the serving vertex + d_m^v, ms) and
	// the inaccuracy 100*(1-a_m) (percentage points, Figs. 6 and 10).
	LatencySum, InaccuracySum float64
}

// Serve serves batch r under allocation x (Sec. III-E): returns the stats,
// the potential available capacities l_t of eq. 7 and the served counts
// per candidate (both owned by the server, valid until the next call).
func (s *Server) Serve(r []float64, x []float64, rng *rand.Rand) (SlotStats, idn.Loads, [][]float64) {
	in := s.in
	copy(s.rem, in.Cap)
	for rho := range s.served {
		for k := range s.served[rho] {
			s.served[rho][k] = 0
		}
	}
	var st SlotStats
	rounds := s.cfg.Rounds
	perm := make([]int, len(in.Types))
	for round := 0; round < rounds; round++ {
		for i := range perm {
			perm[i] = i
		}
		rng.Shuffle(len(perm), func(a, b int) { perm[a], perm[b] = perm[b], perm[a] })
		for _, rho := range perm {
			chunk := r[rho] / float64(rounds)
			st.Cost += in.TypeServe(rho, chunk, x, s.rem, s.served[rho])
		}
	}
	for i := range s.total {
		s.total[i] = 0
	}
	for rho, t := range in.Types {
		st.Requests += r[rho]
		for k, c := range t.Cands {
			n := s.served[rho][k]
			if n == 0 {
				continue
			}
			if !c.Repo {
				s.total[in.Index(c.V, c.M)] += n
			}
			st.LatencySum += n * (s.posRTT[rho][c.Pos] + in.Delay[in.Index(c.V, c.M)])
			st.InaccuracySum += n * 100 * (1 - in.Catalog.Models[c.M].Accuracy)
		}
	}
	s.loads = in.LoadsFromServing(r, s.served, s.total, s.loads)
	st.Gain = in.Gain13(r, s.loads, x)
	return st, s.loads, s.served
}

// Result summarises one policy's run.
type Result struct {
	// Policy is the policy name.
	Policy string
	// NTAG is eq. 23: (1/T) sum_t G(r_t, l_t, x_t)/||r_t||_1.
	NTAG float64
	// MU is eq. 24: (1/T) sum_{t>=2} sum_{v,m} s_m^v max{0, x_t - x_{t-1}} (MB).
	MU float64
	// AvgLatency (ms) and AvgInaccuracy (100 - mAP) over all served requests.
	AvgLatency, AvgInaccuracy float64
	// SlotNTAG is G_t/||r_t||_1 per slot; SlotMU the fetched MB per slot.
	SlotNTAG, SlotMU []float64
}

// Run drives a policy over the batches and returns its metrics. rng drives
// the serving order only, so policies compared on the same batches and
// seeds see the same workload.
func Run(in *idn.Instance, cfg Config, p infida.Policy, batches [][]float64, rng *rand.Rand) (Result, error) {
	srv, err := NewServer(in, cfg)
	if err != nil {
		return Result{}, err
	}
	res := Result{Policy: p.Name(), SlotNTAG: make([]float64, len(batches)), SlotMU: make([]float64, len(batches))}
	prev := make([]float64, len(in.Size))
	var lat, inacc, reqs float64
	obs := &infida.Observation{}
	for t, r := range batches {
		x := p.Allocation()
		if t > 0 {
			mu := 0.0
			for i := range x {
				if d := x[i] - prev[i]; d > 0 {
					mu += in.Size[i] * d
				}
			}
			res.SlotMU[t] = mu
			res.MU += mu
		}
		copy(prev, x)
		st, l, served := srv.Serve(r, x, rng)
		if st.Requests > 0 {
			res.SlotNTAG[t] = st.Gain / st.Requests
		}
		res.NTAG += res.SlotNTAG[t]
		lat += st.LatencySum
		inacc += st.InaccuracySum
		reqs += st.Requests
		obs.Slot, obs.R, obs.L, obs.Served = t, r, l, served
		p.Update(obs)
	}
	if n := float64(len(batches)); n > 0 {
		res.NTAG /= n
		res.MU /= n
	}
	if reqs > 0 {
		res.AvgLatency = lat / reqs
		res.AvgInaccuracy = inacc / reqs
	}
	return res, nil
}

// TrainOffline computes the allocation of INFIDA_OFFLINE (paper 000 Prop.
// V.1.1 and Sec. VI): INFIDA is run on G_T, the time-averaged gain of eq.
// 14, by stochastic mirror ascent over the batches visited in a fresh
// random order each epoch (each step's subgradient is that of one slot's
// gain, an unbiased estimate of G_T's), with the potential available
// capacities determined at run time from INFIDA's current allocation and
// the batch; the average fractional state y-bar over all steps is rounded
// once with DepRound (budget-respecting). The result is a static allocation.
func TrainOffline(in *idn.Instance, cfg Config, icfg infida.Config, batches [][]float64, epochs int, rng *rand.Rand) ([]float64, error) {
	if epochs <= 0 {
		return nil, fmt.Errorf("%w: offline epochs: %d must be > 0", ErrInvalidConfig, epochs)
	}
	p, err := infida.New(in, icfg, rng)
	if err != nil {
		return nil, err
	}
	srv, err := NewServer(in, cfg)
	if err != nil {
		return nil, err
	}
	ybar := make([]float64, len(in.Size))
	steps := 0
	obs := &infida.Observation{}
	for e := 0; e < epochs; e++ {
		for _, t := range rng.Perm(len(batches)) {
			_, l, served := srv.Serve(batches[t], p.Allocation(), rng)
			obs.Slot, obs.R, obs.L, obs.Served = t, batches[t], l, served
			p.Update(obs)
			for i, v := range p.Fractional() {
				ybar[i] += v
			}
			steps++
		}
	}
	x := in.OmegaAlloc()
	for _, st := range p.Vertices() {
		y := make([]float64, len(st.Models))
		for i, m := range st.Models {
			y[i] = ybar[in.Index(st.V, m)] / float64(steps)
		}
		xs := make([]float64, len(y))
		infida.DepRound(rng, y, st.Sizes, st.Budget, infida.ResidualBudget, nil, xs)
		for i, m := range st.Models {
			x[in.Index(st.V, m)] = xs[i]
		}
	}
	return x, nil
}
