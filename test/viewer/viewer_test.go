// Package viewer runs `joiner viewer` in a real terminal (tmux) against the
// package's local control plane, with Joiner's kwok provider making nodes.
package viewer

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/test/framework"
)

func TestMain(m *testing.M) { os.Exit(framework.Main(m)) }

var nodesLine = regexp.MustCompile(`(?m)^(\d+) nodes?\b`)

// nodes is the node count in the header, -1 before the first snapshot.
func nodes(screen string) int {
	m := nodesLine.FindStringSubmatch(screen)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// The viewer shows the cluster live: nodes Joiner launches for a scaled-up
// Deployment appear on the running viewer, priced from the catalog, with
// their pods, and the keys switch to the pending pods and the disruption
// status.
func TestViewerFollowsScaleUp(t *testing.T) {
	framework.StartJoiner(t)
	t.Cleanup(func() { framework.ResetCluster(t) })
	framework.Kubectl(t, framework.PoolAndClass, "apply", "-f", "-")
	framework.Kubectl(t, framework.Deployment("inflate", 0, "1", "1536Mi", ""), "apply", "-f", "-")

	tm := framework.StartTmux(t, 200, 40, nil, framework.Binary, "viewer", "--kubeconfig", framework.Cluster.Kubeconfig, "--resources", "cpu,memory",
		"--extra-labels", "eks-node-viewer/node-age")
	tm.WaitFor(time.Minute, "the viewer's first screen with 0 nodes", func(s string) bool { return nodes(s) == 0 })

	framework.Kubectl(t, "", "scale", "deployment/inflate", "--replicas", "6")
	screen := tm.WaitFor(2*time.Minute, "the new nodes, Ready, with the 6 pods, on the same viewer", func(s string) bool {
		return nodes(s) > 0 && strings.Contains(s, "0 pending pods") && !strings.Contains(s, "Launching") && podsShown(s) == 6
	})
	t.Logf("screen after the scale-up:\n%s", screen)
	for _, want := range []string{"/hour | $", "/month", "prices: kwok nodes: embedded catalog", "LP lower bound of their 6 pods", "default", "on-demand", "memory"} {
		if !strings.Contains(screen, want) {
			t.Errorf("screen lacks %q", want)
		}
	}
	// Each node's price is the catalog's: the kwok provider's own offering.
	claims := framework.NodeClaims(t)
	if got := nodes(screen); got != len(claims) {
		t.Errorf("screen shows %d nodes, the cluster has %d NodeClaims", got, len(claims))
	}
	for _, nc := range claims {
		if !strings.Contains(screen, nc.Status.NodeName) || !strings.Contains(screen, nc.Labels["node.kubernetes.io/instance-type"]) {
			t.Errorf("screen lacks node %s (%s)", nc.Status.NodeName, nc.Labels["node.kubernetes.io/instance-type"])
		}
	}

	tm.Run("send-keys", "-t", "viewer", "d")
	screen = tm.WaitFor(30*time.Second, "the disruption status lines", func(s string) bool {
		return strings.Contains(s, "└ expires in") || strings.Contains(s, "└ no disruption") || strings.Contains(s, "└ consolidatable")
	})

	t.Logf("disruption status (d):\n%s", screen)

	// No instance type has 500 cpus: Joiner says so on the pod.
	framework.Kubectl(t, framework.Deployment("huge", 1, "500", "1Gi", ""), "apply", "-f", "-")
	tm.Run("send-keys", "-t", "viewer", "p")
	screen = tm.WaitFor(time.Minute, "a pending pod with Joiner's reason", func(s string) bool {
		return strings.Contains(s, "PENDING POD") && strings.Contains(s, "Failed to schedule pod")
	})
	t.Logf("pending view:\n%s", screen)

	tm.Run("send-keys", "-t", "viewer", "q")
	framework.Eventually(t, 30*time.Second, "the viewer to quit on q", func() (bool, string) {
		out, err := exec.Command("tmux", "-S", tm.Socket, "list-panes", "-t", "viewer", "-F", "#{pane_dead} #{pane_current_command}").CombinedOutput()
		return err != nil || !strings.Contains(string(out), "joiner"), string(out)
	})
}

var podsCell = regexp.MustCompile(`\s{2}(\d+) pods?\s{2}`)

// podsShown adds up the node lines' pod counts.
func podsShown(screen string) int {
	total := 0
	for _, m := range podsCell.FindAllStringSubmatch(screen, -1) {
		n, _ := strconv.Atoi(m[1])
		total += n
	}
	return total
}
