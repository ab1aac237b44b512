package idn

import (
	"fmt"
	"math"
	"sort"
)

// InstanceConfig holds the parameters of the cost model of paper 000.
type InstanceConfig struct {
	// Alpha is the latency/accuracy trade-off alpha of eq. 6 (ms per unit of
	// inaccuracy, see InaccuracyScale). Must be >= 0.
	Alpha float64
	// InaccuracyScale multiplies (1-a_m) in eq. 6: 100 measures inaccuracy
	// in mAP percentage points (the reading of Sec. VI, Fig. 6), 1 is the
	// literal 0..1 scale. Must be > 0.
	InaccuracyScale float64
	// SlotSeconds is the slot length; capacities are L_m^v = FPS*SlotSeconds.
	SlotSeconds float64
}

// DefaultInstanceConfig returns alpha = 1, inaccuracy in percentage points
// and 1-minute slots (paper 000 Sec. VI).
func DefaultInstanceConfig() InstanceConfig {
	return InstanceConfig{Alpha: 1, InaccuracyScale: 100, SlotSeconds: 60}
}

// Validate checks the configuration; errors wrap ErrInvalid and name the field.
func (c InstanceConfig) Validate() error {
	switch {
	case c.Alpha < 0 || math.IsNaN(c.Alpha) || math.IsInf(c.Alpha, 0):
		return fmt.Errorf("%w: alpha: %v must be finite and >= 0", ErrInvalid, c.Alpha)
	case !(c.InaccuracyScale > 0) || math.IsInf(c.InaccuracyScale, 0):
		return fmt.Errorf("%w: inaccuracy_scale: %v must be finite and > 0", ErrInvalid, c.InaccuracyScale)
	case !(c.SlotSeconds > 0) || math.IsInf(c.SlotSeconds, 0):
		return fmt.Errorf("%w: slot_seconds: %v must be finite and > 0", ErrInvalid, c.SlotSeconds)
	}
	return nil
}

// TypeKey names a request type by its task and entry vertex; the path is
// the graph's routing path from the entry vertex to the task's repository.
type TypeKey struct {
	// Task is the task name.
	Task string
	// Entry is the id of the vertex where requests enter (p_1).
	Entry string
}

// Candidate is one (vertex, model) pair that may serve a request type: an
// element of the cost order of paper 000 Sec. III-E. Its position in
// RequestType.Cands is its cost rank kappa_rho(v,m) - 1.
type Candidate struct {
	// V is the vertex index, M the model index.
	V, M int
	// Pos is the position j-1 of V on the path (0 = entry vertex).
	Pos int
	// Cost is C^{p_j}_{p,m} of eq. 6 (the gamma^k of eq. 11).
	Cost float64
	// Repo marks a repository model (omega_m^v = 1): unlimited capacity.
	Repo bool
}

// RequestType is rho = (i, p) of paper 000 Sec. III-B with its cost order.
type RequestType struct {
	// Key is the (task, entry) pair.
	Key TypeKey
	// Task is the task index in the catalog.
	Task int
	// Path lists the vertex indices p_1..p_J (p_J is the repository).
	Path []int
	// Cands lists the candidates in increasing cost order (ties: smaller
	// path position, then smaller model index), truncated after the
	// cheapest repository candidate: candidates ranked after it can never
	// serve a request (the repository has unlimited capacity), so every
	// term of eq. 12 and eq. 16 beyond it is zero. K_rho is len(Cands).
	Cands []Candidate
	// upMin[j] is the smallest cost of a candidate at path position > j
	// (+Inf at the repository): what cost announcements tell vertex p_j.
	upMin []float64
}

