package node_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idn-net/idn/node"
	"github.com/idn-net/idn/node/nodetest"
)

func TestSingleNodeServesAndHTTPAPI(t *testing.T) {
	if nodetest.Isolate(t) {
		return
	}
	t.Cleanup(func() { nodetest.CheckNoLeaks(t) })
	topo, cat := nodetest.Files(t, nodetest.LineTopologyYAML, nodetest.SmallCatalogYAML)
	cfg := nodetest.Config(t, "r1", "repo")
	cfg.Topology, cfg.Catalog = topo, cat
	n := nodetest.Start(t, cfg)
	nodetest.WaitFor(t, 10*time.Second, "ready", n.Ready)
	rep, lat := n.Infer(context.Background(), node.InferInput{Task: "det", MinAccuracy: 0.8, SLO: 2 * time.Second})
	if !rep.Ok {
		t.Fatalf("reply: %+v", rep)
	}
	if rep.ServedByVertex != "repo" || rep.Model != "det/hi#0" {
		t.Fatalf("served by %s with %s", rep.ServedByVertex, rep.Model)
	}
	if lat < 8*time.Millisecond { // alpha 4 ms + beta 4 ms for a batch of 1
		t.Fatalf("latency %v below the emulated 8 ms", lat)
	}

	base := "http://" + n.Addrs().API
	do := func(method, path, body string) (int, map[string]any, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		return res.StatusCode, m, string(raw)
	}
	good := `{"id":"c1","inputs":[{"name":"img","shape":[1],"datatype":"BYTES","data":["x"]}],"parameters":{"slo_ms":2000,"min_accuracy":0.6}}`
	code, m, raw := do("POST", "/v2/models/det/infer", good)
	if code != 200 || m["id"] != "c1" || m["model_name"] != "det" {
		t.Fatalf("infer: %d %s", code, raw)
	}
	p := m["parameters"].(map[string]any)
	for _, k := range []string{"served_by_vertex", "served_by_node", "model", "correct", "accuracy", "latency_ms"} {
		if _, ok := p[k]; !ok {
			t.Fatalf("parameters.%s missing: %s", k, raw)
		}
	}
	code, m, raw = do("POST", "/v2/models/det/infer", `{"inputs":[{"name":"img","shape":[1],"datatype":"BYTES","data":["x"]}],"parameters":{"min_accuracy":3}}`)
	if code != 400 || m["kind"] != "bad_request" || !strings.Contains(m["error"].(string), "parameters.min_accuracy") {
		t.Fatalf("bad request: %d %s", code, raw)
	}
	code, m, raw = do("POST", "/v2/models/nope/infer", good)
	if code != 404 || !strings.Contains(m["error"].(string), "task") {
		t.Fatalf("unknown task: %d %s", code, raw)
	}
	if code, _, raw = do("GET", "/v2/health/live", ""); code != 200 {
		t.Fatalf("live: %d %s", code, raw)
	}
	if code, _, raw = do("GET", "/v2/health/ready", ""); code != 200 {
		t.Fatalf("ready: %d %s", code, raw)
	}
	if code, m, raw = do("GET", "/v2/models", ""); code != 200 || len(m["models"].([]any)) != 2 {
		t.Fatalf("models: %d %s", code, raw)
	}
	code, m, raw = do("GET", "/v1/status", "")
	if code != 200 || m["name"] != "r1" || m["vertex"] != "repo" || m["ready"] != true || m["is_leader"] != true || m["leader"] != "r1" {
		t.Fatalf("status: %d %s", code, raw)
	}
	for _, k := range []string{"tier", "members", "hosted"} {
		if _, ok := m[k]; !ok {
			t.Fatalf("status.%s missing: %s", k, raw)
		}
	}
	code, _, raw = do("GET", "/metrics", "")
	for _, want := range []string{"idn_requests_total 2", `idn_replies_total{result="ok"} 2`, `idn_served_total{vertex="repo",model="det/hi#0"}`,
		`idn_errors_total{kind="bad_request"} 2`, "idn_request_latency_seconds_bucket", "idn_members 1", `idn_is_leader{vertex="repo"} 1`,
		"idn_leader_changes_total"} {
		if !strings.Contains(raw, want) {
			t.Fatalf("metrics lack %q:\n%s", want, raw)
		}
	}
	if code != 200 {
		t.Fatalf("metrics: %d", code)
	}
}
