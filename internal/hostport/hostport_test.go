package hostport

import "testing"

func TestSplit(t *testing.T) {
	good := map[string]struct {
		host string
		port int
	}{
		"127.0.0.1:0":    {"127.0.0.1", 0},
		"10.0.0.1:7946":  {"10.0.0.1", 7946},
		"[::1]:65535":    {"::1", 65535},
		"localhost:8080": {"localhost", 8080},
	}
	for in, want := range good {
		h, p, err := Split(in)
		if err != nil || h != want.host || p != want.port {
			t.Errorf("Split(%q) = %q, %d, %v; want %q, %d", in, h, p, err, want.host, want.port)
		}
	}
	for _, in := range []string{"", "127.0.0.1", ":7946", "h:-1", "h:65536", "h:x"} {
		if _, _, err := Split(in); err == nil {
			t.Errorf("Split(%q) accepted", in)
		}
	}
}
