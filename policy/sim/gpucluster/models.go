// Package gpucluster is the discrete-event simulator of emulated GPU workers
// for paper 004 (Zhang et al., "SHEPHERD: Serving DNNs in the Wild", NSDI
// 2023): an emulated worker runs a batch of model m for l_m(B) = alpha_m*|B|
// + beta_m ms (eq. (1), Table 4) and can be preempted at its next exit point,
// as SHEPHERD's emulated workers do (Sec. 7.1). It drives the schedulers of
// policy/flex (FLEX, SHEPHERD-NP, Clockwork-like, Nexus-like) with the
// serving groups of policy/herd, and provides the workloads of Sec. 7: a
// synthetic Azure-Functions-like trace with Poisson ("MAF-stable") or MMPP
// ("MAF-bursty") arrivals within each minute, the two-stream case of
// Sec. 7.2, and replay of a request trace from CSV.
//
// Pure: no goroutines, no I/O beyond the io.Reader/io.Writer handed in, no
// clock; runs are deterministic functions of their configuration and seed.
package gpucluster

import (
	"fmt"

	"github.com/idn-net/idn/policy/flex"
)

// Table4 returns the models of paper 004 Table 4 (alpha, beta in ms; exit
// points). The extracted table lists 17 models with all three values
// present; the text speaks of "13 profiled DNN models" in one place and "17
// DNN models" in another. We keep all 17 rows as printed, including BERT
// (alpha 40.98 ms, beta 5.67 ms: alpha > beta unlike every CV model, which
// makes BERT batches of more than 5 requests miss a 250 ms SLO; we did not
// swap the values). The paper's 7.2 numbers check out against the table:
// ResNet18 ~4 ms at batch 1 and ~32 ms at 128, ResNeSt269 ~79 ms at batch 1.
func Table4() []flex.Model {
	return []flex.Model{
		{Name: "RN18", Alpha: 0.22, Beta: 3.74, ExitPoints: 40},
		{Name: "RN34", Alpha: 0.38, Beta: 5.78, ExitPoints: 46},
		{Name: "RN50", Alpha: 0.75, Beta: 7.96, ExitPoints: 46},
		{Name: "RN101", Alpha: 1.25, Beta: 13.57, ExitPoints: 39},
		{Name: "RN152", Alpha: 1.77, Beta: 18.98, ExitPoints: 84},
		{Name: "RS50", Alpha: 1.18, Beta: 15.39, ExitPoints: 78},
		{Name: "RS101", Alpha: 1.91, Beta: 29.21, ExitPoints: 57},
		{Name: "RS200", Alpha: 3.35, Beta: 45.43, ExitPoints: 96},
		{Name: "RS269", Alpha: 4.37, Beta: 74.20, ExitPoints: 128},
		{Name: "DN121", Alpha: 0.69, Beta: 19.96, ExitPoints: 129},
		{Name: "DN161", Alpha: 1.74, Beta: 23.10, ExitPoints: 171},
		{Name: "DN169", Alpha: 0.83, Beta: 27.47, ExitPoints: 120},
		{Name: "DN201", Alpha: 1.12, Beta: 32.33, ExitPoints: 142},
		{Name: "GN", Alpha: 0.25, Beta: 8.41, ExitPoints: 44},
		{Name: "I3", Alpha: 0.96, Beta: 11.77, ExitPoints: 122},
		{Name: "RCNN", Alpha: 2.59, Beta: 14.90, ExitPoints: 51},
		{Name: "BERT", Alpha: 40.98, Beta: 5.67, ExitPoints: 43},
	}
}

// ModelIndex returns the index of the named model in models.
func ModelIndex(models []flex.Model, name string) (int, error) {
	for i, m := range models {
		if m.Name == name {
			return i, nil
		}
	}
	return -1, fmt.Errorf("gpucluster: unknown model %q", name)
}
