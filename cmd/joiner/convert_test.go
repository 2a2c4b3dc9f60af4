package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
	"github.com/joiner-autoscaler/joiner/pkg/convert"
)

const seed = "../../test/testdata/seed-manifests/05-legacy-v1alpha5.yaml"

// run runs the joiner command line as a user would, with stdin.
func run(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetArgs(args)
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errOut)
	err = root.Execute()
	return out.String(), errOut.String(), err
}

func TestConvertCommand(t *testing.T) {
	seedText, err := os.ReadFile(seed)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		stdin      string
		args       []string
		wantErr    string
		wantStdout []string
		wantStderr []string
		noStdout   bool
	}{
		{name: "the seed with --role converts; notes go to stderr",
			args:       []string{"convert", "-f", seed, "--role", "KarpenterNodeRole-demo"},
			wantStdout: []string{"apiVersion: karpenter.sh/v1\nkind: NodePool", "---\napiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass", "role: KarpenterNodeRole-demo"},
			wantStderr: []string{"note: Provisioner/default: spec.requirements[1]: values c,t,m are instance categories"}},
		{name: "without --role the instance profile is unmappable and the command fails",
			args:       []string{"convert", "-f", seed},
			wantErr:    "1 field(s) cannot be mapped to v1",
			wantStderr: []string{"unmappable: AWSNodeTemplate/default: spec.instanceProfile: missing", "--role NODE_ROLE", "--instance-profile NAME"},
			noStdout:   true},
		{name: "--ignore-unmappable makes it a warning and drops the field",
			args:       []string{"convert", "-f", seed, "--ignore-unmappable"},
			wantStdout: []string{"kind: EC2NodeClass"},
			wantStderr: []string{"warning: dropped: AWSNodeTemplate/default: spec.instanceProfile"}},
		{name: "- reads standard input",
			stdin:      string(seedText),
			args:       []string{"convert", "-f", "-", "--instance-profile", "KarpenterNodeInstanceProfile-demo"},
			wantStdout: []string{"instanceProfile: KarpenterNodeInstanceProfile-demo"}},
		{name: "an unknown --ami-family is an error naming the families",
			args:    []string{"convert", "-f", seed, "--ami-family", "Ubuntu"},
			wantErr: `--ami-family "Ubuntu": use one of AL2, AL2023, Bottlerocket`},
		{name: "no file is an error naming the flag",
			args:    []string{"convert"},
			wantErr: "pass -f FILE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, err := run(t, tc.stdin, tc.args...)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("error %v; stderr:\n%s", err, stderr)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			for _, w := range tc.wantStdout {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout)
				}
			}
			for _, w := range tc.wantStderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if tc.noStdout && stdout != "" {
				t.Errorf("stdout should be empty on failure, got:\n%s", stdout)
			}
		})
	}
}

// TestConvertThenPlan pipes convert's output of the legacy seed, with a
// Deployment, into plan: the converted NodePool must plan nodes the
// Provisioner meant (on-demand, categories c/t/m, the seed's Seoul zones).
func TestConvertThenPlan(t *testing.T) {
	const deployment = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: inflate}
spec:
  replicas: 5
  selector: {matchLabels: {app: inflate}}
  template:
    metadata: {labels: {app: inflate}}
    spec: {containers: [{name: c, image: pause, resources: {requests: {cpu: "1", memory: 1Gi}}}]}
`
	seedText, err := os.ReadFile(seed)
	if err != nil {
		t.Fatal(err)
	}
	converted, stderr, err := run(t, string(seedText)+"\n---"+deployment, "convert", "-f", "-", "--role", "KarpenterNodeRole-demo")
	if err != nil {
		t.Fatalf("convert: %v\n%s", err, stderr)
	}
	// plan reads the process's standard input, so the pipe is a file here.
	file := filepath.Join(t.TempDir(), "converted.yaml")
	if err := os.WriteFile(file, []byte(converted), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, "", "plan", "-f", file, "--region", "ap-northeast-2", "-o", "json")
	if err != nil {
		t.Fatalf("plan of the converted manifests: %v\n%s", err, converted)
	}
	var doc Document
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(doc.UnschedulablePods) > 0 || len(doc.NodeClaims) == 0 {
		t.Fatalf("plan: %d NodeClaims, unschedulable %v", len(doc.NodeClaims), doc.UnschedulablePods)
	}
	pods := 0
	for _, nc := range doc.NodeClaims {
		rec, ok := catalog.Lookup(nc.InstanceType)
		cat := rec.Labels["karpenter.k8s.aws/instance-category"]
		if !ok || (cat != "c" && cat != "t" && cat != "m") || nc.CapacityType != "on-demand" || rec.Labels["kubernetes.io/arch"] != "amd64" ||
			!strings.HasPrefix(nc.Zone, "ap-northeast-2") || nc.NodePool != "default" {
			t.Errorf("NodeClaim %+v (category %q): want an on-demand amd64 c/t/m node of NodePool default in ap-northeast-2", nc, cat)
		}
		pods += nc.Pods
	}
	if pods != 5 {
		t.Errorf("%d pods planned, want 5", pods)
	}
	// The same output decodes as the package wrote it: nothing lost on the way.
	objs, err := convert.Decode("converted", strings.NewReader(converted))
	if err != nil || len(objs) != 3 {
		t.Fatalf("converted output: %d objects, %v", len(objs), err)
	}
}
