package scenarios

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as a fake `idn node` when fakeNodeEnv is set: the
// runner starts it with the real node's flags. Fake nodes of one run share a
// registry directory (the parent of the node dirs) where each keeps a
// heartbeat file; the members are the nodes with a fresh heartbeat and the
// leader of a vertex is its lowest-named member, so a SIGKILLed leader is
// replaced ~0.4 s later. fakeModeEnv changes the behaviour:
//
//	noready  never print the ready line
//	exit     exit 3 at once
//	hang     accept infer requests and never reply
//
// With --allocation infida /v1/status has an allocation object (see the
// infida block below) and /metrics the control counters.
//
// With --fault-api, POST /v1/fault {"drop":[gossip addrs]} hides those peers
// from this node's members (so a partitioned leader keeps leading alone).
const (
	fakeNodeEnv = "IDN_SCENARIOS_FAKE_NODE"
	fakeModeEnv = "IDN_SCENARIOS_FAKE_MODE"
)

func TestMain(m *testing.M) {
	if os.Getenv(fakeNodeEnv) != "" {
		os.Exit(fakeNode(os.Args[1:]))
	}
	os.Exit(m.Run())
}

type fakeEntry struct {
	Name   string `json:"name"`
	Vertex string `json:"vertex"`
	PID    int    `json:"pid"`
	Gossip string `json:"gossip"`
}

