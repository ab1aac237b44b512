package idn

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// Sentinel errors callers can branch on with errors.Is.
var (
	// ErrUnknownVertex is returned when a vertex id is not in the graph.
	ErrUnknownVertex = errors.New("idn: unknown vertex")
	// ErrUnknownTask is returned when a task has no repository or is not in the catalog.
	ErrUnknownTask = errors.New("idn: unknown task")
	// ErrNoPath is returned when a task's repository is unreachable from a vertex.
	ErrNoPath = errors.New("idn: no path")
	// ErrInvalid marks a validation failure of a topology, catalog or configuration.
	ErrInvalid = errors.New("idn: invalid")
)

// GPU kinds used by the defaults of paper 000 (Sec. VI, Table II).
const (
	GPUTitanRTX = "titan-rtx"
	GPUGTX980   = "gtx-980"
)

// Vertex is one vertex v of the IDN graph G(V,E) of paper 000 (Sec. III-A):
// a compute site with an allocation budget b^v (GPU memory, MB), a tier
// (0 = cloud ... 4 = base station in Sec. VI) and the GPU kind that decides
// model delays and capacities.
type Vertex struct {
	// ID names the vertex; unique within a graph.
	ID string `yaml:"id" json:"id"`
	// Tier is the hierarchy level, 0 for the cloud; informative only.
	Tier int `yaml:"tier" json:"tier"`
	// BudgetMB is the allocation budget b^v in MB of GPU memory (eq. 2).
	BudgetMB float64 `yaml:"budget_mb" json:"budget_mb"`
	// GPU is the GPU kind (a key of Model.Speed), e.g. "titan-rtx", "gtx-980".
	GPU string `yaml:"gpu" json:"gpu"`
}

// Edge is an undirected edge (A,B) of G with round-trip latency w_{A,B} in ms
// (paper 000, eq. 6).
type Edge struct {
	// A is one endpoint vertex id.
	A string `yaml:"a" json:"a"`
	// B is the other endpoint vertex id.
	B string `yaml:"b" json:"b"`
	// RTTms is the round-trip time w_{A,B} in milliseconds (>= 0).
	RTTms float64 `yaml:"rtt_ms" json:"rtt_ms"`
}

// Graph is the IDN graph G(V,E) with RTT weights and the repository vertex
// of every task (the nu(p) of paper 000 Sec. III-B). Build it with
// ParseTopologyYAML or NewGraph; the zero value is not usable.
type Graph struct {
	// Name is the topology's name (the YAML name field), informative.
	Name string
	// Vertices lists V in declaration order; vertex indices refer to it.
	Vertices []Vertex
	// Edges lists E (undirected).
	Edges []Edge
	// Repositories maps a task to its repository vertex id.
	Repositories map[string]string
	// DefaultRepository, when non-empty, is the repository of every task
	// not in Repositories.
	DefaultRepository string

	index map[string]int
	adj   [][]neighbour
	rtt   map[[2]int]float64
}

type neighbour struct {
	to  int
	rtt float64
}

// NewGraph validates vertices, edges and repositories and builds the
// graph's indices. Errors wrap ErrInvalid and name the offending field.
func NewGraph(vertices []Vertex, edges []Edge, repositories map[string]string, defaultRepository string) (*Graph, error) {
	g := &Graph{
		Vertices:          append([]Vertex(nil), vertices...),
		Edges:             append([]Edge(nil), edges...),
		Repositories:      map[string]string{},
		DefaultRepository: defaultRepository,
	}
	for k, v := range repositories {
		g.Repositories[k] = v
	}
	if err := g.build(); err != nil {
		return nil, err
	}
	return g, nil
}

