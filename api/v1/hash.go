package v1

import (
	"encoding/json"
	"hash/fnv"
	"strconv"
)

// NodePoolHashVersion changes when the hash's inputs change, so that stored
// hashes are re-stamped instead of every node drifting at once.
const NodePoolHashVersion = "v3"

// Hash fingerprints the parts of the template that, when changed, make
// existing nodes drift: metadata, taints, startup taints, the NodeClass
// reference, expireAfter and terminationGracePeriod. Requirements are left
// out; drift on them is judged by compatibility, not by equality.
func (in *NodePool) Hash() string {
	t := in.Spec.Template
	b, _ := json.Marshal(struct {
		Labels, Annotations    map[string]string
		Taints, StartupTaints  any
		NodeClassRef           *NodeClassReference
		ExpireAfter            string
		TerminationGracePeriod any
	}{t.Labels, t.Annotations, t.Spec.Taints, t.Spec.StartupTaints, t.Spec.NodeClassRef, t.Spec.ExpireAfter.String(), t.Spec.TerminationGracePeriod})
	h := fnv.New64a()
	h.Write(b)
	return strconv.FormatUint(h.Sum64(), 10)
}
