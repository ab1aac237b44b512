package scenarios

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/idn-net/idn/policy/idn"
	"github.com/idn-net/idn/policy/sim/slot"
)

type slotResult = slot.Result

// topo2Instance is Topology II with the YOLOv4 catalog, alpha 1, 2 s slots
// and the two types (task-00, bs-0), (task-01, bs-1).
func topo2Instance(t *testing.T) *idn.Instance {
	t.Helper()
	in, err := idn.NewInstance(idn.TopologyII(), idn.YOLOv4Catalog(), idn.InstanceConfig{Alpha: 1, InaccuracyScale: 100, SlotSeconds: 2},
		[]idn.TypeKey{{Task: "task-00", Entry: "bs-0"}, {Task: "task-01", Entry: "bs-1"}})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// Costs by hand (paper 000 eq. 6): RTT from the entry + 1000/fps + 100*(1-accuracy).
// bs-0 -> co-0 6 ms -> dc-0 21 ms -> cloud 40 ms; bs GTX 980, cloud Titan RTX.
// The cheapest repository candidate of task-00 at the cloud is
// yolov4-3.99pruned (209 fps, 0.551): 67 + 1000/209 + 44.9 = 116.68 ms.
var (
	repoCost00 = 67 + 1000/209.0 + 100*(1-0.551)
	bs416Cost  = 1000/25.1 + 100*(1-0.628)        // yolov4-416p at bs-0
	cloudTiny  = 67 + 1000/1272.0 + 100*(1-0.344) // tiny-288p at the cloud: ranked after the repository, not a candidate
)

func TestReplyGain(t *testing.T) {
	in := topo2Instance(t)
	for _, c := range []struct {
		name          string
		rho           int
		vertex, model string
		want          float64
		ok            bool
	}{
		{"edge candidate", 0, "bs-0", "task-00/yolov4-416p#0", repoCost00 - bs416Cost, true},
		{"repository", 0, "cloud", "task-00/yolov4-3.99pruned#1", 0, true},
		{"not a candidate (eq. 6 on the path)", 0, "cloud", "task-00/yolov4-tiny-288p#2", repoCost00 - cloudTiny, true},
		{"vertex off the path", 0, "bs-1", "task-00/yolov4-416p#0", 0, false},
		{"model of another task", 0, "bs-0", "task-01/yolov4-416p#0", 0, false},
		{"unknown model", 0, "bs-0", "m", 0, false},
		{"unknown vertex", 1, "nowhere", "task-01/yolov4-416p#0", 0, false},
	} {
		got, ok := ReplyGain(in, c.rho, c.vertex, c.model)
		if ok != c.ok || !near(got, c.want) {
			t.Errorf("%s: ReplyGain = %v, %v; want %v, %v", c.name, got, ok, c.want, c.ok)
		}
	}
	if repoCost00-cloudTiny >= 0 {
		t.Fatalf("hand case broken: tiny-288p at the cloud should cost more than the repository candidate")
	}
}

func TestLiveNTAG(t *testing.T) {
	in := topo2Instance(t)
	g := repoCost00 - bs416Cost
	replies := []InfidaReply{
		{Slot: 0, Type: 0, Outcome: OutcomeResult, Vertex: "bs-0", Model: "task-00/yolov4-416p#0"},
		{Slot: 0, Type: 0, Outcome: OutcomeError},
		{Slot: 0, Type: 0, Outcome: OutcomeLost},
		{Slot: 1, Type: 0, Outcome: OutcomeResult, Vertex: "bs-0", Model: "task-00/yolov4-416p#0"},
		{Slot: 1, Type: 0, Outcome: OutcomeResult, Vertex: "cloud", Model: "task-00/yolov4-3.99pruned#0"},
		{Slot: 1, Type: 0, Outcome: OutcomeResult, Vertex: "bs-1", Model: "task-00/yolov4-416p#0"}, // unscored
		{Slot: 2, Type: 0, Outcome: OutcomeSkipped},
		{Slot: 7, Type: 0, Outcome: OutcomeResult}, // outside the slots: ignored
	}
	st := LiveNTAG(in, 4, replies)
	want := []float64{g / 3, g / 3, 0, 0}
	for i := range want {
		if !near(st.Series[i], want[i]) {
			t.Errorf("NTAG_%d = %v, want %v", i, st.Series[i], want[i])
		}
	}
	if got := st.Sent; got[0] != 3 || got[1] != 3 || got[2] != 1 || got[3] != 0 {
		t.Errorf("sent = %v", got)
	}
	if st.Results != 4 || st.Errors != 1 || st.Unanswered != 2 || st.Unscored != 1 {
		t.Errorf("results %d errors %d unanswered %d unscored %d", st.Results, st.Errors, st.Unanswered, st.Unscored)
	}
}

func TestMUSeries(t *testing.T) {
	size := map[string]float64{"a": 100, "b": 10, "c": 1}
	hosted := [][][]string{
		{{"a"}, {"b"}},
		{{"a", "b"}, nil},        // v0 +b; v1 not observed: keeps {b}
		{{"c"}, {"b", "c"}},      // v0 +c (a, b dropped: no cost); v1 +c
		{{"c"}, {"b", "c", "x"}}, // unknown model: size 0
	}
	got := MUSeries(hosted, func(m string) float64 { return size[m] })
	want := []float64{0, 10, 2, 0}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("MU = %v, want %v", got, want)
		}
	}
	// A vertex first observed late counts nothing for its first set.
	got = MUSeries([][][]string{{nil}, {{"a"}}, {{"a", "b"}}}, func(m string) float64 { return size[m] })
	if got[1] != 0 || got[2] != 10 {
		t.Errorf("late first observation: MU = %v, want [0 0 10]", got)
	}
}

