// Package hostport parses the "host:port" listen and advertise addresses of
// the gossip and consensus configs, with errors that a Validate method can
// attach to a field name.
package hostport

import (
	"errors"
	"fmt"
	"net"
	"strconv"
)

// Split parses s as host:port with a non-empty host and a port in 0..65535
// (0 means "any free port"). The error text is written to follow a field
// name, as in "BindAddr: must be host:port, got empty".
func Split(s string) (string, int, error) {
	if s == "" {
		return "", 0, errors.New("must be host:port, got empty")
	}
	h, p, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, fmt.Errorf("must be host:port: %v", err)
	}
	if h == "" {
		return "", 0, fmt.Errorf("missing host in %q", s)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q", p)
	}
	return h, port, nil
}
