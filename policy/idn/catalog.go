package idn

import (
	"fmt"
	"math"
)

// Speed is the profiled speed of one model on one GPU kind.
//
// FPS is the throughput of Table II of paper 000 (frames, i.e. requests,
// per second). The inference delay d_m^v of eq. 6 is 1000/FPS ms and the
// capacity L_m^v over a slot of S seconds is FPS*S requests. AlphaMs and
// BetaMs are the batch-latency coefficients alpha*|B|+beta (ms) the emulated
// GPU executors of the runtime use; when FPS is 0 and AlphaMs+BetaMs > 0,
// FPS is derived as 1000/(AlphaMs+BetaMs) (batch size 1). When AlphaMs and
// BetaMs are both 0, BatchLatencyMs falls back to |B|*1000/FPS.
type Speed struct {
	// FPS is the requests served per second.
	FPS float64 `yaml:"fps,omitempty" json:"fps,omitempty"`
	// AlphaMs is the per-request batch-latency slope (ms).
	AlphaMs float64 `yaml:"alpha_ms,omitempty" json:"alpha_ms,omitempty"`
	// BetaMs is the batch-latency intercept (ms).
	BetaMs float64 `yaml:"beta_ms,omitempty" json:"beta_ms,omitempty"`
}

// Throughput returns the requests per second of s (FPS, or derived from
// AlphaMs+BetaMs when FPS is 0).
func (s Speed) Throughput() float64 {
	if s.FPS > 0 {
		return s.FPS
	}
	if s.AlphaMs+s.BetaMs > 0 {
		return 1000 / (s.AlphaMs + s.BetaMs)
	}
	return 0
}

// BatchLatencyMs returns the latency of a batch of n requests:
// AlphaMs*n+BetaMs, or n*1000/FPS when no coefficients are given.
func (s Speed) BatchLatencyMs(n int) float64 {
	if s.AlphaMs != 0 || s.BetaMs != 0 {
		return s.AlphaMs*float64(n) + s.BetaMs
	}
	if s.FPS > 0 {
		return float64(n) * 1000 / s.FPS
	}
	return math.Inf(1)
}

// Model is one model m of the catalog M of paper 000 (Sec. III-A). Replicas
// of the same network are distinct models (footnote 2).
type Model struct {
	// Name is unique within the catalog.
	Name string `yaml:"name" json:"name"`
	// Task is the task i the model serves (m in M_i).
	Task string `yaml:"task" json:"task"`
	// Accuracy a_m on a 0..1 scale (Table II's mAP@0.5 divided by 100).
	Accuracy float64 `yaml:"accuracy" json:"accuracy"`
	// SizeMB is the size s_m^v in MB of GPU memory (same on every vertex).
	SizeMB float64 `yaml:"size_mb" json:"size_mb"`
	// Speed gives the model's speed per GPU kind.
	Speed map[string]Speed `yaml:"speed" json:"speed"`
	// Variant names the network the model is a replica of (informative).
	Variant string `yaml:"variant,omitempty" json:"variant,omitempty"`
	// Replica is the replica number (0-based) of Variant (informative).
	Replica int `yaml:"replica,omitempty" json:"replica,omitempty"`
}

// Catalog is the task set N and the model catalog M of paper 000.
type Catalog struct {
	// Tasks lists N.
	Tasks []string
	// Models lists M; model indices refer to it.
	Models []Model

	byTask  map[string][]int
	byName  map[string]int
	taskIdx map[string]int
}

