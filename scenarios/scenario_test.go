package scenarios

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestQuickstartIsValid(t *testing.T) {
	sc, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if sc.Name != "quickstart" || sc.Workload.Duration.D() != 60*time.Second {
		t.Errorf("name %q duration %s", sc.Name, sc.Workload.Duration.D())
	}
	per := map[string]int{}
	tiers := map[string]int{}
	for _, n := range sc.NodeSpecs() {
		per[n.Vertex]++
		tiers[n.Vertex] = n.Tier
	}
	if len(per) != len(sc.Graph().Vertices) {
		t.Errorf("nodes at %d vertices, topology has %d", len(per), len(sc.Graph().Vertices))
	}
	for v, n := range per {
		want := 1
		if tiers[v] == 1 {
			want = 3
		}
		if n != want {
			t.Errorf("vertex %s (tier %d): %d nodes, want %d", v, tiers[v], n, want)
		}
	}
	if len(sc.Faults) != 2 || sc.Faults[0].Action != ActionKillLeader || sc.Faults[0].At.D() != 20*time.Second ||
		tiers[sc.Faults[0].Vertex] != 1 || sc.Faults[1].Action != ActionRestart || sc.Faults[1].At.D() != 40*time.Second {
		t.Errorf("faults = %+v", sc.Faults)
	}
	onDisk, err := os.ReadFile("quickstart.yaml")
	if err != nil || string(onDisk) != string(QuickstartYAML) {
		t.Errorf("embedded quickstart differs from quickstart.yaml (%v)", err)
	}
}

func TestGoodScenarios(t *testing.T) {
	files, _ := filepath.Glob("testdata/good/*.yaml")
	if len(files) == 0 {
		t.Fatal("no testdata/good files")
	}
	for _, f := range files {
		if filepath.Base(f) == "topology.yaml" {
			continue
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			if _, err := Load(f); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestFullScenarioFields(t *testing.T) {
	sc, err := Load("testdata/good/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	specs := sc.NodeSpecs()
	if len(specs) != 5 { // core x2, edge x3
		t.Fatalf("%d nodes: %+v", len(specs), specs)
	}
	var edge NodeSpec
	for _, s := range specs {
		if s.Name == "edge-n1" {
			edge = s
		}
	}
	if edge.GroupSize != 3 || edge.Tier != 1 || strings.Join(edge.Args, " ") != "--log-level debug --hosted task-00/yolov4-tiny-288p#0 --log-level info --fault-api" {
		t.Errorf("edge-n1 = %+v", edge)
	}
	if sc.TopologyPath() != filepath.Join("testdata", "good", "topology.yaml") || sc.CatalogPath() != "" {
		t.Errorf("paths %q %q", sc.TopologyPath(), sc.CatalogPath())
	}
	if sc.Workload.ClientTimeout() != 5*time.Second || sc.Timeouts.Settle != 0 || sc.Timeouts.Stop.D() != 2*time.Second {
		t.Errorf("timeouts: client %s, %+v", sc.Workload.ClientTimeout(), sc.Timeouts)
	}
	for _, n := range specs { // a partition fault turns on the nodes' fault API
		if n.Args[len(n.Args)-1] != "--fault-api" {
			t.Errorf("%s args %v lack --fault-api", n.Name, n.Args)
		}
	}
}

func TestDefaults(t *testing.T) {
	sc, err := Load("testdata/good/minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	w := sc.Workload
	if w.Arrivals != ArrivalsPoisson || w.MaxInFlight != 256 || w.Seed != 1 || w.ClientTimeout() != 10*time.Second ||
		strings.Join(w.Entry, ",") != strings.Join(sc.Graph().BaseStations(), ",") {
		t.Errorf("workload defaults: %+v", w)
	}
	if sc.Timeouts.Startup.D() != 90*time.Second || sc.Timeouts.Failover.D() != 30*time.Second || sc.Timeouts.Stop.D() != 5*time.Second {
		t.Errorf("timeouts: %+v", sc.Timeouts)
	}
	if len(sc.NodeSpecs()) != len(sc.Graph().Vertices) {
		t.Errorf("%d nodes", len(sc.NodeSpecs()))
	}
	w.SLOms = 500
	if w.ClientTimeout() != 3*time.Second {
		t.Errorf("client timeout with slo 500ms = %s", w.ClientTimeout())
	}
}

// TestBadScenarios checks every testdata/bad file fails with an ErrInvalid
// error containing the text of its "# want:" first line.
func TestBadScenarios(t *testing.T) {
	files, _ := filepath.Glob("testdata/bad/*.yaml")
	if len(files) < 20 {
		t.Fatalf("only %d bad files", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(string(b), "\n")
			want, ok := strings.CutPrefix(first, "# want: ")
			if !ok {
				t.Fatalf("first line %q is not '# want: ...'", first)
			}
			_, err = Load(f)
			if err == nil {
				t.Fatalf("Load succeeded, want error containing %q", want)
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q\nwant ErrInvalid containing %q", err, want)
			}
		})
	}
}

func TestShippedScenariosAreValid(t *testing.T) {
	files, _ := filepath.Glob("*.yaml")
	if len(files) < 2 {
		t.Fatalf("found %v", files)
	}
	for _, f := range files {
		if _, err := Load(f); err != nil {
			t.Error(err)
		}
	}
}

// TestEveryMetricIsComputed checks AssertionMetrics and Report.Metric agree.
func TestEveryMetricIsComputed(t *testing.T) {
	r := Summarize(nil)
	for name := range AssertionMetrics {
		if _, ok := r.Metric(name); !ok {
			t.Errorf("metric %q is documented but not computed", name)
		}
	}
	for _, name := range []string{"leader_changes", "server_unreplied", "converged_at_end"} {
		if _, ok := AssertionMetrics[name]; !ok {
			t.Errorf("metric %q is computed but not in AssertionMetrics", name)
		}
	}
}