func TestControlTable(t *testing.T) {
	scrapes := map[string]map[string]float64{
		"dc-0-n1#1": {"idn_control_messages_total": 100, "idn_control_batches_total": 20, "idn_control_raw_bytes_total": 4000,
			"idn_control_wire_bytes_total": 1000, "idn_infida_slots_total": 10, "idn_control_timeouts_total": 1,
			"idn_serving_cost_messages_total": 5, "idn_serving_cost_bytes_total": 50},
		// the next leader after a kill: counts since its start
		"dc-0-n2#1": {"idn_control_messages_total": 20, "idn_control_batches_total": 4, "idn_control_raw_bytes_total": 800,
			"idn_control_wire_bytes_total": 200, "idn_infida_slots_total": 2, "idn_control_stale_total": 3, "idn_control_malformed_total": 1},
		"co-0-n1#1": {"idn_control_messages_total": 7},
	}
	vertexOf := map[string]string{"dc-0-n1#1": "dc-0", "dc-0-n2#1": "dc-0", "co-0-n1#1": "co-0"}
	rows := ControlTable(scrapes, vertexOf)
	if len(rows) != 2 || rows[0].Vertex != "co-0" || rows[1].Vertex != "dc-0" {
		t.Fatalf("rows = %+v", rows)
	}
	co := rows[0]
	if co.Slots != 0 || co.Messages != 0 || co.Totals["idn_control_messages_total"] != 7 {
		t.Errorf("co-0 (no stepped slot) = %+v", co)
	}
	dc := rows[1]
	if dc.Slots != 12 || dc.Messages != 10 || dc.Batches != 2 || dc.RawBytes != 400 || dc.WireBytes != 100 ||
		!near(dc.ServingCostMessages, 5.0/12) || !near(dc.ServingCostBytes, 50.0/12) || dc.Timeouts != 1 || dc.Stale != 3 || dc.Malformed != 1 {
		t.Errorf("dc-0 = %+v", dc)
	}
}

func TestCheckY(t *testing.T) {
	rec := map[uint64][]float64{10: {0.5, 0.25}, 11: {0.75, 0.125}}
	base := YCheck{Vertex: "dc-0", OldLeader: "dc-0-n1", NewLeader: "dc-0-n2", LastCommittedSeen: 11}
	ok := base
	ok.RestoredSlot = 11
	if y := checkY(ok, rec, []float64{0.75, 0.125}); !y.Preserved || !y.Recorded || y.MaxAbsDiff != 0 || y.Problem != "" {
		t.Errorf("equal: %+v", y)
	}
	if y := checkY(ok, rec, []float64{0.75, 0.126}); y.Preserved || !near(y.MaxAbsDiff, 0.001) || !strings.Contains(y.Problem, "differs") {
		t.Errorf("diff: %+v", y)
	}
	if y := checkY(ok, rec, []float64{0.75}); y.Preserved || y.MaxAbsDiff != -1 {
		t.Errorf("length: %+v", y)
	}
	back := base
	back.RestoredSlot = 10
	if y := checkY(back, rec, []float64{0.5, 0.25}); y.Preserved || !strings.Contains(y.Problem, "restored_slot 10 < last committed_slot 11") {
		t.Errorf("went back: %+v", y)
	}
	ahead := base
	ahead.RestoredSlot = 12
	if y := checkY(ahead, rec, []float64{1, 1}); y.Preserved || y.Recorded || !strings.Contains(y.Problem, "never recorded") {
		t.Errorf("unrecorded: %+v", y)
	}
	none := base
	none.NewLeader = ""
	if y := checkY(none, rec, nil); y.Preserved || !strings.Contains(y.Problem, "no new leader") {
		t.Errorf("no leader: %+v", y)
	}
}