func fakeNode(args []string) int {
	if len(args) == 0 || args[0] != "node" {
		fmt.Fprintln(os.Stderr, "fake node: want the node subcommand, got", args)
		return 2
	}
	mode := os.Getenv(fakeModeEnv)
	if mode == "exit" {
		fmt.Fprintln(os.Stderr, "fake node: exiting as told")
		return 3
	}
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	name := fs.String("name", "", "")
	dataDir := fs.String("data-dir", "", "")
	vertex := fs.String("vertex", "", "")
	fs.Int("tier", 0, "")
	fs.String("join", "", "")
	fs.Int("gpus", 0, "")
	fs.Int("gpu-mem-mb", 0, "")
	fs.String("executor", "", "")
	fs.Int("bootstrap-expect", 0, "")
	fs.String("topology", "", "")
	fs.String("catalog", "", "")
	fs.String("hosted", "", "")
	faultAPI := fs.Bool("fault-api", false, "")
	allocation := fs.String("allocation", "static", "")
	slotLen := fs.Duration("slot", time.Minute, "")
	fs.Float64("eta", 0, "")
	fs.Float64("alpha", 1, "")
	fs.Int("refresh", 1, "")
	fs.Uint64("types-seed", 1, "")
	fs.Int("entries-per-task", 2, "")
	fs.Duration("control-timeout", 0, "")
	bind := map[string]*string{}
	for _, b := range []string{"gossip", "remote", "raft", "api"} {
		bind[b] = fs.String("bind-"+b, "127.0.0.1:0", "")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	reg := filepath.Join(filepath.Dir(filepath.Dir(*dataDir)), ".fake")
	if err := os.MkdirAll(reg, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	addrs := map[string]string{}
	var apiLn net.Listener
	for _, b := range []string{"gossip", "remote", "raft", "api"} {
		ln, err := net.Listen("tcp", *bind[b])
		if err != nil {
			fmt.Fprintln(os.Stderr, "fake node: bind", b, err)
			return 1
		}
		addrs[b] = ln.Addr().String()
		if b == "api" {
			apiLn = ln
		}
	}
	if pf, err := os.OpenFile(filepath.Join(reg, "pids"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
		fmt.Fprintln(pf, os.Getpid())
		pf.Close()
	}
	me := fakeEntry{Name: *name, Vertex: *vertex, PID: os.Getpid(), Gossip: addrs["gossip"]}
	var dropMu sync.Mutex
	drop := map[string]bool{}
	regFile := filepath.Join(reg, *name+".json")
	b, _ := json.Marshal(me)
	if err := os.WriteFile(regFile, b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go func() {
		for {
			now := time.Now()
			_ = os.Chtimes(regFile, now, now)
			time.Sleep(50 * time.Millisecond)
		}
	}()
	members := func() []fakeEntry {
		files, _ := filepath.Glob(filepath.Join(reg, "*.json"))
		var out []fakeEntry
		for _, f := range files {
			fi, err := os.Stat(f)
			if err != nil || time.Since(fi.ModTime()) > 400*time.Millisecond {
				continue
			}
			var e fakeEntry
			if b, err := os.ReadFile(f); err == nil && json.Unmarshal(b, &e) == nil {
				dropMu.Lock()
				cut := drop[e.Gossip]
				dropMu.Unlock()
				if !cut {
					out = append(out, e)
				}
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		return out
	}
	var requests, replies atomic.Int64
	// --allocation infida: the FSM slot counter is the common slot clock,
	// y^v a function of it, x^v alternates between two models, and the
	// leader "restores" the slot it first reported leading at.
	infidaMode := *allocation == "infida"
	started := time.Now()
	committed := func() uint64 { return uint64(time.Now().UnixNano() / int64(*slotLen)) }
	yAt := func(c uint64) []float64 { return []float64{float64(c%1000) / 1000, 0.25} }
	var restoredMu sync.Mutex
	restored := uint64(0)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, _ *http.Request) {
		ms := members()
		leader := ""
		var sm []StatusMember
		for _, m := range ms {
			sm = append(sm, StatusMember{Name: m.Name, Vertex: m.Vertex, State: "alive"})
			if m.Vertex == *vertex && leader == "" {
				leader = m.Name
			}
		}
		st := Status{Name: *name, Vertex: *vertex, Ready: leader != "", IsLeader: leader == *name, Leader: leader, Members: sm}
		if infidaMode {
			c := committed()
			a := &StatusAllocation{Mode: "infida", SlotMs: slotLen.Milliseconds(), CommittedSlot: c, Models: []string{"a", "b"}, Y: yAt(c),
				Hosted: []string{"task-00/yolov4-tiny-288p#0"}, Running: st.IsLeader}
			if c%2 == 1 {
				a.Hosted = []string{"task-00/yolov4-416p#0"}
			}
			if st.IsLeader {
				restoredMu.Lock()
				if restored == 0 {
					restored = c
				}
				a.RestoredSlot, a.RestoredY = restored, yAt(restored)
				restoredMu.Unlock()
			}
			st.Allocation = a
		}
		_ = json.NewEncoder(w).Encode(st)
	})
	mux.HandleFunc("POST /v2/models/{task}/infer", func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if mode == "hang" {
			<-r.Context().Done()
			return
		}
		var req inferRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Inputs) == 0 {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":"inputs: %v","kind":"bad_request"}`, err)
			return
		}
		replies.Add(1)
		task := r.PathValue("task")
		if task == "task-03" {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"error":"vertex cloud unreachable","kind":"unreachable"}`)
			return
		}
		served, model := *vertex, "m"
		if task == "task-01" {
			served = "cloud"
		}
		if infidaMode {
			model = task + "/yolov4-416p#0"
		}
		time.Sleep(2 * time.Millisecond)
		fmt.Fprintf(w, `{"id":%q,"model_name":%q,"outputs":[],"parameters":{"served_by_vertex":%q,"served_by_node":%q,"model":%q,"correct":true,"accuracy":0.5,"latency_ms":2}}`,
			req.ID, task, served, *name, model)
	})
	mux.HandleFunc("POST /v1/fault", func(w http.ResponseWriter, r *http.Request) {
		if !*faultAPI {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error":"path: /v1/fault is disabled","kind":"bad_request"}`)
			return
		}
		var b struct {
			Drop []string `json:"drop"`
		}
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		dropMu.Lock()
		drop = map[string]bool{}
		for _, d := range b.Drop {
			drop[d] = true
		}
		dropMu.Unlock()
		_ = json.NewEncoder(w).Encode(b)
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "# TYPE idn_requests_total counter\nidn_requests_total %d\nidn_replies_total{result=\"ok\"} %d\nidn_members %d\n", requests.Load(), replies.Load(), len(members()))
		if infidaMode {
			n := int64(time.Since(started) / *slotLen)
			fmt.Fprintf(w, "idn_infida_slots_total %d\nidn_control_messages_total %d\nidn_control_batches_total %d\nidn_control_raw_bytes_total %d\nidn_control_wire_bytes_total %d\n",
				n, 4*n, 2*n, 400*n, 100*n)
		}
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(apiLn) }()
	if mode != "noready" {
		b, _ := json.Marshal(ReadyLine{Event: "ready", Name: *name, Vertex: *vertex, API: addrs["api"], Gossip: addrs["gossip"], Remote: addrs["remote"], Raft: addrs["raft"], PID: os.Getpid()})
		fmt.Println(string(b))
	}
	fmt.Fprintln(os.Stderr, "fake node", *name, "up:", strings.Join([]string{addrs["api"], addrs["gossip"]}, " "))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	_ = os.Remove(regFile)
	return 0
}
