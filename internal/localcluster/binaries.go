package localcluster

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Binaries are the paths of the control-plane programs, of helm for the
// chart's tests, and of the IAM evaluator's node_modules for fake-aws
// --iam-enforce.
type Binaries struct {
	Etcd, APIServer, ControllerManager, Scheduler, Kubectl, Kwok, Helm, IAMSim string
	// KwokStages are the node stages kwok plays (hack/build-controlplane.sh).
	KwokStages string
}

// EnsureBinaries runs hack/setup.sh, which installs etcd and builds the
// Kubernetes and kwok binaries on first use and is instant afterwards.
func EnsureBinaries(ctx context.Context, root string) (Binaries, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "hack", "setup.sh"))
	cmd.Dir = root
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if os.Getenv("JOINER_SETUP_VERBOSE") != "" {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Run(); err != nil {
		return Binaries{}, fmt.Errorf("hack/setup.sh failed: %w\n%s", err, stderr.String())
	}
	paths := map[string]string{}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			paths[k] = v
		}
	}
	b := Binaries{
		Etcd: paths["etcd"], APIServer: paths["kube-apiserver"], ControllerManager: paths["kube-controller-manager"],
		Scheduler: paths["kube-scheduler"], Kubectl: paths["kubectl"], Kwok: paths["kwok"], Helm: paths["helm"], IAMSim: paths["iamsim"],
		KwokStages: paths["kwok-stages"],
	}
	for name, p := range map[string]string{"etcd": b.Etcd, "kube-apiserver": b.APIServer, "kube-controller-manager": b.ControllerManager, "kube-scheduler": b.Scheduler, "kubectl": b.Kubectl, "kwok": b.Kwok, "kwok-stages": b.KwokStages, "helm": b.Helm, "iamsim": b.IAMSim} {
		if _, err := os.Stat(p); err != nil {
			return Binaries{}, fmt.Errorf("hack/setup.sh did not provide %s (%q)", name, p)
		}
	}
	return b, nil
}
