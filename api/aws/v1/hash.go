package v1

import (
	"encoding/json"
	"hash/fnv"
	"strconv"
)

// The EC2NodeClass hash is stamped on the class and on every NodeClaim
// launched from it; a NodeClaim whose stamp differs from its class's, under
// the same hash version, has drifted (NodeClassDrift).
const (
	AnnotationEC2NodeClassHash        = Group + "/ec2nodeclass-hash"
	AnnotationEC2NodeClassHashVersion = Group + "/ec2nodeclass-hash-version"
	// EC2NodeClassHashVersion changes when the hash's inputs change, so
	// stored hashes are re-stamped instead of every node drifting at once.
	EC2NodeClassHashVersion = "v6"
)

// Hash fingerprints the parts of the spec that, changed, make existing
// nodes drift, plus the resolved AMI family. The selector terms, the AMI
// family field and ipPrefixCount are left out: the selectors drift by what
// they resolve to, not by how they are written.
func (in *EC2NodeClass) Hash() string {
	spec := *in.Spec.DeepCopy()
	spec.SubnetSelectorTerms = nil
	spec.SecurityGroupSelectorTerms = nil
	spec.CapacityReservationSelectorTerms = nil
	spec.AMISelectorTerms = nil
	spec.AMIFamily = nil
	spec.IPPrefixCount = nil
	b, _ := json.Marshal(struct {
		Spec      EC2NodeClassSpec
		AMIFamily string
	}{spec, in.AMIFamily()})
	h := fnv.New64a()
	h.Write(b)
	return strconv.FormatUint(h.Sum64(), 10)
}
