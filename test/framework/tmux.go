package framework

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Tmux is one tmux server of the test's own (its own socket), so nothing
// else on the machine shares or sees it: a real terminal for the viewer.
type Tmux struct {
	t      *testing.T
	Socket string
}

// StartTmux runs command in a detached session named "viewer" of width
// by height, with env (NAME=value) set for it; the server is killed when
// the test ends.
func StartTmux(t *testing.T, width, height int, env []string, command ...string) *Tmux {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatalf("tmux is needed (hack/setup.sh installs it from Debian's packages): %v", err)
	}
	tm := &Tmux{t: t, Socket: filepath.Join(t.TempDir(), "tmux.sock")}
	args := []string{"new-session", "-d", "-s", "viewer", "-x", strconv.Itoa(width), "-y", strconv.Itoa(height), "-e", "TERM=xterm-256color"}
	for _, e := range env {
		args = append(args, "-e", e)
	}
	tm.Run(append(append(args, "--"), command...)...)
	t.Cleanup(func() { _ = exec.Command("tmux", "-S", tm.Socket, "kill-server").Run() })
	return tm
}

// Run runs a tmux command against the test's server.
func (tm *Tmux) Run(args ...string) string {
	tm.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", tm.Socket}, args...)...).CombinedOutput()
	if err != nil {
		tm.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Screen is the pane's text as the user sees it.
func (tm *Tmux) Screen() string { return tm.Run("capture-pane", "-p", "-t", "viewer") }

// WaitFor polls the screen until cond holds, and returns that screen.
func (tm *Tmux) WaitFor(timeout time.Duration, what string, cond func(string) bool) string {
	tm.t.Helper()
	var last string
	Eventually(tm.t, timeout, what, func() (bool, string) {
		last = tm.Screen()
		return cond(last), "\n" + last
	})
	return last
}