func TestInfidaPlan(t *testing.T) {
	plan := infidaPlan([][]float64{{2, 1}, {0, 3}, {0, 0}}, time.Second, 1)
	if len(plan) != 6 {
		t.Fatalf("%d requests, want 6", len(plan))
	}
	count := map[[2]int]int{}
	for i, p := range plan {
		count[[2]int{p.slot, p.rho}]++
		k := i
		if p.slot == 1 {
			k = i - 3
		}
		want := time.Duration(p.slot)*time.Second + time.Duration((float64(k)+0.5)/3*float64(time.Second))
		if p.at != want {
			t.Errorf("request %d at %s, want %s", i, p.at, want)
		}
	}
	if count[[2]int{0, 0}] != 2 || count[[2]int{0, 1}] != 1 || count[[2]int{1, 1}] != 3 {
		t.Errorf("counts %v", count)
	}
}

func TestSlotStart(t *testing.T) {
	S := 2 * time.Second
	at, s := slotStart(time.Unix(10, 5e8), S, 300*time.Millisecond)
	if s != 6 || !at.Equal(time.Unix(12, 0)) {
		t.Errorf("from 10.5s: slot %d at %v", s, at)
	}
	at, s = slotStart(time.Unix(11, 8e8), S, 300*time.Millisecond)
	if s != 7 || !at.Equal(time.Unix(14, 0)) {
		t.Errorf("from 11.8s: slot %d at %v", s, at)
	}
}

func TestInfidaScenarioSetup(t *testing.T) {
	sc, err := Load("testdata/good/infida.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if sc.Workload.Rate != 20 || sc.Workload.Duration.D() != 6*time.Second || len(sc.Workload.Entry) == 0 {
		t.Errorf("workload = %+v", sc.Workload)
	}
	cfg, setup := sc.InfidaSetup()
	if setup == nil || len(setup.Batches) != 6 || cfg.Workload.SlotSeconds != 1 || cfg.Instance.SlotSeconds != 1 ||
		cfg.INFIDA.Eta != 5 || cfg.INFIDA.RefreshTarget != 2 || cfg.Workload.Window != 50 || cfg.Seed != 1 {
		t.Fatalf("cfg = %+v", cfg)
	}
	for _, n := range sc.NodeSpecs() {
		got := strings.Join(n.Args, " ")
		want := "--allocation infida --slot 1s --eta 5 --alpha 1 --refresh 2 --types-seed 1 --entries-per-task 2 --control-timeout 400ms"
		if got != want {
			t.Fatalf("%s args %q, want %q", n.Name, got, want)
		}
	}
	res, err := sc.SimulateInfida()
	if err != nil || len(res.SlotNTAG) != 6 {
		t.Fatalf("sim: %v %+v", err, res)
	}
	// Every request of the plan is the batches' total.
	tot := 0.0
	for _, r := range setup.Batches {
		for _, n := range r {
			tot += n
		}
	}
	if plan := infidaPlan(setup.Batches, time.Second, 1); len(plan) != int(tot) || tot < 100 {
		t.Errorf("plan has %d requests, batches %v", len(plan), tot)
	}
}

func TestInfidaMetrics(t *testing.T) {
	r := &Report{}
	if v, ok := r.Metric("infida_live_ntag"); !ok || !math.IsNaN(v) {
		t.Errorf("without infida: %v %v", v, ok)
	}
	r.Infida = &InfidaReport{Slots: 3, Live: NTAGStats{Series: []float64{1, 2, 9}, Errors: 2},
		LiveMUSeries: []float64{0, 10, 20}, YChecks: []YCheck{{Preserved: true, Recorded: true}},
		Control: []ControlRow{{Timeouts: 2}, {Timeouts: 1}}}
	summarizeInfida(r.Infida, simResult([]float64{1, 2, 10}, []float64{0, 5, 5}))
	for name, want := range map[string]float64{
		"infida_live_ntag": 9, "infida_sim_ntag": 10, "infida_ntag_ratio": 0.9, "infida_within_10pct": 1,
		"infida_live_mu": 10, "infida_sim_mu": 10.0 / 3, "infida_y_preserved": 1, "infida_y_max_diff": 0,
		"infida_error_replies": 2, "infida_control_timeouts": 3,
	} {
		if v, ok := r.Metric(name); !ok || !near(v, want) {
			t.Errorf("%s = %v (%v), want %v", name, v, ok, want)
		}
	}
	r.Infida.YChecks = append(r.Infida.YChecks, YCheck{Recorded: true, MaxAbsDiff: 0.5})
	if v, _ := r.Metric("infida_y_preserved"); v != 0 {
		t.Errorf("one failed check: preserved %v", v)
	}
	if v, _ := r.Metric("infida_y_max_diff"); v != 0.5 {
		t.Errorf("max diff %v", v)
	}
	r.Infida.YChecks = nil
	if v, _ := r.Metric("infida_y_preserved"); v != 0 {
		t.Errorf("no check: preserved %v, want 0", v)
	}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil || !strings.Contains(b.String(), "NTAG   live 9.0000  sim 10.0000  ratio 0.9000 (within 10%)") {
		t.Errorf("text (%v):\n%s", err, b.String())
	}
}

