package idn

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"

	"gopkg.in/yaml.v3"
)

// DefaultTopologyYAML is Network Topology II of paper 000 (Sec. VI), the
// default topology: 5 vertices, 2 base stations. See topology_ii.yaml.
//
//go:embed topology_ii.yaml
var DefaultTopologyYAML []byte

// TopologyIYAML is Network Topology I of paper 000 (Sec. VI): 36 vertices,
// 24 base stations, a 1-1-2-8-24 tree. See topology_i.yaml for how the
// edges the paper does not give were built.
//
//go:embed topology_i.yaml
var TopologyIYAML []byte

// DefaultCatalogYAML is the YOLOv4 catalog of Table II of paper 000 for 20
// tasks with 3 replicas per variant (30 models per task, 600 in all).
//
//go:embed catalog_yolov4.yaml
var DefaultCatalogYAML []byte

// Limits on generated catalogs, so a small document cannot request an
// unbounded amount of memory.
const (
	// MaxTasks bounds task_count.
	MaxTasks = 100_000
	// MaxReplicas bounds replicas.
	MaxReplicas = 1_000
	// MaxModels bounds the number of models a catalog expands to.
	MaxModels = 1_000_000
)

// topologyFile is the YAML shape of a topology.
type topologyFile struct {
	Name         string           `yaml:"name"`
	Vertices     []Vertex         `yaml:"vertices"`
	Edges        []Edge           `yaml:"edges"`
	Repositories repositoriesFile `yaml:"repositories"`
}

type repositoriesFile struct {
	Default string            `yaml:"default"`
	Tasks   map[string]string `yaml:"tasks"`
}

// catalogFile is the YAML shape of a catalog.
type catalogFile struct {
	Name       string    `yaml:"name"`
	Tasks      []string  `yaml:"tasks"`
	TaskCount  int       `yaml:"task_count"`
	TaskPrefix string    `yaml:"task_prefix"`
	Replicas   int       `yaml:"replicas"`
	Variants   []variant `yaml:"variants"`
	Models     []Model   `yaml:"models"`
}

type variant struct {
	Name     string           `yaml:"name"`
	Accuracy float64          `yaml:"accuracy"`
	SizeMB   float64          `yaml:"size_mb"`
	Speed    map[string]Speed `yaml:"speed"`
}

func decodeStrict(data []byte, out any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(out); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: empty document", ErrInvalid)
		}
		return fmt.Errorf("%w: yaml: %w", ErrInvalid, err)
	}
	return nil
}

// ParseTopologyYAML parses and validates a topology document (format in the
// package documentation). Errors wrap ErrInvalid and name the field.
func ParseTopologyYAML(data []byte) (*Graph, error) {
	var f topologyFile
	if err := decodeStrict(data, &f); err != nil {
		return nil, fmt.Errorf("topology: %w", err)
	}
	g, err := NewGraph(f.Vertices, f.Edges, f.Repositories.Tasks, f.Repositories.Default)
	if err != nil {
		return nil, fmt.Errorf("topology: %w", err)
	}
	g.Name = f.Name
	if g.DefaultRepository == "" && len(g.Repositories) == 0 {
		return nil, fmt.Errorf("topology: %w: repositories: neither default nor tasks given", ErrInvalid)
	}
	return g, nil
}

// ParseCatalogYAML parses and validates a catalog document (format in the
// package documentation). Variants are expanded to one model per task and
// replica, named "<task>/<variant>#<replica>". Errors wrap ErrInvalid and
// name the field.
func ParseCatalogYAML(data []byte) (*Catalog, error) {
	var f catalogFile
	if err := decodeStrict(data, &f); err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	tasks := f.Tasks
	if f.TaskCount < 0 || f.TaskCount > MaxTasks {
		return nil, fmt.Errorf("catalog: %w: task_count: %d outside [0, %d]", ErrInvalid, f.TaskCount, MaxTasks)
	}
	if f.TaskCount > 0 {
		if len(tasks) > 0 {
			return nil, fmt.Errorf("catalog: %w: task_count: give either tasks or task_count, not both", ErrInvalid)
		}
		prefix := f.TaskPrefix
		if prefix == "" {
			prefix = "task-"
		}
		for i := 0; i < f.TaskCount; i++ {
			tasks = append(tasks, fmt.Sprintf("%s%02d", prefix, i))
		}
	}
	replicas := f.Replicas
	if replicas < 0 || replicas > MaxReplicas {
		return nil, fmt.Errorf("catalog: %w: replicas: %d outside [0, %d]", ErrInvalid, replicas, MaxReplicas)
	}
	if n := max(len(tasks), 1) * max(len(f.Variants), 1) * max(replicas, 1); n > MaxModels {
		return nil, fmt.Errorf("catalog: %w: variants: %d tasks x %d variants x %d replicas = %d models exceeds %d", ErrInvalid, len(tasks), len(f.Variants), replicas, n, MaxModels)
	}
	if replicas == 0 {
		replicas = 1
	}
	models := make([]Model, 0, len(tasks)*len(f.Variants)*replicas+len(f.Models))
	for _, t := range tasks {
		for vi, v := range f.Variants {
			if v.Name == "" {
				return nil, fmt.Errorf("catalog: %w: variants[%d].name: empty", ErrInvalid, vi)
			}
			for r := 0; r < replicas; r++ {
				speed := make(map[string]Speed, len(v.Speed))
				for k, s := range v.Speed {
					speed[k] = s
				}
				models = append(models, Model{
					Name: fmt.Sprintf("%s/%s#%d", t, v.Name, r), Task: t, Accuracy: v.Accuracy,
					SizeMB: v.SizeMB, Speed: speed, Variant: v.Name, Replica: r,
				})
			}
		}
	}
	models = append(models, f.Models...)
	c, err := NewCatalog(tasks, models)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	return c, nil
}

// MarshalTopologyYAML renders g in the topology format ParseTopologyYAML reads.
func MarshalTopologyYAML(g *Graph) ([]byte, error) {
	f := topologyFile{Name: g.Name, Vertices: g.Vertices, Edges: g.Edges, Repositories: repositoriesFile{Default: g.DefaultRepository, Tasks: g.Repositories}}
	return yaml.Marshal(f)
}

// MarshalCatalogYAML renders c in the catalog format ParseCatalogYAML reads
// (explicit models, no variants).
func MarshalCatalogYAML(c *Catalog) ([]byte, error) {
	f := catalogFile{Tasks: c.Tasks, Models: c.Models}
	return yaml.Marshal(f)
}

func mustGraph(data []byte) *Graph {
	g, err := ParseTopologyYAML(data)
	if err != nil {
		panic(fmt.Sprintf("idn: embedded topology is invalid: %v", err))
	}
	return g
}

// TopologyII returns a fresh copy of Network Topology II (DefaultTopologyYAML).
func TopologyII() *Graph { return mustGraph(DefaultTopologyYAML) }

// TopologyI returns a fresh copy of Network Topology I (TopologyIYAML).
func TopologyI() *Graph { return mustGraph(TopologyIYAML) }

// YOLOv4Catalog returns a fresh copy of the default catalog (DefaultCatalogYAML).
func YOLOv4Catalog() *Catalog {
	c, err := ParseCatalogYAML(DefaultCatalogYAML)
	if err != nil {
		panic(fmt.Sprintf("idn: embedded catalog is invalid: %v", err))
	}
	return c
}