// NewCatalog validates tasks and models and builds the catalog's indices.
// Errors wrap ErrInvalid and name the offending field.
func NewCatalog(tasks []string, models []Model) (*Catalog, error) {
	c := &Catalog{Tasks: append([]string(nil), tasks...), Models: append([]Model(nil), models...)}
	if err := c.build(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Catalog) build() error {
	if len(c.Tasks) == 0 {
		return fmt.Errorf("%w: tasks: empty", ErrInvalid)
	}
	c.taskIdx = make(map[string]int, len(c.Tasks))
	c.byTask = make(map[string][]int, len(c.Tasks))
	for i, t := range c.Tasks {
		if t == "" {
			return fmt.Errorf("%w: tasks[%d]: empty name", ErrInvalid, i)
		}
		if _, dup := c.taskIdx[t]; dup {
			return fmt.Errorf("%w: tasks[%d]: duplicate task %q", ErrInvalid, i, t)
		}
		c.taskIdx[t] = i
	}
	c.byName = make(map[string]int, len(c.Models))
	for i := range c.Models {
		m := &c.Models[i]
		switch {
		case m.Name == "":
			return fmt.Errorf("%w: models[%d].name: empty", ErrInvalid, i)
		case m.Accuracy < 0 || m.Accuracy > 1 || math.IsNaN(m.Accuracy):
			return fmt.Errorf("%w: models[%d].accuracy: %v of %q outside [0,1] (write mAP 65.7 as 0.657)", ErrInvalid, i, m.Accuracy, m.Name)
		case m.SizeMB <= 0 || math.IsNaN(m.SizeMB) || math.IsInf(m.SizeMB, 0):
			return fmt.Errorf("%w: models[%d].size_mb: %v of %q must be positive", ErrInvalid, i, m.SizeMB, m.Name)
		case len(m.Speed) == 0:
			return fmt.Errorf("%w: models[%d].speed: empty for %q", ErrInvalid, i, m.Name)
		}
		if _, ok := c.taskIdx[m.Task]; !ok {
			return fmt.Errorf("%w: models[%d].task: unknown task %q for %q: %w", ErrInvalid, i, m.Task, m.Name, ErrUnknownTask)
		}
		if j, dup := c.byName[m.Name]; dup {
			return fmt.Errorf("%w: models[%d].name: duplicate name %q (also models[%d])", ErrInvalid, i, m.Name, j)
		}
		for gpu, s := range m.Speed {
			if s.FPS < 0 || s.AlphaMs < 0 || s.BetaMs < 0 || math.IsNaN(s.FPS+s.AlphaMs+s.BetaMs) || math.IsInf(s.FPS+s.AlphaMs+s.BetaMs, 0) {
				return fmt.Errorf("%w: models[%d].speed[%q]: negative or non-finite value %+v for %q", ErrInvalid, i, gpu, s, m.Name)
			}
			if s.Throughput() <= 0 {
				return fmt.Errorf("%w: models[%d].speed[%q]: needs fps > 0 or alpha_ms+beta_ms > 0 for %q", ErrInvalid, i, gpu, m.Name)
			}
		}
		c.byName[m.Name] = i
		c.byTask[m.Task] = append(c.byTask[m.Task], i)
	}
	for i, t := range c.Tasks {
		if len(c.byTask[t]) == 0 {
			return fmt.Errorf("%w: tasks[%d]: task %q has no model", ErrInvalid, i, t)
		}
	}
	return nil
}

// TaskIndex returns the index of task in Tasks.
func (c *Catalog) TaskIndex(task string) (int, bool) {
	i, ok := c.taskIdx[task]
	return i, ok
}

// ModelIndex returns the index of the named model in Models.
func (c *Catalog) ModelIndex(name string) (int, bool) {
	i, ok := c.byName[name]
	return i, ok
}

// ModelsFor returns the indices (into Models) of M_i, the models of task,
// in catalog order; nil for an unknown task. The slice must not be modified.
func (c *Catalog) ModelsFor(task string) []int {
	return c.byTask[task]
}

// Speed returns the speed of model m (an index) on a GPU kind.
func (c *Catalog) Speed(m int, gpu string) (Speed, error) {
	if m < 0 || m >= len(c.Models) {
		return Speed{}, fmt.Errorf("%w: model index %d out of range [0,%d)", ErrInvalid, m, len(c.Models))
	}
	s, ok := c.Models[m].Speed[gpu]
	if !ok {
		return Speed{}, fmt.Errorf("%w: models[%d].speed: no entry for gpu %q (model %q)", ErrInvalid, m, gpu, c.Models[m].Name)
	}
	return s, nil
}

// Delay returns the inference delay d_m^v in ms of model m on a GPU kind
// (paper 000 eq. 6): 1000/FPS.
func (c *Catalog) Delay(m int, gpu string) (float64, error) {
	s, err := c.Speed(m, gpu)
	if err != nil {
		return 0, err
	}
	return 1000 / s.Throughput(), nil
}

// Capacity returns the capacity L_m^v of model m on a GPU kind over a slot
// of slotSeconds (paper 000 Sec. III-D): FPS*slotSeconds requests.
func (c *Catalog) Capacity(m int, gpu string, slotSeconds float64) (float64, error) {
	s, err := c.Speed(m, gpu)
	if err != nil {
		return 0, err
	}
	return s.Throughput() * slotSeconds, nil
}

// CheckGPUs reports an error naming the first model with no speed entry for
// a GPU kind used by a vertex of g.
func (c *Catalog) CheckGPUs(g *Graph) error {
	for vi, v := range g.Vertices {
		for mi, m := range c.Models {
			if _, ok := m.Speed[v.GPU]; !ok {
				return fmt.Errorf("%w: models[%d].speed: model %q has no entry for gpu %q of vertices[%d] %q", ErrInvalid, mi, m.Name, v.GPU, vi, v.ID)
			}
		}
	}
	return nil
}
