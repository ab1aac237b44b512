package idn

import "testing"

// Bad input gets an error, never a panic.
func FuzzParseTopologyYAML(f *testing.F) {
	f.Add(DefaultTopologyYAML)
	f.Add([]byte("vertices: [{id: a, tier: 0, gpu: x}]\nedges: [{a: a, b: a, rtt_ms: 1}]\nrepositories: {default: a}"))
	f.Add([]byte("vertices: {}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := ParseTopologyYAML(data)
		if err == nil {
			for _, v := range g.Vertices {
				_, _ = g.Path(v.ID, "any")
			}
		}
	})
}

// Bad input gets an error, never a panic.
func FuzzParseCatalogYAML(f *testing.F) {
	f.Add([]byte("task_count: 2\nreplicas: 2\nvariants: [{name: v, accuracy: 0.5, size_mb: 10, speed: {g: {fps: 3}}}]"))
	f.Add([]byte("tasks: [a]\nmodels: [{name: m, task: a, accuracy: 2, size_mb: 1}]"))
	f.Add([]byte("task_count: -1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCatalogYAML(data)
		if err == nil {
			for m := range c.Models {
				for gpu := range c.Models[m].Speed {
					if _, err := c.Delay(m, gpu); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	})
}
