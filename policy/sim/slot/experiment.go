package slot

import (
	"fmt"
	"strings"

	"github.com/idn-net/idn/policy/idn"
	"github.com/idn-net/idn/policy/infida"
	"github.com/idn-net/idn/policy/sim"
)

// Policy names accepted by ExperimentConfig.Policies.
const (
	PolicyINFIDA  = "infida"
	PolicyOLAG    = "olag"
	PolicySG      = "sg"
	PolicyOffline = "offline"
)

// ExperimentConfig is one run of the experiments of paper 000 Sec. VI.
type ExperimentConfig struct {
	// Graph is the IDN graph (Topology I or II, or any parsed topology).
	Graph *idn.Graph
	// Catalog is the model catalog (the YOLOv4 catalog by default).
	Catalog *idn.Catalog
	// Instance holds alpha and the slot length.
	Instance idn.InstanceConfig
	// Workload is the request process.
	Workload WorkloadConfig
	// Serving is the simulator configuration.
	Serving Config
	// INFIDA configures INFIDA (eta, refresh period, residual rounding).
	INFIDA infida.Config
	// Policies lists the policies to run (infida, olag, sg, offline).
	Policies []string
	// Slots is the horizon T.
	Slots int
	// Seed seeds the types, the batches and every policy's randomness.
	Seed uint64
	// OfflineEpochs is the number of passes INFIDA_OFFLINE makes over the
	// horizon (>= 1).
	OfflineEpochs int
	// SGSlots caps the number of (evenly spaced) slots SG optimises over.
	SGSlots int
	// OLAG selects the reading of OLAG's counters.
	OLAG infida.OLAGCounters
	// SG configures SG's stopping rules (default: the paper's two rules).
	SG infida.SGConfig
}

// DefaultExperimentConfig returns Topology II, the YOLOv4 catalog, alpha =
// 1, the default workload, all four policies, T = 720 slots (12 hours),
// INFIDA defaults, 1 offline epoch, SG over at most 120 slots with both of
// the paper's stopping rules.
func DefaultExperimentConfig() ExperimentConfig {
	return ExperimentConfig{
		Graph: idn.TopologyII(), Catalog: idn.YOLOv4Catalog(), Instance: idn.DefaultInstanceConfig(),
		Workload: DefaultWorkloadConfig(), Serving: DefaultConfig(), INFIDA: infida.DefaultConfig(),
		Policies: []string{PolicyINFIDA, PolicyOLAG, PolicySG, PolicyOffline}, Slots: 720, Seed: 1,
		OfflineEpochs: 1, SGSlots: 120, SG: infida.DefaultSGConfig(),
	}
}

// Validate checks the configuration.
func (c ExperimentConfig) Validate() error {
	if c.Graph == nil || c.Catalog == nil {
		return fmt.Errorf("%w: graph and catalog are required", ErrInvalidConfig)
	}
	if err := c.Instance.Validate(); err != nil {
		return err
	}
	if err := c.Workload.Validate(); err != nil {
		return err
	}
	if err := c.Serving.Validate(); err != nil {
		return err
	}
	if err := c.INFIDA.Validate(); err != nil {
		return err
	}
	if c.Slots <= 0 {
		return fmt.Errorf("%w: slots: %d must be > 0", ErrInvalidConfig, c.Slots)
	}
	if c.OfflineEpochs <= 0 {
		return fmt.Errorf("%w: offline_epochs: %d must be > 0", ErrInvalidConfig, c.OfflineEpochs)
	}
	if c.SGSlots <= 0 {
		return fmt.Errorf("%w: sg_slots: %d must be > 0", ErrInvalidConfig, c.SGSlots)
	}
	if len(c.Policies) == 0 {
		return fmt.Errorf("%w: policies: empty", ErrInvalidConfig)
	}
	for i, p := range c.Policies {
		switch p {
		case PolicyINFIDA, PolicyOLAG, PolicySG, PolicyOffline:
		default:
			return fmt.Errorf("%w: policies[%d]: unknown policy %q (want infida, olag, sg, offline)", ErrInvalidConfig, i, p)
		}
	}
	return nil
}

// Setup holds what an experiment derives from its configuration.
type Setup struct {
	// Instance is the indexed problem.
	Instance *idn.Instance
	// Batches are r_1..r_T.
	Batches [][]float64
}