// Instance is an indexed IDN problem: graph, catalog, costs, capacities and
// request types. Allocations are flat slices indexed by Index(v, m).
type Instance struct {
	// Graph is the input graph.
	Graph *Graph
	// Catalog is the input catalog.
	Catalog *Catalog
	// Config is the cost configuration.
	Config InstanceConfig
	// NV and NM are |V| and |M|.
	NV, NM int
	// Size, Delay (ms) and Cap (L_m^v per slot) are indexed by Index(v, m).
	Size, Delay, Cap []float64
	// Omega is the repository allocation omega (eq. 3), indexed by Index(v, m).
	Omega []bool
	// Budget is b^v per vertex index.
	Budget []float64
	// Types lists the request types R.
	Types     []RequestType
	typeIndex map[TypeKey]int
}

// NewInstance builds the problem for the given request types. It validates
// the configuration, that every task has a repository reachable from the
// entry vertex, and that every model has a speed for every GPU kind used.
func NewInstance(g *Graph, c *Catalog, cfg InstanceConfig, types []TypeKey) (*Instance, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := g.CheckTasks(c.Tasks); err != nil {
		return nil, err
	}
	if err := c.CheckGPUs(g); err != nil {
		return nil, err
	}
	inst := &Instance{Graph: g, Catalog: c, Config: cfg, NV: len(g.Vertices), NM: len(c.Models), typeIndex: map[TypeKey]int{}}
	n := inst.NV * inst.NM
	inst.Size = make([]float64, n)
	inst.Delay = make([]float64, n)
	inst.Cap = make([]float64, n)
	inst.Omega = make([]bool, n)
	inst.Budget = make([]float64, inst.NV)
	for v, vx := range g.Vertices {
		inst.Budget[v] = vx.BudgetMB
		for m, md := range c.Models {
			i := inst.Index(v, m)
			inst.Size[i] = md.SizeMB
			thr := md.Speed[vx.GPU].Throughput()
			inst.Delay[i] = 1000 / thr
			inst.Cap[i] = thr * cfg.SlotSeconds
			if repo, _ := g.Repository(md.Task); repo == vx.ID {
				inst.Omega[i] = true
			}
		}
	}
	for ti, key := range types {
		if _, dup := inst.typeIndex[key]; dup {
			return nil, fmt.Errorf("%w: types[%d]: duplicate request type %+v", ErrInvalid, ti, key)
		}
		rt, err := inst.buildType(key)
		if err != nil {
			return nil, fmt.Errorf("types[%d]: %w", ti, err)
		}
		inst.typeIndex[key] = len(inst.Types)
		inst.Types = append(inst.Types, rt)
	}
	return inst, nil
}

// Index returns the flat index of (vertex v, model m).
func (in *Instance) Index(v, m int) int { return v*in.NM + m }

// TypeIndex returns the index of a request type.
func (in *Instance) TypeIndex(k TypeKey) (int, bool) {
	i, ok := in.typeIndex[k]
	return i, ok
}

// Cost returns C^{p_j}_{p,m} of paper 000 eq. 6 for model m served at the
// vertex at position j (0-based) of a path of vertex indices:
// the RTT sum from p_1 to p_j, plus d_m^{p_j}, plus alpha*scale*(1-a_m).
func (in *Instance) Cost(path []int, j, m int) float64 {
	net := 0.0
	for h := 0; h < j; h++ {
		net += in.Graph.RTT(in.Graph.Vertices[path[h]].ID, in.Graph.Vertices[path[h+1]].ID)
	}
	return net + in.Delay[in.Index(path[j], m)] + in.Config.Alpha*in.Config.InaccuracyScale*(1-in.Catalog.Models[m].Accuracy)
}

