package node

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/idn-net/idn/actors/wire"
	"github.com/idn-net/idn/messages"
)

// MaxInferBody bounds the body of an infer request.
const MaxInferBody = 8 << 20

// InferTensor is one KServe v2 input or output tensor.
type InferTensor struct {
	// Name of the tensor.
	Name string `json:"name"`
	// Shape of the tensor (non-negative dimensions).
	Shape []int64 `json:"shape"`
	// Datatype is a KServe v2 datatype (BOOL, INT32, FP32, BYTES, ...).
	Datatype string `json:"datatype"`
	// Data is the tensor content (flat or nested JSON array).
	Data json.RawMessage `json:"data"`
	// Parameters are per-tensor parameters (ignored).
	Parameters map[string]any `json:"parameters,omitempty"`
}

// InferParameters are the request parameters IDN understands.
type InferParameters struct {
	// SLOms is the deadline in milliseconds (optional).
	SLOms *float64 `json:"slo_ms,omitempty"`
	// MinAccuracy in [0,1] is the least acceptable model accuracy (optional).
	MinAccuracy *float64 `json:"min_accuracy,omitempty"`
}

// InferRequestBody is the KServe v2 JSON body of POST /v2/models/{task}/infer.
type InferRequestBody struct {
	// ID is echoed in the response.
	ID string `json:"id,omitempty"`
	// Inputs are the input tensors (at least one).
	Inputs []InferTensor `json:"inputs"`
	// Outputs optionally names requested outputs (ignored).
	Outputs []json.RawMessage `json:"outputs,omitempty"`
	// Parameters carry slo_ms and min_accuracy.
	Parameters *InferParameters `json:"parameters,omitempty"`
}

var datatypes = map[string]bool{"BOOL": true, "UINT8": true, "UINT16": true, "UINT32": true, "UINT64": true, "INT8": true,
	"INT16": true, "INT32": true, "INT64": true, "FP16": true, "FP32": true, "FP64": true, "BYTES": true, "BF16": true}

// ErrBadRequest marks an infer request the client must fix; the message names the field.
var ErrBadRequest = errors.New("bad request")

// DecodeInferRequest decodes and validates a KServe v2 infer body for task.
// Errors wrap ErrBadRequest and name the field.
func DecodeInferRequest(task string, body []byte, maxDeadline time.Duration) (InferInput, error) {
	bad := func(format string, args ...any) (InferInput, error) {
		return InferInput{}, fmt.Errorf("%w: %s", ErrBadRequest, fmt.Sprintf(format, args...))
	}
	if task == "" || len(task) > wire.MaxIDLen || strings.ContainsAny(task, "/ \t\n") {
		return bad("task: %q is not a valid task name", task)
	}
	if len(body) > MaxInferBody {
		return bad("body: %d bytes exceeds %d", len(body), MaxInferBody)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var req InferRequestBody
	if err := dec.Decode(&req); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te):
			return bad("%s: wrong JSON type %s", te.Field, te.Value)
		case errors.As(err, &se):
			return bad("body: invalid JSON at offset %d: %v", se.Offset, err)
		case errors.Is(err, io.EOF):
			return bad("body: empty")
		}
		return bad("body: %v", err)
	}
	if dec.More() {
		return bad("body: trailing data after the JSON object")
	}
	if len(req.ID) > wire.MaxIDLen {
		return bad("id: %d bytes exceeds %d", len(req.ID), wire.MaxIDLen)
	}
	if len(req.Inputs) == 0 {
		return bad("inputs: at least one input tensor is required")
	}
	for i, in := range req.Inputs {
		if in.Name == "" {
			return bad("inputs[%d].name: empty", i)
		}
		if len(in.Shape) == 0 {
			return bad("inputs[%d].shape: empty", i)
		}
		for j, d := range in.Shape {
			if d < 0 {
				return bad("inputs[%d].shape[%d]: %d is negative", i, j, d)
			}
		}
		if !datatypes[in.Datatype] {
			return bad("inputs[%d].datatype: %q is not a KServe v2 datatype", i, in.Datatype)
		}
		d := bytes.TrimSpace(in.Data)
		if len(d) == 0 || d[0] != '[' {
			return bad("inputs[%d].data: must be a JSON array", i)
		}
	}
	out := InferInput{ID: req.ID, Task: task}
	if p := req.Parameters; p != nil {
		if p.SLOms != nil {
			v := *p.SLOms
			if math.IsNaN(v) || v <= 0 || v > float64(maxDeadline/time.Millisecond) {
				return bad("parameters.slo_ms: %v must be in (0, %d]", v, maxDeadline/time.Millisecond)
			}
			out.SLO = time.Duration(v * float64(time.Millisecond))
		}
		if p.MinAccuracy != nil {
			v := *p.MinAccuracy
			if math.IsNaN(v) || v < 0 || v > 1 {
				return bad("parameters.min_accuracy: %v outside [0,1]", v)
			}
			out.MinAccuracy = v
		}
	}
	return out, nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

type errorBody struct {
	Error string `json:"error"`
	Kind  string `json:"kind"`
}

