package node

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestConfigValidateNamesFields(t *testing.T) {
	good := DefaultLocalConfig()
	good.Name, good.Vertex = "n1", "cloud"
	if err := good.Validate(); err != nil {
		t.Fatalf("local defaults: %v", err)
	}
	lan := DefaultConfig()
	lan.Vertex = "cloud"
	if err := lan.Validate(); err != nil {
		t.Fatalf("lan defaults: %v", err)
	}
	cases := map[string]func(*Config){
		"name":             func(c *Config) { c.Name = "" },
		"vertex":           func(c *Config) { c.Vertex = "" },
		"join[0]":          func(c *Config) { c.Join = []string{"nohost"} },
		"gpus":             func(c *Config) { c.GPUs = -1 },
		"executor":         func(c *Config) { c.Executor = "cuda" },
		"bind_api":         func(c *Config) { c.BindAPI = "127.0.0.1:99999" },
		"bootstrap_expect": func(c *Config) { c.BootstrapExpect = 0 },
		"secret_key":       func(c *Config) { c.SecretKey = "abcd" },
		"log_level":        func(c *Config) { c.LogLevel = "loud" },
		"profile":          func(c *Config) { c.Profile = "wan" },
		"ack_timeout":      func(c *Config) { c.AckTimeout = 0 },
		"max_batch":        func(c *Config) { c.MaxBatch = 0 },
		"latency_scale":    func(c *Config) { c.LatencyScale = -1 },
		"hosted[1]":        func(c *Config) { c.Hosted = []string{"a", ""} },
		"allocation":       func(c *Config) { c.Allocation = "greedy" },
		"slot":             func(c *Config) { c.Slot = 0 },
		"refresh":          func(c *Config) { c.Refresh = 0 },
	}
	for field, mod := range cases {
		c := good
		mod(&c)
		err := c.Validate()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), field+":") {
			t.Errorf("%s: got %v", field, err)
		}
	}
}

func TestParseConfigYAML(t *testing.T) {
	c, err := ParseConfigYAML([]byte("name: n7\nvertex: dc-0\njoin: [\"10.0.0.1:7946\"]\ngpus: 2\nack_timeout: 250ms\nhosted: [a, b]\n"), DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "n7" || c.Vertex != "dc-0" || c.GPUs != 2 || c.AckTimeout != 250*time.Millisecond || len(c.Hosted) != 2 || c.Join[0] != "10.0.0.1:7946" {
		t.Fatalf("parsed %+v", c)
	}
	if c.BindAPI != DefaultConfig().BindAPI {
		t.Fatal("unset keys must keep the base value")
	}
	if _, err := ParseConfigYAML([]byte("nmae: x\n"), DefaultConfig()); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "nmae") {
		t.Fatalf("unknown key: %v", err)
	}
}

func TestNewRejectsUnknownVertexAndModel(t *testing.T) {
	c := DefaultLocalConfig()
	c.Name, c.Vertex, c.DataDir = "n1", "nowhere", t.TempDir()
	if _, err := New(c); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "vertex") {
		t.Fatalf("unknown vertex: %v", err)
	}
	c.Vertex, c.Hosted = "cloud", []string{"no-such-model"}
	if _, err := New(c); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "hosted[0]") {
		t.Fatalf("unknown model: %v", err)
	}
}

func TestDefaultHosted(t *testing.T) {
	c := DefaultLocalConfig()
	c.Name, c.Vertex, c.DataDir = "n1", "bs-0", t.TempDir()
	n, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	// 4096 MB / 20 tasks = 204.8 MB per task: yolov4-8.09pruned (195 MB) is the most accurate that fits.
	if h := n.Hosted(); len(h) != 20 || !strings.Contains(h[0], "yolov4-8.09pruned") {
		t.Fatalf("hosted %v", h)
	}
	c.Vertex = "cloud"
	n, err = New(c)
	if err != nil {
		t.Fatal(err)
	}
	if h := n.Hosted(); len(h) != 600 || !strings.Contains(h[0], "yolov4-608p") {
		t.Fatalf("repository hosts %d models, first %v", len(h), h[:1])
	}
}

func TestAllocationConfig(t *testing.T) {
	for _, c := range []Config{DefaultConfig(), DefaultLocalConfig()} {
		if c.Allocation != AllocationStatic || c.Slot != time.Minute || c.Refresh != 1 {
			t.Fatalf("defaults: allocation %q slot %v refresh %d", c.Allocation, c.Slot, c.Refresh)
		}
	}
	c, err := ParseConfigYAML([]byte("allocation: infida\nslot: 2s\nrefresh: 3\neta: 10\nalpha: 3\ntypes_seed: 7\nentries_per_task: 0\ncontrol_timeout: 500ms\n"), DefaultLocalConfig())
	if err != nil {
		t.Fatal(err)
	}
	if c.Allocation != AllocationInfida || c.Slot != 2*time.Second || c.Refresh != 3 || c.Eta != 10 || c.Alpha != 3 ||
		c.TypesSeed != 7 || c.EntriesPerTask != 0 || c.ControlTimeout != 500*time.Millisecond {
		t.Fatalf("parsed %+v", c)
	}
	c.Name, c.Vertex, c.DataDir = "n1", "cloud", t.TempDir()
	if err := c.Validate(); err != nil {
		t.Fatalf("infida config: %v", err)
	}
	n, err := New(c)
	if err != nil {
		t.Fatalf("New with infida: %v", err)
	}
	if len(n.Hosted()) != 600 {
		t.Fatalf("infida repository starts with %d models, want its 600 (omega)", len(n.Hosted()))
	}
	// x^v is INFIDA's to decide: a static list alongside is refused.
	c.Hosted = []string{"task-00/yolov4-tiny-288p#0"}
	if _, err := New(c); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "hosted:") {
		t.Fatalf("New with infida and hosted: %v", err)
	}
	c.Hosted = nil
	for field, mut := range map[string]func(*Config){
		"eta:":              func(c *Config) { c.Eta = 0 },
		"alpha:":            func(c *Config) { c.Alpha = -1 },
		"entries_per_task:": func(c *Config) { c.EntriesPerTask = -2 },
		"control_timeout:":  func(c *Config) { c.ControlTimeout = -time.Second },
		"slot:":             func(c *Config) { c.Slot = 10 * time.Millisecond },
	} {
		bad := c
		mut(&bad)
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v", field, err)
		}
	}
	c.Refresh = MaxRefresh + 1
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "refresh:") {
		t.Fatalf("refresh too large: %v", err)
	}
}
