package proc

import "syscall"

// setPdeathsig kills the plugin if the host thread that started it dies, so a
// crashed host leaves no plugin behind. (The signal follows the thread, not the
// process; Go keeps threads alive, so this is a safety net, not the mechanism.)
func setPdeathsig(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