func (g *Graph) build() error {
	if len(g.Vertices) == 0 {
		return fmt.Errorf("%w: vertices: empty", ErrInvalid)
	}
	g.index = make(map[string]int, len(g.Vertices))
	for i, v := range g.Vertices {
		switch {
		case v.ID == "":
			return fmt.Errorf("%w: vertices[%d].id: empty", ErrInvalid, i)
		case v.Tier < 0:
			return fmt.Errorf("%w: vertices[%d].tier: %d is negative", ErrInvalid, i, v.Tier)
		case v.BudgetMB < 0 || math.IsNaN(v.BudgetMB) || math.IsInf(v.BudgetMB, 0):
			return fmt.Errorf("%w: vertices[%d].budget_mb: %v must be finite and >= 0", ErrInvalid, i, v.BudgetMB)
		case v.GPU == "":
			return fmt.Errorf("%w: vertices[%d].gpu: empty (vertex %q)", ErrInvalid, i, v.ID)
		}
		if j, dup := g.index[v.ID]; dup {
			return fmt.Errorf("%w: vertices[%d].id: duplicate id %q (also vertices[%d])", ErrInvalid, i, v.ID, j)
		}
		g.index[v.ID] = i
	}
	g.adj = make([][]neighbour, len(g.Vertices))
	g.rtt = make(map[[2]int]float64, 2*len(g.Edges))
	for i, e := range g.Edges {
		a, okA := g.index[e.A]
		if !okA {
			return fmt.Errorf("%w: edges[%d].a: unknown edge endpoint %q: %w", ErrInvalid, i, e.A, ErrUnknownVertex)
		}
		b, okB := g.index[e.B]
		if !okB {
			return fmt.Errorf("%w: edges[%d].b: unknown edge endpoint %q: %w", ErrInvalid, i, e.B, ErrUnknownVertex)
		}
		if a == b {
			return fmt.Errorf("%w: edges[%d]: self loop on %q", ErrInvalid, i, e.A)
		}
		if e.RTTms < 0 || math.IsNaN(e.RTTms) || math.IsInf(e.RTTms, 0) {
			return fmt.Errorf("%w: edges[%d].rtt_ms: negative or non-finite RTT %v", ErrInvalid, i, e.RTTms)
		}
		if _, dup := g.rtt[[2]int{a, b}]; dup {
			return fmt.Errorf("%w: edges[%d]: duplicate edge %q-%q", ErrInvalid, i, e.A, e.B)
		}
		g.rtt[[2]int{a, b}] = e.RTTms
		g.rtt[[2]int{b, a}] = e.RTTms
		g.adj[a] = append(g.adj[a], neighbour{b, e.RTTms})
		g.adj[b] = append(g.adj[b], neighbour{a, e.RTTms})
	}
	for _, nb := range g.adj {
		sort.Slice(nb, func(i, j int) bool { return g.Vertices[nb[i].to].ID < g.Vertices[nb[j].to].ID })
	}
	if g.DefaultRepository != "" {
		if _, ok := g.index[g.DefaultRepository]; !ok {
			return fmt.Errorf("%w: repositories.default: unknown vertex %q: %w", ErrInvalid, g.DefaultRepository, ErrUnknownVertex)
		}
	}
	tasks := make([]string, 0, len(g.Repositories))
	for t := range g.Repositories {
		tasks = append(tasks, t)
	}
	sort.Strings(tasks)
	for _, t := range tasks {
		if t == "" {
			return fmt.Errorf("%w: repositories.tasks: empty task name", ErrInvalid)
		}
		if _, ok := g.index[g.Repositories[t]]; !ok {
			return fmt.Errorf("%w: repositories.tasks[%q]: unknown vertex %q: %w", ErrInvalid, t, g.Repositories[t], ErrUnknownVertex)
		}
	}
	return nil
}

// VertexIndex returns the index of vertex id in Vertices.
func (g *Graph) VertexIndex(id string) (int, bool) {
	i, ok := g.index[id]
	return i, ok
}

// Vertex returns the vertex with the given id.
func (g *Graph) Vertex(id string) (Vertex, bool) {
	i, ok := g.index[id]
	if !ok {
		return Vertex{}, false
	}
	return g.Vertices[i], true
}

// RTT returns the RTT weight w_{a,b} (ms) of edge (a,b), 0 when a == b, and
// +Inf when the vertices are not adjacent or unknown.
func (g *Graph) RTT(a, b string) float64 {
	i, okA := g.index[a]
	j, okB := g.index[b]
	if !okA || !okB {
		return math.Inf(1)
	}
	if i == j {
		return 0
	}
	if w, ok := g.rtt[[2]int{i, j}]; ok {
		return w
	}
	return math.Inf(1)
}