func (in *Instance) buildType(key TypeKey) (RequestType, error) {
	task, ok := in.Catalog.TaskIndex(key.Task)
	if !ok {
		return RequestType{}, fmt.Errorf("%w: task %q: %w", ErrInvalid, key.Task, ErrUnknownTask)
	}
	ids, err := in.Graph.Path(key.Entry, key.Task)
	if err != nil {
		return RequestType{}, fmt.Errorf("%w: entry %q: %w", ErrInvalid, key.Entry, err)
	}
	rt := RequestType{Key: key, Task: task, Path: make([]int, len(ids))}
	for j, id := range ids {
		rt.Path[j], _ = in.Graph.VertexIndex(id)
	}
	models := in.Catalog.ModelsFor(key.Task)
	var all []Candidate
	for j, v := range rt.Path {
		for _, m := range models {
			all = append(all, Candidate{V: v, M: m, Pos: j, Cost: in.Cost(rt.Path, j, m), Repo: in.Omega[in.Index(v, m)]})
		}
	}
	sort.SliceStable(all, func(a, b int) bool { return candLess(all[a], all[b]) })
	cut := len(all)
	for k, c := range all {
		if c.Repo {
			cut = k + 1
			break
		}
	}
	if cut == len(all) && !all[len(all)-1].Repo {
		return RequestType{}, fmt.Errorf("%w: task %q: no repository model on the path from %q", ErrInvalid, key.Task, key.Entry)
	}
	rt.Cands = all[:cut:cut]
	rt.upMin = make([]float64, len(rt.Path))
	for j := range rt.Path {
		rt.upMin[j] = math.Inf(1)
		for _, c := range rt.Cands {
			if c.Pos > j && c.Cost < rt.upMin[j] {
				rt.upMin[j] = c.Cost
			}
		}
	}
	return rt, nil
}

// candLess is the cost order of Sec. III-E with a deterministic tie-break.
func candLess(a, b Candidate) bool {
	if a.Cost != b.Cost {
		return a.Cost < b.Cost
	}
	if a.Pos != b.Pos {
		return a.Pos < b.Pos
	}
	return a.M < b.M
}

// Rank returns kappa_rho(v, m) (1-based) of paper 000 Sec. III-E, or 0
// (standing for infinity) when (v, m) is not a candidate of type rho: v is
// not on the path, m does not serve the task, or (v, m) ranks after the
// cheapest repository candidate and can therefore never serve (the
// truncation of RequestType.Cands).
func (in *Instance) Rank(rho, v, m int) int {
	for k, c := range in.Types[rho].Cands {
		if c.V == v && c.M == m {
			return k + 1
		}
	}
	return 0
}

// UpstreamMinCost returns the smallest cost of any candidate of type rho
// located strictly upstream of path position j (+Inf at the repository):
// the information the downstream cost announcements of Sec. III-E give p_j.
func (in *Instance) UpstreamMinCost(rho, j int) float64 { return in.Types[rho].upMin[j] }

// Loads are the potential available capacities l_t of eq. 7/8: L[rho][k] is
// l^{t,v}_{rho,m} of the k-th candidate of type rho. Repository candidates
// must hold at least r_rho (eq. 9).
type Loads [][]float64

// FullLoads returns the capacities min{L_m^v, r_rho} of models that face no
// competition (Sec. III-D, the value for models not deployed), with r_rho
// for repository models.
func (in *Instance) FullLoads(r []float64) Loads {
	l := make(Loads, len(in.Types))
	for rho, t := range in.Types {
		l[rho] = make([]float64, len(t.Cands))
		for k, c := range t.Cands {
			if c.Repo {
				l[rho][k] = r[rho]
			} else {
				l[rho][k] = math.Min(in.Cap[in.Index(c.V, c.M)], r[rho])
			}
		}
	}
	return l
}

// alloc returns the allocation value of candidate c under y, forcing
// repository models to 1 (x >= omega, eq. 3).
func alloc(in *Instance, y []float64, c Candidate) float64 {
	if c.Repo {
		return 1
	}
	return y[in.Index(c.V, c.M)]
}

// TypeCost12 returns the cost of type rho under allocation y (0/1 or
// fractional) per paper 000 eq. 12: models in increasing cost order serve
// min{remaining, z^k} each while the better ones leave requests unserved.
func (in *Instance) TypeCost12(rho int, r float64, l []float64, y []float64) float64 {
	cost, served := 0.0, 0.0
	for k, c := range in.Types[rho].Cands {
		if served >= r {
			break
		}
		z := alloc(in, y, c) * l[k]
		cost += c.Cost * math.Min(r-served, z)
		served += z
	}
	return cost
}

