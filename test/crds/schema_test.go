package crds

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"
)

// v1141Schemas are the SHA-256 of Karpenter v1.14.1's CRD specs
// (pkg/apis/crds in aws/karpenter-provider-aws at v1.14.1), descriptions
// removed, as compact JSON with sorted keys: everything a client or the API
// server acts on (fields, types, defaults, enums, patterns, CEL rules and
// their messages, printer columns). The descriptions are Joiner's own
// words. The figures were computed from Karpenter's files when this test
// was written; they are facts about that release, not a copy of it.
var v1141Schemas = map[string]string{
	"autoscaling.x-k8s.io_capacitybuffers.yaml": "e7d1cf1fddaeb3730540591f28a41f2571ae7cceec85f3d3dbabfca3827143b5",
	"karpenter.sh_nodeoverlays.yaml":            "2134f5512e96b2873cba1c6e74fdee066ea03e17c12b1b7240e45c58d56b290c",
	"karpenter.k8s.aws_ec2nodeclasses.yaml":     "9c9f116a59ccc79764edf6fe90d2627175f5d1d60cfd7d3fa292ec1544ee4b21",
	"karpenter.sh_nodeclaims.yaml":              "c49e1f679a80011c324a21416fe26fa38025582f3e004c4b596d7d9377392748",
	"karpenter.sh_nodepools.yaml":               "0d27a5be81ab43341d940e576a786c965470404b7903fbc94b8f0855a82f4976",
}

// TestSchemasAreKarpenterV1141s: a cluster that moves between Karpenter
// v1.14.1 and Joiner keeps one schema; a field Joiner adds or drops, a
// default or a validation message it changes, fails here.
func TestSchemasAreKarpenterV1141s(t *testing.T) {
	for file, want := range v1141Schemas {
		t.Run(file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", file))
			if err != nil {
				t.Fatal(err)
			}
			var crd struct {
				Spec any `json:"spec"`
			}
			if err := yaml.Unmarshal(raw, &crd); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(withoutDescriptions(crd.Spec)); err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
			if got := hex.EncodeToString(sum[:]); got != want {
				t.Errorf("%s's schema is not Karpenter v1.14.1's (sha256 %s, want %s): diff it against pkg/apis/crds/%s at v1.14.1, descriptions aside", file, got, want, file)
			}
		})
	}
}

func withoutDescriptions(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if k != "description" {
				out[k] = withoutDescriptions(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = withoutDescriptions(e)
		}
		return out
	}
	return v
}
