package scenarios

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/idn-net/idn/policy/idn"
	"github.com/idn-net/idn/policy/infida"
	"github.com/idn-net/idn/policy/sim/slot"
)

// InfidaConfig is the `infida:` section of a scenario: the nodes run the
// INFIDA allocator of paper 000 (idn node --allocation infida) and the
// runner drives the workload of `idn experiment infida` live, slot by slot,
// then compares the live cluster with the slot simulator on the same setup.
type InfidaConfig struct {
	// Slot is the slot length S (idn node --slot; default 2s). Slot s
	// covers Unix time [s*S, (s+1)*S); the load starts at a slot boundary.
	Slot Duration `yaml:"slot"`
	// Eta is INFIDA's learning rate (--eta; > 0, required).
	Eta float64 `yaml:"eta"`
	// Alpha is the latency/accuracy trade-off of paper 000 eq. 6 (--alpha;
	// default 1).
	Alpha *float64 `yaml:"alpha"`
	// Refresh is the refresh period B in slots (--refresh; default 1).
	Refresh int `yaml:"refresh"`
	// Seed seeds the request types (--types-seed), the batches and the
	// simulator, as `idn experiment infida --seed` (default 1).
	Seed uint64 `yaml:"seed"`
	// EntriesPerTask is the number of base stations each task's requests
	// enter at (--entries-per-task; default 2; 0 = every base station).
	EntriesPerTask *int `yaml:"entries_per_task"`
	// Profile is the popularity profile: fixed (default) or sliding.
	Profile string `yaml:"profile"`
	// Zipf is the popularity exponent (default 1.2).
	Zipf *float64 `yaml:"zipf"`
	// Shift is the cyclic shift of the sliding profile (default 5 tasks).
	Shift *int `yaml:"shift"`
	// Window is the number of requests between shifts of the sliding
	// profile (required for sliding).
	Window float64 `yaml:"window"`
	// Rate is the total request rate in requests per second (> 0).
	Rate float64 `yaml:"rate"`
	// Slots is the number of load slots T (> 0); the load lasts T*Slot.
	Slots int `yaml:"slots"`
	// ControlTimeout, when set, is passed as --control-timeout.
	ControlTimeout Duration `yaml:"control_timeout"`
}

// infidaTolerance is the relative NTAG gap the live cluster may show
// against the simulator (issue 7: within 10%).
const infidaTolerance = 0.10

