package convert

import (
	"encoding/json"
	"strings"
	"testing"
)

func matchFindings(t *testing.T, what string, got []Finding, want []string, exhaustive bool) {
	t.Helper()
	var lines []string
	for _, f := range got {
		lines = append(lines, f.String())
	}
	for _, w := range want {
		found := false
		for _, l := range lines {
			found = found || strings.Contains(l, w)
		}
		if !found {
			t.Errorf("no %s contains %q; %ss:\n%s", what, w, what, strings.Join(lines, "\n"))
		}
	}
	if exhaustive && len(want) == 0 && len(lines) > 0 {
		t.Errorf("unexpected %ss:\n%s", what, strings.Join(lines, "\n"))
	}
}

func lookup(obj Object, path string) (any, bool) {
	var cur any = obj
	if obj == nil {
		return nil, false
	}
	for _, p := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[p]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// normalize makes YAML-decoded numbers compare with JSON-decoded ones.
func normalize(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

func dump(objs []Object) string {
	var b strings.Builder
	_ = Encode(&b, objs)
	return b.String()
}

func provisioner(spec string) string {
	return `
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: default}
spec:
  providerRef: {name: default}
` + indent(spec, "  ") + "---" + template
}

func nodeTemplate(spec string) string {
	return `
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata: {name: default}
spec:
` + indent(spec, "  ")
}

func indent(s, by string) string {
	var out []string
	for _, l := range strings.Split(strings.Trim(s, "\n"), "\n") {
		if l != "" {
			out = append(out, by+l)
		}
	}
	if len(out) == 0 {
		return ""
	}
	return strings.Join(out, "\n") + "\n"
}