func simResult(ntag, mu []float64) slotResult { return slotResult{SlotNTAG: ntag, SlotMU: mu} }

// TestRunInfidaFake runs an infida scenario end to end on fake nodes: the
// load starts at a slot boundary, every planned request is sent, the NTAG,
// MU, control table and the leader-kill y^v check are computed.
func TestRunInfidaFake(t *testing.T) {
	const doc = `
name: infida-fake
nodes:
  vertices:
    dc-0: {count: 3}
infida: {slot: 300ms, eta: 1, rate: 60, slots: 12}
workload: {timeout: 5s}
faults:
  - {at: 1500ms, action: kill_leader, vertex: dc-0}
assertions:
  - lost == 0
  - infida_y_preserved == 1
  - infida_y_max_diff == 0
  - failovers == 1
timeouts: {startup: 20s, failover: 5s, settle: 0s, stop: 3s}
`
	sc, err := Parse([]byte(doc), "")
	if err != nil {
		t.Fatal(err)
	}
	opt, progress := fakeOptions(t, "")
	rep, err := Run(context.Background(), sc, opt)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, progress.String())
	}
	assertNoProcesses(t, opt.WorkDir)
	f := rep.Infida
	if f == nil {
		t.Fatal("no infida report")
	}
	_, setup := sc.InfidaSetup()
	want := 0
	for _, r := range setup.Batches {
		for _, n := range r {
			want += int(n)
		}
	}
	if rep.Sent != want || f.Live.Results+f.Live.Errors+f.Live.Unanswered != want {
		t.Errorf("sent %d, infida accounted %d+%d+%d, planned %d", rep.Sent, f.Live.Results, f.Live.Errors, f.Live.Unanswered, want)
	}
	if f.Live.Errors == 0 || f.Live.Errors != rep.ErrorsByKind["unreachable"] {
		t.Errorf("error replies %d, want the task-03 ones (%d)", f.Live.Errors, rep.ErrorsByKind["unreachable"])
	}
	if f.LiveNTAG <= 0 || f.SimNTAG <= 0 || len(f.Live.Series) != 12 || len(f.SimSeries) != 12 || f.TailFrom != 8 {
		t.Errorf("ntag live %v sim %v series %d/%d tail %d", f.LiveNTAG, f.SimNTAG, len(f.Live.Series), len(f.SimSeries), f.TailFrom)
	}
	if f.LiveMU <= 0 || f.HostedMissed > 2 {
		t.Errorf("live MU %v (fake x^v alternates every slot), missed polls %d", f.LiveMU, f.HostedMissed)
	}
	if len(f.Control) != 5 {
		t.Fatalf("control rows %+v", f.Control)
	}
	for _, c := range f.Control {
		if c.Slots > 0 && (c.Messages != 4 || c.Batches != 2 || c.RawBytes != 400 || c.WireBytes != 100) {
			t.Errorf("control row %+v, want 4 msgs, 2 batches, 400/100 bytes per slot", c)
		}
	}
	if len(f.YChecks) != 1 || !f.YChecks[0].Preserved || f.YChecks[0].RestoredSlot < f.YChecks[0].LastCommittedSeen {
		t.Errorf("y checks %+v", f.YChecks)
	}
	if f.FirstSlot*300 < time.Now().Add(-time.Minute).UnixMilli() {
		t.Errorf("first slot %d is not a recent slot number", f.FirstSlot)
	}
	var b strings.Builder
	if err := rep.WriteText(&b); err != nil || !strings.Contains(b.String(), "leader-kill y^v checks") {
		t.Errorf("text: %v", err)
	}
}