// validateInfida checks and defaults sc.Infida, prepares the experiment
// setup and fills the workload and the node flags from it.
func (sc *Scenario) validateInfida() error {
	f := sc.Infida
	if f.Slot == 0 {
		f.Slot = Duration(2 * time.Second)
	}
	if f.Slot < Duration(100*time.Millisecond) || f.Slot.D()%time.Millisecond != 0 {
		return invalid("infida.slot: %s: want a whole number of milliseconds >= 100ms", f.Slot.D())
	}
	if !(f.Eta > 0) || math.IsInf(f.Eta, 0) {
		return invalid("infida.eta: %v: want a finite learning rate > 0", f.Eta)
	}
	if f.Alpha == nil {
		f.Alpha = ptr(1.0)
	}
	if !(*f.Alpha >= 0) || math.IsInf(*f.Alpha, 0) {
		return invalid("infida.alpha: %v: want a finite value >= 0", *f.Alpha)
	}
	if f.Refresh == 0 {
		f.Refresh = 1
	}
	if f.Refresh < 0 {
		return invalid("infida.refresh: %d: want a number of slots >= 1", f.Refresh)
	}
	if f.Seed == 0 {
		f.Seed = 1
	}
	if f.EntriesPerTask == nil {
		f.EntriesPerTask = ptr(2)
	}
	if *f.EntriesPerTask < 0 {
		return invalid("infida.entries_per_task: %d: want >= 0 (0 = every base station)", *f.EntriesPerTask)
	}
	if f.Profile == "" {
		f.Profile = "fixed"
	}
	profile, err := slot.ParseProfile(f.Profile)
	if err != nil {
		return invalid("infida.profile: %q: want fixed or sliding", f.Profile)
	}
	if f.Zipf == nil {
		f.Zipf = ptr(1.2)
	}
	if !(*f.Zipf >= 0) || math.IsInf(*f.Zipf, 0) {
		return invalid("infida.zipf: %v: want a finite exponent >= 0", *f.Zipf)
	}
	if f.Shift == nil {
		f.Shift = ptr(5)
	}
	if *f.Shift < 0 {
		return invalid("infida.shift: %d: want >= 0", *f.Shift)
	}
	if profile == slot.Sliding && !(f.Window > 0) {
		return invalid("infida.window: %v: the sliding profile needs the number of requests between shifts (> 0)", f.Window)
	}
	if f.Window < 0 || math.IsInf(f.Window, 0) || math.IsNaN(f.Window) {
		return invalid("infida.window: %v: want a finite value >= 0", f.Window)
	}
	if !(f.Rate > 0) || math.IsInf(f.Rate, 0) || f.Rate > 100000 {
		return invalid("infida.rate: %v: want requests per second in (0, 100000]", f.Rate)
	}
	if f.Slots <= 0 || f.Slots > 100000 {
		return invalid("infida.slots: %d: want a number of load slots in [1, 100000]", f.Slots)
	}
	if f.ControlTimeout < 0 {
		return invalid("infida.control_timeout: %s is negative", f.ControlTimeout.D())
	}
	w := &sc.Workload
	if w.Rate != 0 || w.Duration != 0 || len(w.Tasks) > 0 || len(w.Entry) > 0 || w.Arrivals != "" {
		return invalid("workload: rate, duration, arrivals, tasks and entry come from the infida section (infida.rate, infida.slots); leave them out")
	}
	if w.MinAccuracy != 0 {
		return invalid("workload.min_accuracy: %v: the infida workload sends min_accuracy 0", w.MinAccuracy)
	}
	for _, id := range sortedKeys(sc.Nodes.Vertices) {
		if len(sc.Nodes.Vertices[id].Hosted) > 0 {
			return invalid("nodes.vertices.%s.hosted: the INFIDA allocator decides x^v; leave hosted out", id)
		}
	}
	cfg := sc.infidaExperiment(profile)
	setup, err := slot.Prepare(cfg)
	if err != nil {
		return invalid("infida: %w", err)
	}
	sc.infidaCfg, sc.setup = cfg, setup
	w.Rate = f.Rate
	w.Duration = Duration(time.Duration(f.Slots) * f.Slot.D())
	w.Arrivals = ArrivalsConstant
	hasNode := map[string]bool{}
	for _, n := range sc.nodeList {
		hasNode[n.Vertex] = true
	}
	seen := map[string]bool{}
	for _, t := range setup.Instance.Types {
		if !seen[t.Key.Entry] {
			seen[t.Key.Entry] = true
			w.Entry = append(w.Entry, t.Key.Entry)
		}
		if !hasNode[t.Key.Entry] {
			return invalid("nodes: vertex %q is the entry vertex of request type (%s, %s) but has no nodes", t.Key.Entry, t.Key.Task, t.Key.Entry)
		}
	}
	sort.Strings(w.Entry)
	args := []string{"--allocation", "infida", "--slot", f.Slot.D().String(),
		"--eta", strconv.FormatFloat(f.Eta, 'g', -1, 64), "--alpha", strconv.FormatFloat(*f.Alpha, 'g', -1, 64),
		"--refresh", strconv.Itoa(f.Refresh), "--types-seed", strconv.FormatUint(f.Seed, 10),
		"--entries-per-task", strconv.Itoa(*f.EntriesPerTask)}
	if f.ControlTimeout > 0 {
		args = append(args, "--control-timeout", f.ControlTimeout.D().String())
	}
	for i := range sc.nodeList {
		sc.nodeList[i].Args = append(args[:len(args):len(args)], sc.nodeList[i].Args...)
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// infidaExperiment is the `idn experiment infida` configuration of the
// scenario's infida section (single policy INFIDA), with the instance the
// nodes build (see the node's --types-seed and --entries-per-task).
func (sc *Scenario) infidaExperiment(profile slot.Profile) slot.ExperimentConfig {
	f := sc.Infida
	S := f.Slot.D().Seconds()
	c := slot.DefaultExperimentConfig()
	c.Graph, c.Catalog = sc.graph, sc.catalog
	c.Instance = idn.InstanceConfig{Alpha: *f.Alpha, InaccuracyScale: 100, SlotSeconds: S}
	entries := *f.EntriesPerTask
	if entries == 0 {
		entries = max(1, len(sc.graph.BaseStations()))
	}
	c.Workload = slot.WorkloadConfig{Rate: f.Rate, SlotSeconds: S, Zipf: *f.Zipf, Profile: profile, Shift: *f.Shift,
		Window: f.Window, EntriesPerTask: entries}
	if profile == slot.Fixed && c.Workload.Window == 0 {
		c.Workload.Window = slot.DefaultWorkloadConfig().Window
	}
	c.INFIDA = infida.DefaultConfig()
	c.INFIDA.Eta = f.Eta
	c.INFIDA.Horizon = f.Slots
	c.INFIDA.RefreshInit, c.INFIDA.RefreshTarget = float64(f.Refresh), float64(f.Refresh)
	c.Policies = []string{slot.PolicyINFIDA}
	c.Slots = f.Slots
	c.Seed = f.Seed
	return c
}

// InfidaSetup returns the experiment configuration and the prepared setup
// (instance and batches) of an infida scenario, or nils for another one.
func (sc *Scenario) InfidaSetup() (slot.ExperimentConfig, *slot.Setup) {
	return sc.infidaCfg, sc.setup
}

// SimulateInfida runs the slot simulator (policy INFIDA) on the scenario's
// setup: the reference the live NTAG is compared with.
func (sc *Scenario) SimulateInfida() (slot.Result, error) {
	if sc.setup == nil {
		return slot.Result{}, fmt.Errorf("scenario %q has no infida section", sc.Name)
	}
	res, err := slot.RunPrepared(sc.infidaCfg, sc.setup, nil)
	if err != nil {
		return slot.Result{}, fmt.Errorf("infida simulator: %w", err)
	}
	return res[0], nil
}

// plannedRequest is one request of the infida workload.
type plannedRequest struct {
	at   time.Duration // offset from the start of load slot 0
	slot int           // load slot t
	rho  int           // request type
}

// infidaPlan spreads the batches over their slots: load slot t sends
// batches[t][rho] requests of every type rho, evenly spaced over
// [t*S, (t+1)*S), the types interleaved in a random (seeded) order.
func infidaPlan(batches [][]float64, slotLen time.Duration, seed uint64) []plannedRequest {
	var out []plannedRequest
	rng := rand.New(rand.NewPCG(seed, 0x1f1da))
	for t, r := range batches {
		var types []int
		for rho, n := range r {
			for i := 0; i < int(math.Round(n)); i++ {
				types = append(types, rho)
			}
		}
		rng.Shuffle(len(types), func(a, b int) { types[a], types[b] = types[b], types[a] })
		n := len(types)
		for i, rho := range types {
			off := time.Duration(t)*slotLen + time.Duration((float64(i)+0.5)/float64(n)*float64(slotLen))
			out = append(out, plannedRequest{at: off, slot: t, rho: rho})
		}
	}
	return out
}

// ReplyGain returns the gain gamma^{K_rho} - gamma of one reply of request
// type rho served by model at vertex (paper 000 eqs. 11 and 13 for a single
// request): gamma^{K_rho} is the cost of the type's repository candidate
// (the last of its cost order) and gamma the cost of the serving candidate,
// found among the type's candidates, else computed with eq. 6 for the
// vertex's position on the path. ok is false when the vertex is not on the
// type's path or the model is unknown or serves another task.
func ReplyGain(in *idn.Instance, rho int, vertex, model string) (gain float64, ok bool) {
	t := in.Types[rho]
	v, okV := in.Graph.VertexIndex(vertex)
	m, okM := in.Catalog.ModelIndex(model)
	if !okV || !okM || in.Catalog.Models[m].Task != t.Key.Task {
		return 0, false
	}
	repo := t.Cands[len(t.Cands)-1].Cost
	for _, c := range t.Cands {
		if c.V == v && c.M == m {
			return repo - c.Cost, true
		}
	}
	for j, pv := range t.Path {
		if pv == v {
			return repo - in.Cost(t.Path, j, m), true
		}
	}
	return 0, false
}

// InfidaReply is what the NTAG computation needs of one request.
type InfidaReply struct {
	// Slot is the load slot the request was sent in, Type its request type.
	Slot, Type int
	// Outcome says how the request ended; Vertex and Model who served it.
	Outcome       Outcome
	Vertex, Model string
}

// NTAGStats are the live NTAG of paper 000 eq. 23 and its accounting.
type NTAGStats struct {
	// Series is NTAG_t = (sum of the gains of the replies to the requests
	// sent in slot t) / (number of requests sent in slot t).
	Series []float64 `json:"series"`
	// Sent counts the requests per slot.
	Sent []int `json:"sent"`
	// Results counts replies with a result; Errors explicit error replies
	// (gain 0); Unanswered the requests with no reply (lost, skipped, not
	// accepted: gain 0); Unscored results whose serving (vertex, model)
	// could not be scored (not on the path or unknown model: gain 0).
	Results, Errors, Unanswered, Unscored int
}

// LiveNTAG computes the live NTAG series over slots load slots.
func LiveNTAG(in *idn.Instance, slots int, replies []InfidaReply) NTAGStats {
	st := NTAGStats{Series: make([]float64, slots), Sent: make([]int, slots)}
	gain := make([]float64, slots)
	for _, r := range replies {
		if r.Slot < 0 || r.Slot >= slots || r.Type < 0 || r.Type >= len(in.Types) {
			continue
		}
		st.Sent[r.Slot]++
		switch r.Outcome {
		case OutcomeResult:
			st.Results++
			g, ok := ReplyGain(in, r.Type, r.Vertex, r.Model)
			if !ok {
				st.Unscored++
				continue
			}
			gain[r.Slot] += g
		case OutcomeError:
			st.Errors++
		default:
			st.Unanswered++
		}
	}
	for t := range st.Series {
		if st.Sent[t] > 0 {
			st.Series[t] = gain[t] / float64(st.Sent[t])
		}
	}
	return st
}

// MUSeries returns the model updates of paper 000 eq. 24 per slot: MU_t =
// sum over vertices of the sizes (MB) of the models hosted in slot t and
// not in slot t-1 (MU_0 = 0). hosted[t][v] lists the models of vertex v in
// slot t; nil means not observed and carries slot t-1's set over. size
// gives a model's size in MB (0 for an unknown name).
func MUSeries(hosted [][][]string, size func(string) float64) []float64 {
	out := make([]float64, len(hosted))
	var prev []map[string]bool
	for t, vs := range hosted {
		if len(prev) < len(vs) {
			prev = append(prev, make([]map[string]bool, len(vs)-len(prev))...)
		}
		for v, ms := range vs {
			if ms == nil {
				continue
			}
			cur := make(map[string]bool, len(ms))
			for _, m := range ms {
				cur[m] = true
			}
			if t > 0 && prev[v] != nil {
				for m := range cur {
					if !prev[v][m] {
						out[t] += size(m)
					}
				}
			}
			prev[v] = cur
		}
	}
	return out
}

// mean returns the mean of x (0 when empty).
func mean(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	s := 0.0
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

// tailStart returns the first slot of the last third of n slots.
func tailStart(n int) int { return n - n/3 }

// controlMetrics are the /metrics counters of the control plane, in the
// column order of ControlRow.
var controlMetrics = []string{
	"idn_control_messages_total", "idn_control_batches_total", "idn_control_raw_bytes_total",
	"idn_control_wire_bytes_total", "idn_control_compressed_batches_total", "idn_control_received_total",
	"idn_control_malformed_total", "idn_control_stale_total", "idn_control_timeouts_total",
	"idn_control_missing_types_total", "idn_infida_slots_total", "idn_serving_cost_messages_total",
	"idn_serving_cost_bytes_total", "idn_infida_fetched_mb_total",
}

// ControlRow is the control traffic of one vertex: totals over its nodes'
// last scrapes (every incarnation), and per stepped slot.
type ControlRow struct {
	// Vertex names the vertex; Slots is the number of slots its
	// allocators stepped (sum of idn_infida_slots_total).
	Vertex string  `json:"vertex"`
	Slots  float64 `json:"slots"`
	// Messages, Batches, RawBytes, WireBytes, ServingCostMessages and
	// ServingCostBytes are per stepped slot.
	Messages            float64 `json:"messages_per_slot"`
	Batches             float64 `json:"batches_per_slot"`
	RawBytes            float64 `json:"raw_bytes_per_slot"`
	WireBytes           float64 `json:"wire_bytes_per_slot"`
	ServingCostMessages float64 `json:"serving_cost_messages_per_slot"`
	ServingCostBytes    float64 `json:"serving_cost_bytes_per_slot"`
	// Totals are the summed counters (idn_control_... names).
	Totals map[string]float64 `json:"totals"`
	// Timeouts, Stale and Malformed are totals.
	Timeouts  float64 `json:"timeouts"`
	Stale     float64 `json:"stale"`
	Malformed float64 `json:"malformed"`
}

// ControlTable sums the last scrape of every node incarnation per vertex
// and divides by the vertex's stepped slots. scrapes maps an incarnation
// key to its last /metrics values, vertexOf maps the same key to its
// vertex. Rows are sorted by vertex.
func ControlTable(scrapes map[string]map[string]float64, vertexOf map[string]string) []ControlRow {
	sums := map[string]map[string]float64{}
	for k, m := range scrapes {
		v := vertexOf[k]
		if sums[v] == nil {
			sums[v] = map[string]float64{}
		}
		for _, name := range controlMetrics {
			sums[v][name] += m[name]
		}
	}
	var rows []ControlRow
	for _, v := range sortedKeys(sums) {
		s := sums[v]
		row := ControlRow{Vertex: v, Slots: s["idn_infida_slots_total"], Totals: s,
			Timeouts: s["idn_control_timeouts_total"], Stale: s["idn_control_stale_total"], Malformed: s["idn_control_malformed_total"]}
		if row.Slots > 0 {
			per := func(name string) float64 { return s[name] / row.Slots }
			row.Messages, row.Batches = per("idn_control_messages_total"), per("idn_control_batches_total")
			row.RawBytes, row.WireBytes = per("idn_control_raw_bytes_total"), per("idn_control_wire_bytes_total")
			row.ServingCostMessages, row.ServingCostBytes = per("idn_serving_cost_messages_total"), per("idn_serving_cost_bytes_total")
		}
		rows = append(rows, row)
	}
	return rows
}

// YCheck is the leader-kill check of y^v: the new leader of the vertex must
// start from the y^v the old leader had at its last committed slot.
type YCheck struct {
	// Vertex, OldLeader and NewLeader name the failover.
	Vertex    string `json:"vertex"`
	OldLeader string `json:"old_leader"`
	NewLeader string `json:"new_leader"`
	// LastCommittedSeen is the last committed_slot read from the old
	// leader before the kill; RestoredSlot the new leader's restored_slot.
	LastCommittedSeen uint64 `json:"last_committed_seen"`
	RestoredSlot      uint64 `json:"restored_slot"`
	// Recorded is true when y^v at RestoredSlot had been recorded (from
	// any node of the vertex, polled every 100 ms before the kill).
	Recorded bool `json:"recorded"`
	// MaxAbsDiff is max |restored_y - recorded y| (when Recorded; -1 when
	// their lengths differ).
	MaxAbsDiff float64 `json:"max_abs_diff"`
	// Preserved is true when RestoredSlot >= LastCommittedSeen, the y^v
	// at RestoredSlot was recorded and equals restored_y exactly.
	Preserved bool `json:"preserved"`
	// Problem says why the check failed ("" when Preserved).
	Problem string `json:"problem,omitempty"`
}

// checkY evaluates a YCheck from the recorded committed_slot -> y^v map.
func checkY(yc YCheck, recorded map[uint64][]float64, restoredY []float64) YCheck {
	yc.Preserved = false
	y, ok := recorded[yc.RestoredSlot]
	yc.Recorded = ok
	switch {
	case yc.NewLeader == "":
		yc.Problem = "no new leader reported allocation.running"
		return yc
	case yc.RestoredSlot < yc.LastCommittedSeen:
		yc.Problem = fmt.Sprintf("restored_slot %d < last committed_slot %d seen from the old leader", yc.RestoredSlot, yc.LastCommittedSeen)
		return yc
	case !ok:
		yc.Problem = fmt.Sprintf("y^v at committed_slot %d was never recorded: cannot compare", yc.RestoredSlot)
		return yc
	case len(y) != len(restoredY):
		yc.MaxAbsDiff = -1 // JSON has no Inf
		yc.Problem = fmt.Sprintf("restored_y has %d entries, the recorded y^v %d", len(restoredY), len(y))
		return yc
	}
	for i := range y {
		yc.MaxAbsDiff = math.Max(yc.MaxAbsDiff, math.Abs(y[i]-restoredY[i]))
	}
	if yc.MaxAbsDiff != 0 {
		yc.Problem = fmt.Sprintf("restored_y differs from the recorded y^v by up to %g", yc.MaxAbsDiff)
		return yc
	}
	yc.Preserved = true
	yc.Problem = ""
	return yc
}

// InfidaReport is the INFIDA part of a scenario report.
type InfidaReport struct {
	// SlotMs is the slot length; Slots the number of load slots; FirstSlot
	// the absolute slot number of load slot 0; TailFrom the first load slot
	// of the last third.
	SlotMs    int64 `json:"slot_ms"`
	Slots     int   `json:"slots"`
	FirstSlot int64 `json:"first_slot"`
	TailFrom  int   `json:"tail_from"`
	// LiveNTAG and SimNTAG are the mean NTAG (eq. 23) over the last third
	// of the load slots, live and in the slot simulator on the same setup;
	// Ratio = LiveNTAG / SimNTAG; Within10Pct is |Ratio - 1| <= 0.1.
	LiveNTAG    float64 `json:"live_ntag"`
	SimNTAG     float64 `json:"sim_ntag"`
	Ratio       float64 `json:"ntag_ratio"`
	Within10Pct bool    `json:"within_10pct"`
	// LiveNTAGAll and SimNTAGAll are the means over all load slots.
	LiveNTAGAll float64 `json:"live_ntag_all"`
	SimNTAGAll  float64 `json:"sim_ntag_all"`
	// NTAGBound is the simulator setup's NTAG upper bound.
	NTAGBound float64 `json:"ntag_upper_bound"`
	// LiveMU and SimMU are the mean model updates (eq. 24, MB per slot)
	// over all load slots; ...Tail over the last third.
	LiveMU     float64 `json:"live_mu_mb"`
	SimMU      float64 `json:"sim_mu_mb"`
	LiveMUTail float64 `json:"live_mu_tail_mb"`
	SimMUTail  float64 `json:"sim_mu_tail_mb"`
	// HostedMissed counts (slot, vertex) allocation polls that failed.
	HostedMissed int `json:"hosted_polls_missed"`
	// Live is the live NTAG accounting with the per-slot series.
	Live NTAGStats `json:"live"`
	// SimSeries and SimMUSeries are the simulator's per-slot NTAG and MU;
	// LiveMUSeries the live MU per slot.
	SimSeries    []float64 `json:"sim_series"`
	SimMUSeries  []float64 `json:"sim_mu_series"`
	LiveMUSeries []float64 `json:"live_mu_series"`
	// Control is the control traffic per vertex.
	Control []ControlRow `json:"control"`
	// YChecks are the leader-kill checks of y^v.
	YChecks []YCheck `json:"y_checks"`
}

// summarizeInfida fills the comparison fields from the series.
func summarizeInfida(r *InfidaReport, sim slot.Result) {
	n := r.Slots
	r.TailFrom = tailStart(n)
	r.SimSeries, r.SimMUSeries = sim.SlotNTAG, sim.SlotMU
	r.LiveNTAG = mean(r.Live.Series[r.TailFrom:])
	r.SimNTAG = mean(sim.SlotNTAG[r.TailFrom:])
	r.LiveNTAGAll, r.SimNTAGAll = mean(r.Live.Series), mean(sim.SlotNTAG)
	r.Ratio = 0 // JSON has no NaN: 0 when the simulator's NTAG is 0
	if r.SimNTAG != 0 {
		r.Ratio = r.LiveNTAG / r.SimNTAG
	}
	r.Within10Pct = r.SimNTAG != 0 && math.Abs(r.Ratio-1) <= infidaTolerance
	r.LiveMU, r.SimMU = mean(r.LiveMUSeries), mean(sim.SlotMU)
	r.LiveMUTail, r.SimMUTail = mean(r.LiveMUSeries[r.TailFrom:]), mean(sim.SlotMU[r.TailFrom:])
}

// writeText writes the INFIDA section of the human-readable report.
func (r *InfidaReport) writeText(ew *errWriter) {
	p := ew.printf
	p("\nINFIDA (paper 000), %d load slots of %d ms from slot %d; comparison over slots %d..%d (last third):\n",
		r.Slots, r.SlotMs, r.FirstSlot, r.TailFrom, r.Slots-1)
	within := "NOT within 10%"
	if r.Within10Pct {
		within = "within 10%"
	}
	p("  NTAG   live %.4f  sim %.4f  ratio %.4f (%s); all slots: live %.4f sim %.4f; upper bound %.4f\n",
		r.LiveNTAG, r.SimNTAG, r.Ratio, within, r.LiveNTAGAll, r.SimNTAGAll, r.NTAGBound)
	p("  MU     live %.1f MB/slot  sim %.1f MB/slot; last third: live %.1f sim %.1f (allocation polls missed: %d)\n",
		r.LiveMU, r.SimMU, r.LiveMUTail, r.SimMUTail, r.HostedMissed)
	p("  replies results %d, errors %d (gain 0), unanswered %d (gain 0), unscored %d\n",
		r.Live.Results, r.Live.Errors, r.Live.Unanswered, r.Live.Unscored)
	p("  NTAG per slot (live/sim):")
	for t := range r.Live.Series {
		if t%6 == 0 {
			p("\n   %3d:", t)
		}
		sim := 0.0
		if t < len(r.SimSeries) {
			sim = r.SimSeries[t]
		}
		p(" %6.2f/%-6.2f", r.Live.Series[t], sim)
	}
	p("\n\n  control traffic per stepped slot per vertex (raw = marshalled protobuf, wire = after compression):\n")
	tw := tabwriter.NewWriter(ew, 2, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "  vertex\tslots\tmsgs\tbatches\traw B\twire B\tcost msgs\tcost B\ttimeouts\tstale\tmalformed\n")
	for _, c := range r.Control {
		fmt.Fprintf(tw, "  %s\t%.0f\t%.2f\t%.2f\t%.0f\t%.0f\t%.2f\t%.0f\t%.0f\t%.0f\t%.0f\n", c.Vertex, c.Slots, c.Messages, c.Batches,
			c.RawBytes, c.WireBytes, c.ServingCostMessages, c.ServingCostBytes, c.Timeouts, c.Stale, c.Malformed)
	}
	_ = tw.Flush()
	p("\n  leader-kill y^v checks:\n")
	if len(r.YChecks) == 0 {
		p("    none\n")
	}
	for _, y := range r.YChecks {
		status := "PRESERVED"
		if !y.Preserved {
			status = "FAILED: " + y.Problem
		}
		p("    %s: %s -> %s, last committed_slot seen %d, restored_slot %d, max |diff| %g: %s\n",
			y.Vertex, y.OldLeader, y.NewLeader, y.LastCommittedSeen, y.RestoredSlot, y.MaxAbsDiff, status)
	}
}
