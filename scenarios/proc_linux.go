package scenarios

import "syscall"

// sysProcAttr puts each node in its own process group (a terminal's Ctrl-C
// reaches the runner, which stops the nodes in order) and asks the kernel to
// SIGKILL the node if the runner dies without cleaning up, so no node is
// ever orphaned.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