// Cost12 returns C(r, l, y) of paper 000 eq. 12.
func (in *Instance) Cost12(r []float64, l Loads, y []float64) float64 {
	c := 0.0
	for rho := range in.Types {
		c += in.TypeCost12(rho, r[rho], l[rho], y)
	}
	return c
}

// OmegaAlloc returns the minimal allocation omega as a flat 0/1 vector.
func (in *Instance) OmegaAlloc() []float64 {
	y := make([]float64, len(in.Omega))
	for i, o := range in.Omega {
		if o {
			y[i] = 1
		}
	}
	return y
}

// Gain13 returns G(r, l, y) = C(r, l, omega) - C(r, l, y), paper 000 eq. 13.
func (in *Instance) Gain13(r []float64, l Loads, y []float64) float64 {
	g := 0.0
	for rho := range in.Types {
		g += in.TypeGain13(rho, r[rho], l[rho], y)
	}
	return g
}

// TypeGain13 is the type-rho term of eq. 13. Under omega only the
// cheapest repository candidate (the last of Cands) serves.
func (in *Instance) TypeGain13(rho int, r float64, l []float64, y []float64) float64 {
	t := in.Types[rho]
	return t.Cands[len(t.Cands)-1].Cost*r - in.TypeCost12(rho, r, l, y)
}

// Gain16 returns G(r, l, y) in the form of paper 000 eq. 16 (Lemma III.1):
// sum over rho and k < K_rho of (gamma^{k+1}-gamma^k)(Z^k(y) - Z^k(omega)),
// with Z^k of eq. 15.
func (in *Instance) Gain16(r []float64, l Loads, y []float64) float64 {
	g := 0.0
	for rho, t := range in.Types {
		sumY, sumW := 0.0, 0.0
		for k := 0; k+1 < len(t.Cands); k++ {
			c := t.Cands[k]
			sumY += alloc(in, y, c) * l[rho][k]
			if c.Repo {
				sumW += l[rho][k]
			}
			zy := math.Min(r[rho], sumY)
			zw := math.Min(r[rho], sumW)
			g += (t.Cands[k+1].Cost - c.Cost) * (zy - zw)
		}
	}
	return g
}

// TypeServe serves r requests of type rho under an integral allocation x
// with the given remaining capacities (indexed by Index(v, m), consumed in
// place; repository models are unlimited), following the serving strategy
// of Sec. III-E. It adds the requests served by candidate k to served[k]
// and returns the cost.
func (in *Instance) TypeServe(rho int, r float64, x []float64, remaining []float64, served []float64) float64 {
	cost := 0.0
	need := r
	for k, c := range in.Types[rho].Cands {
		if need <= 0 {
			break
		}
		if c.Repo {
			served[k] += need
			cost += need * c.Cost
			need = 0
			break
		}
		i := in.Index(c.V, c.M)
		if x[i] < 0.5 || remaining[i] <= 0 {
			continue
		}
		s := math.Min(need, remaining[i])
		remaining[i] -= s
		need -= s
		served[k] += s
		cost += s * c.Cost
	}
	return cost
}

// LoadsFromServing returns the potential available capacities of eq. 7,
// l = min{L_m^v - load of the other types, r_rho}, given each type's served
// counts per candidate (served[rho][k]) and the total load per model.
func (in *Instance) LoadsFromServing(r []float64, served [][]float64, total []float64, out Loads) Loads {
	if out == nil {
		out = make(Loads, len(in.Types))
	}
	for rho, t := range in.Types {
		if len(out[rho]) != len(t.Cands) {
			out[rho] = make([]float64, len(t.Cands))
		}
		for k, c := range t.Cands {
			if c.Repo {
				out[rho][k] = r[rho]
				continue
			}
			i := in.Index(c.V, c.M)
			out[rho][k] = math.Max(0, math.Min(in.Cap[i]-(total[i]-served[rho][k]), r[rho]))
		}
	}
	return out
}
