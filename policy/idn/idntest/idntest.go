// Package idntest builds small random IDN instances for the tests of the
// policy packages (paper 000 model, see package idn).
package idntest

import (
	"fmt"
	"math/rand/v2"

	"github.com/idn-net/idn/policy/idn"
)

// Random returns a random instance: a chain of nv vertices (vertex 0 is the
// entry, vertex nv-1 the repository of every task), ntask tasks with nm
// models each, random sizes, accuracies, speeds, budgets and RTTs, one
// request type per (task, vertex other than the repository), and a random
// batch r with random potential available capacities l <= min{L, r}.
func Random(rng *rand.Rand, nv, ntask, nm int, alpha float64) (*idn.Instance, []float64, idn.Loads) {
	var vs []idn.Vertex
	var es []idn.Edge
	for v := 0; v < nv; v++ {
		gpu := "g0"
		if rng.IntN(2) == 0 {
			gpu = "g1"
		}
		vs = append(vs, idn.Vertex{ID: fmt.Sprintf("v%d", v), Tier: nv - 1 - v, BudgetMB: 50 + 300*rng.Float64(), GPU: gpu})
		if v > 0 {
			es = append(es, idn.Edge{A: vs[v-1].ID, B: vs[v].ID, RTTms: 1 + 20*rng.Float64()})
		}
	}
	g, err := idn.NewGraph(vs, es, nil, vs[nv-1].ID)
	if err != nil {
		panic(err)
	}
	var tasks []string
	var models []idn.Model
	for t := 0; t < ntask; t++ {
		tasks = append(tasks, fmt.Sprintf("t%d", t))
		for m := 0; m < nm; m++ {
			models = append(models, idn.Model{
				Name: fmt.Sprintf("t%d-m%d", t, m), Task: tasks[t], Accuracy: 0.3 + 0.6*rng.Float64(), SizeMB: 20 + 150*rng.Float64(),
				Speed: map[string]idn.Speed{"g0": {FPS: 0.5 + 5*rng.Float64()}, "g1": {FPS: 0.5 + 5*rng.Float64()}},
			})
		}
	}
	c, err := idn.NewCatalog(tasks, models)
	if err != nil {
		panic(err)
	}
	cfg := idn.DefaultInstanceConfig()
	cfg.Alpha = alpha
	var keys []idn.TypeKey
	for _, t := range tasks {
		for v := 0; v < nv-1; v++ {
			keys = append(keys, idn.TypeKey{Task: t, Entry: vs[v].ID})
		}
	}
	in, err := idn.NewInstance(g, c, cfg, keys)
	if err != nil {
		panic(err)
	}
	r := make([]float64, len(in.Types))
	for i := range r {
		r[i] = float64(rng.IntN(400))
	}
	l := in.FullLoads(r)
	for rho := range l {
		for k, cd := range in.Types[rho].Cands {
			if !cd.Repo {
				l[rho][k] = float64(rng.IntN(int(l[rho][k]) + 1))
			}
		}
	}
	return in, r, l
}

// RandomY returns a random fractional allocation in [0,1] (not necessarily
// budget-feasible) with repository entries at 1.
func RandomY(rng *rand.Rand, in *idn.Instance) []float64 {
	y := make([]float64, in.NV*in.NM)
	for i := range y {
		y[i] = rng.Float64()
		if rng.IntN(5) == 0 {
			y[i] = float64(rng.IntN(2))
		}
		if in.Omega[i] {
			y[i] = 1
		}
	}
	return y
}