// Repository returns the repository vertex id of task (nu(p) of paper 000).
func (g *Graph) Repository(task string) (string, error) {
	if r, ok := g.Repositories[task]; ok {
		return r, nil
	}
	if g.DefaultRepository != "" {
		return g.DefaultRepository, nil
	}
	return "", fmt.Errorf("%w: task %q has no repository", ErrUnknownTask, task)
}

// CheckTasks reports an error naming the first task that has no repository.
func (g *Graph) CheckTasks(tasks []string) error {
	for i, t := range tasks {
		if _, err := g.Repository(t); err != nil {
			return fmt.Errorf("%w: tasks[%d]: task %q has no repository (repositories.tasks or repositories.default): %w", ErrInvalid, i, t, err)
		}
	}
	return nil
}

// Path returns the routing path p of paper 000 (Sec. III-B) from vertex
// from to the repository of task: the shortest-RTT simple path, as vertex
// ids starting with from and ending with the repository. Ties are broken by
// fewer hops, then by the lexicographically smallest sequence of ids, so the
// result is deterministic.
func (g *Graph) Path(from, task string) ([]string, error) {
	src, ok := g.index[from]
	if !ok {
		return nil, fmt.Errorf("path from %q: %w", from, ErrUnknownVertex)
	}
	repo, err := g.Repository(task)
	if err != nil {
		return nil, fmt.Errorf("path from %q: %w", from, err)
	}
	dst := g.index[repo]
	idx, err := g.shortestPath(src, dst)
	if err != nil {
		return nil, fmt.Errorf("path from %q to repository %q of task %q: %w", from, repo, task, err)
	}
	out := make([]string, len(idx))
	for i, v := range idx {
		out[i] = g.Vertices[v].ID
	}
	return out, nil
}

// PathCost returns the sum of RTT weights along a path of vertex ids.
func (g *Graph) PathCost(path []string) float64 {
	c := 0.0
	for j := 0; j+1 < len(path); j++ {
		c += g.RTT(path[j], path[j+1])
	}
	return c
}

type label struct {
	dist float64
	path []int
}

func (g *Graph) better(a, b label) bool {
	const eps = 1e-9
	if a.dist < b.dist-eps {
		return true
	}
	if a.dist > b.dist+eps {
		return false
	}
	if len(a.path) != len(b.path) {
		return len(a.path) < len(b.path)
	}
	for i := range a.path {
		if a.path[i] != b.path[i] {
			return g.Vertices[a.path[i]].ID < g.Vertices[b.path[i]].ID
		}
	}
	return false
}

// shortestPath is Dijkstra over full labels (O(V^2 * len)); fine for IDN
// graphs of up to a few thousand vertices.
func (g *Graph) shortestPath(src, dst int) ([]int, error) {
	n := len(g.Vertices)
	best := make([]label, n)
	have := make([]bool, n)
	done := make([]bool, n)
	best[src] = label{0, []int{src}}
	have[src] = true
	for {
		u := -1
		for v := 0; v < n; v++ {
			if have[v] && !done[v] && (u < 0 || g.better(best[v], best[u])) {
				u = v
			}
		}
		if u < 0 {
			return nil, ErrNoPath
		}
		if u == dst {
			return best[u].path, nil
		}
		done[u] = true
		for _, nb := range g.adj[u] {
			if done[nb.to] {
				continue
			}
			p := make([]int, len(best[u].path)+1)
			copy(p, best[u].path)
			p[len(p)-1] = nb.to
			cand := label{best[u].dist + nb.rtt, p}
			if !have[nb.to] || g.better(cand, best[nb.to]) {
				best[nb.to] = cand
				have[nb.to] = true
			}
		}
	}
}

// BaseStations returns the ids of the vertices of the highest tier (the
// request entry points of Sec. VI), in declaration order.
func (g *Graph) BaseStations() []string {
	maxTier := -1
	for _, v := range g.Vertices {
		if v.Tier > maxTier {
			maxTier = v.Tier
		}
	}
	var out []string
	for _, v := range g.Vertices {
		if v.Tier == maxTier {
			out = append(out, v.ID)
		}
	}
	return out
}
