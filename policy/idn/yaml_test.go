package idn

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestDefaults(t *testing.T) {
	g2 := TopologyII()
	if len(g2.Vertices) != 5 || len(g2.BaseStations()) != 2 {
		t.Fatalf("topology II: %d vertices, %d base stations", len(g2.Vertices), len(g2.BaseStations()))
	}
	g1 := TopologyI()
	if len(g1.Vertices) != 36 || len(g1.BaseStations()) != 24 {
		t.Fatalf("topology I: %d vertices, %d base stations", len(g1.Vertices), len(g1.BaseStations()))
	}
	c := YOLOv4Catalog()
	if len(c.Tasks) != 20 || len(c.Models) != 600 || len(c.ModelsFor("task-00")) != 30 {
		t.Fatalf("catalog: %d tasks %d models", len(c.Tasks), len(c.Models))
	}
	if err := c.CheckGPUs(g1); err != nil {
		t.Fatal(err)
	}
	if err := g1.CheckTasks(c.Tasks); err != nil {
		t.Fatal(err)
	}
	p, err := g1.Path("bs-23", "task-07")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(p, ",") != "bs-23,co-7,agg-1,dc-0,cloud" || g1.PathCost(p) != 67 {
		t.Fatalf("path %v cost %v", p, g1.PathCost(p))
	}
	p, _ = g2.Path("bs-1", "task-00")
	if strings.Join(p, ",") != "bs-1,co-0,dc-0,cloud" {
		t.Fatalf("path %v", p)
	}
	if d, _ := c.Delay(0, GPUTitanRTX); math.Abs(d-1000.0/1272) > 1e-12 {
		t.Fatalf("delay %v", d)
	}
	if l, _ := c.Capacity(0, GPUGTX980, 60); math.Abs(l-433*60) > 1e-9 {
		t.Fatalf("capacity %v", l)
	}
	if g1.RTT("bs-00", "co-0") != 6 || !math.IsInf(g1.RTT("bs-00", "cloud"), 1) || g1.RTT("cloud", "cloud") != 0 {
		t.Fatal("rtt")
	}
	// round trip through the marshallers
	b, err := MarshalTopologyYAML(g1)
	if err != nil {
		t.Fatal(err)
	}
	if g, err := ParseTopologyYAML(b); err != nil || len(g.Edges) != 35 {
		t.Fatalf("round trip: %v", err)
	}
	cb, err := MarshalCatalogYAML(c)
	if err != nil {
		t.Fatal(err)
	}
	if c2, err := ParseCatalogYAML(cb); err != nil || len(c2.Models) != 600 {
		t.Fatalf("catalog round trip: %v", err)
	}
}

func TestPathTieBreak(t *testing.T) {
	// a square: s-a-t and s-b-t with equal RTT; and a longer-hop equal path.
	g, err := ParseTopologyYAML([]byte(`
vertices:
  - {id: s, tier: 2, gpu: x}
  - {id: b, tier: 1, gpu: x}
  - {id: a, tier: 1, gpu: x}
  - {id: c, tier: 1, gpu: x}
  - {id: t, tier: 0, gpu: x}
edges:
  - {a: s, b: b, rtt_ms: 5}
  - {a: b, b: t, rtt_ms: 5}
  - {a: s, b: a, rtt_ms: 5}
  - {a: a, b: t, rtt_ms: 5}
  - {a: s, b: c, rtt_ms: 2}
  - {a: c, b: a, rtt_ms: 3}
repositories: {default: t}
`))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		p, err := g.Path("s", "any")
		if err != nil || strings.Join(p, ",") != "s,a,t" {
			t.Fatalf("path %v %v", p, err)
		}
	}
	if _, err := g.Path("nope", "any"); !errors.Is(err, ErrUnknownVertex) || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("unknown vertex: %v", err)
	}
}

func TestTopologyErrors(t *testing.T) {
	cases := map[string]string{
		"unknown edge endpoint": "vertices: [{id: a, tier: 0, gpu: x}]\nedges: [{a: a, b: zz, rtt_ms: 1}]\nrepositories: {default: a}",
		"negative":              "vertices: [{id: a, tier: 0, gpu: x}, {id: b, tier: 1, gpu: x}]\nedges: [{a: a, b: b, rtt_ms: -1}]\nrepositories: {default: a}",
		"duplicate id":          "vertices: [{id: a, tier: 0, gpu: x}, {id: a, tier: 1, gpu: x}]\nrepositories: {default: a}",
		"gpu":                   "vertices: [{id: a, tier: 0}]\nrepositories: {default: a}",
		"repositories":          "vertices: [{id: a, tier: 0, gpu: x}]",
		"field bogus":           "vertices: [{id: a, tier: 0, gpu: x}]\nbogus: 1\nrepositories: {default: a}",
		"unknown vertex":        "vertices: [{id: a, tier: 0, gpu: x}]\nrepositories: {tasks: {t: q}}",
	}
	for want, doc := range cases {
		_, err := ParseTopologyYAML([]byte(doc))
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v", want, err)
		}
	}
	g := TopologyII()
	g2, _ := NewGraph(g.Vertices, g.Edges, map[string]string{"a": "cloud"}, "")
	if err := g2.CheckTasks([]string{"a", "b"}); err == nil || !strings.Contains(err.Error(), `"b" has no repository`) {
		t.Fatalf("task with no repository: %v", err)
	}
	if _, err := g2.Path("bs-0", "b"); !errors.Is(err, ErrUnknownTask) {
		t.Fatalf("path unknown task: %v", err)
	}
}

func TestCatalogErrors(t *testing.T) {
	cases := map[string]string{
		"accuracy":       "tasks: [t]\nmodels: [{name: m, task: t, accuracy: 65.7, size_mb: 1, speed: {x: {fps: 1}}}]",
		"unknown task":   "tasks: [t]\nmodels: [{name: m, task: u, accuracy: 0.5, size_mb: 1, speed: {x: {fps: 1}}}]",
		"duplicate name": "tasks: [t]\nmodels: [{name: m, task: t, accuracy: 0.5, size_mb: 1, speed: {x: {fps: 1}}}, {name: m, task: t, accuracy: 0.5, size_mb: 1, speed: {x: {fps: 1}}}]",
		"no model":       "tasks: [t, u]\nmodels: [{name: m, task: t, accuracy: 0.5, size_mb: 1, speed: {x: {fps: 1}}}]",
		"size_mb":        "tasks: [t]\nmodels: [{name: m, task: t, accuracy: 0.5, size_mb: 0, speed: {x: {fps: 1}}}]",
		"fps > 0":        "tasks: [t]\nmodels: [{name: m, task: t, accuracy: 0.5, size_mb: 1, speed: {x: {}}}]",
		"tasks: empty":   "models: []",
	}
	for want, doc := range cases {
		_, err := ParseCatalogYAML([]byte(doc))
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v", want, err)
		}
	}
	c, err := ParseCatalogYAML([]byte("tasks: [t]\nmodels: [{name: m, task: t, accuracy: 0.5, size_mb: 1, speed: {x: {alpha_ms: 2, beta_ms: 3}}}]"))
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := c.Delay(0, "x"); d != 5 {
		t.Fatalf("alpha/beta delay %v", d)
	}
	if s, _ := c.Speed(0, "x"); s.BatchLatencyMs(4) != 11 {
		t.Fatal("batch latency")
	}
	if _, err := c.Delay(0, "y"); !errors.Is(err, ErrInvalid) {
		t.Fatal("missing gpu")
	}
}
