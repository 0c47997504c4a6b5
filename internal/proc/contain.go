package proc

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
)

// ContainmentEnv names the environment variable that marks every process of one
// contained run. Processes inherit it through fork, exec, `&` and setsid alike,
// so it finds the descendants that left the process group.
const ContainmentEnv = "KUBEPLUG_CONTAINMENT"

// Containment finds and ends what a plugin, check or hook run leaves behind:
// every process that carries its token in its environment. On Linux the host is
// also made a child subreaper (PR_SET_CHILD_SUBREAPER), so that descendants
// orphaned by the run's exit are re-parented to the host rather than to init,
// and are reaped by Sweep instead of lingering as zombies.
//
// Use: add Env() to the command's environment, start it in its own group
// (Isolate), and call Sweep once it ended (KillGroup first ends its group).
type Containment struct {
	token string
}

// Leftover is a process a run left behind.
type Leftover struct {
	PID int
	// Command is its command line, shortened.
	Command string
}

func (l Leftover) String() string { return fmt.Sprintf("%d (%s)", l.PID, l.Command) }

// NewContainment returns a containment with a fresh token.
func NewContainment() *Containment {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	becomeSubreaper()
	return &Containment{token: hex.EncodeToString(b)}
}

// Env returns the environment entry that marks the run's processes.
func (c *Containment) Env() string { return ContainmentEnv + "=" + c.token }

// Sweep kills every process still carrying the run's token, reaps those that
// became the host's children, and returns what it found (nil when nothing was
// left). It repeats until none is left, as killing a process may orphan more.
func (c *Containment) Sweep() []Leftover {
	var found []Leftover
	seen := map[int]bool{}
	for range 20 {
		pids := marked(ContainmentEnv + "=" + c.token)
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			if !seen[pid] {
				seen[pid] = true
				found = append(found, Leftover{PID: pid, Command: command(pid)})
			}
			kill(pid)
		}
		reap(pids)
	}
	return found
}

// Describe says what a sweep found, for a warning.
func Describe(left []Leftover) string {
	parts := make([]string, len(left))
	for i, l := range left {
		parts[i] = l.String()
	}
	return fmt.Sprintf("%d process(es) left behind and ended: %s", len(left), strings.Join(parts, ", "))
}