// NTAGBound returns an upper bound on the NTAG of any allocation: every
// request served by its cheapest candidate, capacities ignored,
// (1/T) sum_t sum_rho r_rho (gamma^{K_rho} - gamma^1) / ||r_t||_1. When a
// policy comes close to it, the instance has spare capacity everywhere
// and policies cannot be told apart.
func (s *Setup) NTAGBound() float64 {
	tot := 0.0
	for _, r := range s.Batches {
		g, n := 0.0, 0.0
		for rho, t := range s.Instance.Types {
			g += r[rho] * (t.Cands[len(t.Cands)-1].Cost - t.Cands[0].Cost)
			n += r[rho]
		}
		if n > 0 {
			tot += g / n
		}
	}
	return tot / float64(len(s.Batches))
}

// Prepare builds the instance (random entry base stations per task) and
// the batches of an experiment.
func Prepare(c ExperimentConfig) (*Setup, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	keys := BuildTypes(c.Graph, c.Catalog, c.Workload, sim.NewRand(sim.SplitSeed(c.Seed, 0)))
	in, err := idn.NewInstance(c.Graph, c.Catalog, c.Instance, keys)
	if err != nil {
		return nil, err
	}
	w, err := NewWorkload(in, c.Workload)
	if err != nil {
		return nil, err
	}
	rng := sim.NewRand(sim.SplitSeed(c.Seed, 1))
	batches := make([][]float64, c.Slots)
	for t := range batches {
		batches[t] = w.Batch(t, rng)
	}
	return &Setup{Instance: in, Batches: batches}, nil
}

// RunExperiment runs every configured policy on the same instance and
// batches. progress, if non-nil, receives one line per phase.
func RunExperiment(c ExperimentConfig, progress func(string)) ([]Result, error) {
	s, err := Prepare(c)
	if err != nil {
		return nil, err
	}
	return RunPrepared(c, s, progress)
}

// RunPrepared is RunExperiment on an already prepared setup.
func RunPrepared(c ExperimentConfig, s *Setup, progress func(string)) ([]Result, error) {
	say := func(f string, a ...any) {
		if progress != nil {
			progress(fmt.Sprintf(f, a...))
		}
	}
	in := s.Instance
	var out []Result
	for _, name := range c.Policies {
		// each policy's randomness depends on its name only, so results do
		// not depend on the order of the policy list.
		prng := sim.NewRand(sim.SplitSeed(c.Seed, policySeed[name]))
		var p infida.Policy
		switch name {
		case PolicyINFIDA:
			ip, err := infida.New(in, c.INFIDA, prng)
			if err != nil {
				return nil, err
			}
			p = ip
		case PolicyOLAG:
			p = infida.NewOLAG(in, c.OLAG)
		case PolicySG:
			say("SG: greedy in hindsight over %d slots", min(c.SGSlots, len(s.Batches)))
			p = infida.NewStatic(in, "SG", infida.StaticGreedyWith(in, subsample(s.Batches, c.SGSlots), c.SG))
		case PolicyOffline:
			say("INFIDA_OFFLINE: %d epoch(s) over %d slots", c.OfflineEpochs, len(s.Batches))
			ocfg := c.INFIDA
			ocfg.RefreshInit, ocfg.RefreshTarget, ocfg.Stretch = 1, 1, 0
			x, err := TrainOffline(in, c.Serving, ocfg, s.Batches, c.OfflineEpochs, prng)
			if err != nil {
				return nil, err
			}
			p = infida.NewStatic(in, "INFIDA_OFFLINE", x)
		}
		say("%s: %d slots", p.Name(), len(s.Batches))
		res, err := Run(in, c.Serving, p, s.Batches, sim.NewRand(sim.SplitSeed(c.Seed, 2)))
		if err != nil {
			return nil, err
		}
		out = append(out, res)
	}
	return out, nil
}

var policySeed = map[string]uint64{PolicyINFIDA: 10, PolicyOLAG: 11, PolicySG: 12, PolicyOffline: 13}

// ParsePolicies splits a comma-separated policy list.
func ParsePolicies(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(strings.ToLower(p)); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func subsample(b [][]float64, n int) [][]float64 {
	if len(b) <= n {
		return b
	}
	out := make([][]float64, n)
	for i := range out {
		out[i] = b[i*len(b)/n]
	}
	return out
}