// statusOf maps an error kind to its HTTP status.
func statusOf(k messages.ErrorKind) int {
	switch k {
	case messages.ErrorKind_ERROR_KIND_BAD_REQUEST:
		return http.StatusBadRequest
	case messages.ErrorKind_ERROR_KIND_OVERLOADED:
		return http.StatusTooManyRequests
	case messages.ErrorKind_ERROR_KIND_UNREACHABLE:
		return http.StatusServiceUnavailable
	case messages.ErrorKind_ERROR_KIND_DEADLINE_EXCEEDED:
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

// Handler returns the node's HTTP API handler.
func (n *Node) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v2/models/{task}/infer", n.handleInfer)
	mux.HandleFunc("GET /v2/health/live", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]bool{"live": true})
	})
	mux.HandleFunc("GET /v2/health/ready", func(w http.ResponseWriter, _ *http.Request) {
		if n.Ready() {
			writeJSON(w, http.StatusOK, map[string]bool{"ready": true})
			return
		}
		writeJSON(w, http.StatusServiceUnavailable, map[string]bool{"ready": false})
	})
	mux.HandleFunc("GET /v2/models", n.handleModels)
	mux.HandleFunc("GET /metrics", n.handleMetrics)
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, n.Status())
	})
	mux.HandleFunc("POST /v1/fault", n.handleFault)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, errorBody{Error: fmt.Sprintf("path: no route for %s %s", r.Method, r.URL.Path), Kind: "bad_request"})
	})
	return mux
}

func (n *Node) handleInfer(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxInferBody+1))
	if err != nil {
		n.metrics.badRequest()
		writeJSON(w, http.StatusBadRequest, errorBody{Error: "body: " + err.Error(), Kind: "bad_request"})
		return
	}
	in, err := DecodeInferRequest(r.PathValue("task"), body, n.cfg.MaxDeadline)
	if err != nil {
		n.metrics.badRequest()
		writeJSON(w, http.StatusBadRequest, errorBody{Error: err.Error(), Kind: "bad_request"})
		return
	}
	if _, ok := n.catalog.TaskIndex(in.Task); !ok {
		n.metrics.badRequest()
		writeJSON(w, http.StatusNotFound, errorBody{Error: fmt.Sprintf("task: %q is not a task of the catalog", in.Task), Kind: "bad_request"})
		return
	}
	rep, lat := n.Infer(r.Context(), in)
	if !rep.Ok {
		writeJSON(w, statusOf(rep.ErrorKind), errorBody{Error: rep.Error, Kind: wire.KindName(rep.ErrorKind)})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": rep.Id, "model_name": in.Task, "model_version": rep.Model,
		"outputs": []map[string]any{{"name": "correct", "shape": []int{1}, "datatype": "BOOL", "data": []bool{rep.Correct}}},
		"parameters": map[string]any{
			"served_by_vertex": rep.ServedByVertex, "served_by_node": rep.ServedByNode, "model": rep.Model,
			"correct": rep.Correct, "accuracy": rep.Accuracy, "latency_ms": float64(lat) / float64(time.Millisecond),
			"service_ms": rep.ServiceMs, "queue_ms": rep.QueueMs, "rtt_ms": rep.RttMs, "batch_size": rep.BatchSize,
		},
	})
}

func (n *Node) handleModels(w http.ResponseWriter, _ *http.Request) {
	hosted := map[string][]string{}
	for _, name := range n.Status().Hosted {
		if i, ok := n.catalog.ModelIndex(name); ok {
			t := n.catalog.Models[i].Task
			hosted[t] = append(hosted[t], name)
		}
	}
	type model struct {
		Name       string   `json:"name"`
		Repository string   `json:"repository"`
		Hosted     []string `json:"hosted_here"`
	}
	out := make([]model, 0, len(n.catalog.Tasks))
	for _, t := range n.catalog.Tasks {
		repo, _ := n.graph.Repository(t)
		h := hosted[t]
		if h == nil {
			h = []string{}
		}
		out = append(out, model{Name: t, Repository: repo, Hosted: h})
	}
	writeJSON(w, http.StatusOK, map[string]any{"models": out})
}

func (n *Node) handleMetrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	n.metrics.write(w, gauges{members: len(n.AliveMembers()), vertex: n.cfg.Vertex, isLeader: n.IsLeader(),
		guardDropped: n.guard.dropped.Load(), guardPanics: n.guard.panicked.Load()})
	if n.inf != nil {
		n.inf.writeMetrics(w)
	}
}

// faultBody is the body of POST /v1/fault.
type faultBody struct {
	// Drop lists peer gossip/Raft addresses (host:port) to cut off; empty heals.
	Drop []string `json:"drop"`
}

func (n *Node) handleFault(w http.ResponseWriter, r *http.Request) {
	if !n.cfg.FaultAPI {
		writeJSON(w, http.StatusNotFound, errorBody{Error: "path: /v1/fault is disabled (fault_api: false)", Kind: "bad_request"})
		return
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	var b faultBody
	if err := dec.Decode(&b); err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: "body: " + err.Error(), Kind: "bad_request"})
		return
	}
	for i, p := range b.Drop {
		if _, _, err := net.SplitHostPort(p); err != nil {
			writeJSON(w, http.StatusBadRequest, errorBody{Error: fmt.Sprintf("drop[%d]: %q: %v", i, p, err), Kind: "bad_request"})
			return
		}
	}
	n.SetDrop(b.Drop)
	n.log.Warn("fault injection: dropping traffic", "peers", b.Drop)
	if b.Drop == nil {
		b.Drop = []string{}
	}
	writeJSON(w, http.StatusOK, b)
}
