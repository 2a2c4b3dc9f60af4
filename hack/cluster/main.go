// Command cluster starts, stops and describes the persistent local control
// plane the demo runs on. Its state lives in .cache/cluster.
//
//	go run ./hack/cluster up     # start (or reuse) and print the kubeconfig path
//	go run ./hack/cluster down   # stop and remove etcd's data
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/joiner-autoscaler/joiner/internal/localcluster"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	if len(os.Args) != 2 || (os.Args[1] != "up" && os.Args[1] != "down") {
		fmt.Fprintln(os.Stderr, "usage: go run ./hack/cluster up|down")
		os.Exit(2)
	}
	root, err := localcluster.FindRoot()
	if err != nil {
		fail(err)
	}
	dir := filepath.Join(root, ".cache", "cluster")
	switch os.Args[1] {
	case "up":
		kubeconfig, err := up(root, dir)
		if err != nil {
			fail(err)
		}
		fmt.Println(kubeconfig)
	case "down":
		if err := localcluster.StopDir(dir); err != nil {
			fail(err)
		}
		fmt.Fprintln(os.Stderr, "local control plane stopped")
	}
}

func up(root, dir string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if running(ctx, kubeconfig) {
		fmt.Fprintln(os.Stderr, "reusing the running local control plane; updating CRDs")
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return "", err
		}
		return kubeconfig, localcluster.InstallCRDs(ctx, cfg, filepath.Join(root, "config", "crd"))
	}
	_ = localcluster.StopDir(dir) // leftovers of a crashed run
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	c, err := localcluster.Start(ctx, localcluster.Options{
		Dir: dir, Root: root, Persistent: true,
		Progress: func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) },
	})
	if err != nil {
		return "", err
	}
	if err := c.Persist(); err != nil {
		return "", err
	}
	return c.Kubeconfig, nil
}

func running(ctx context.Context, kubeconfig string) bool {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return false
	}
	cfg.Timeout = 3 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return false
	}
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err == nil && string(body) == "ok"
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "error:", err)
	os.Exit(1)
}
