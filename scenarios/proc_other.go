//go:build !linux

package scenarios

import "syscall"

// sysProcAttr puts each node in its own process group so that a terminal's
// Ctrl-C reaches only the runner, which stops the nodes in order.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
