// Package boot proves by execution that the rendered node boot files honour the
// node-hook behaviours: each test renders a pool with pkg/render, lays its
// cloud-init or Ignition files over the machine's /etc, /usr and /var (overlay
// mounts in a private mount and pid namespace, as root), and runs what the machine
// would run at first boot — cloud-init's runcmd script, or the units Ignition
// enables — with the real node agent (the test binary acting as kubeplug), a
// stand-in systemctl that runs units' ExecStart lines, and a stand-in kubelet that
// records when it started. Nothing outlives a test: the namespace's init is the
// boot, and the kernel ends every process in the namespace with it.
package boot
