package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// joiner viewer refuses bad flags before it connects, naming the flag and
// the fix.
func TestViewerFlagErrors(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: demo, context: {cluster: c, user: u}}]
current-context: demo
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--node-sort", "creation=up"}, []string{"--node-sort", "creation=dsc"}},
		{[]string{"--style", "#fff"}, []string{"--style", "good, ok and bad"}},
		{[]string{"--resources", ""}, []string{"--resources", "cpu,memory"}},
		{[]string{"--node-selector", "a in (b"}, []string{"--node-selector"}},
		{[]string{"--extra-labels", "a b"}, []string{"--extra-labels"}},
		{[]string{"--context", "nope"}, []string{"--context", `"nope"`, "get-contexts"}},
		{[]string{"extra-arg"}, []string{"unknown command"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			root := newRoot()
			root.SetArgs(append([]string{"viewer", "--kubeconfig", kubeconfig}, tc.args...))
			root.SetOut(new(strings.Builder))
			root.SetErr(new(strings.Builder))
			err := root.Execute()
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
