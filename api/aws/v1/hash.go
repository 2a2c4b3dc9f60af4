package v1

import (
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
)

// The EC2NodeClass hash is stamped on the class and on every NodeClaim
// launched from it; a NodeClaim stamped under the current hash version with
// a hash other than its class's current one has drifted (NodeClassDrift).
const (
	AnnotationEC2NodeClassHash        = Group + "/ec2nodeclass-hash"
	AnnotationEC2NodeClassHashVersion = Group + "/ec2nodeclass-hash-version"
	// EC2NodeClassHashVersion names how Hash is computed. It is ours, not of
	// Karpenter's "vN" form (Karpenter stamps "v6" with a hash computed
	// differently), so no Karpenter version can ever equal it: a NodeClaim
	// stamped under another version is re-stamped, not drifted, and a
	// migration from Karpenter does not replace the fleet. Change it whenever
	// the hash's inputs or encoding change.
	EC2NodeClassHashVersion = "joiner-1"
	// ReasonNodeClassDrift is the Drifted reason of a NodeClaim whose
	// EC2NodeClass hash no longer matches its class.
	ReasonNodeClassDrift = "NodeClassDrift"
)

// Hash fingerprints the parts of the spec that, changed, make existing
// nodes drift, plus the resolved AMI family. The selector terms, the AMI
// family field and ipPrefixCount are left out: the selectors drift by what
// they resolve to, not by how they are written. Lists are sets (reordering
// block device mappings is not drift), as Karpenter hashes them.
func (in *EC2NodeClass) Hash() string {
	spec := *in.Spec.DeepCopy()
	spec.SubnetSelectorTerms = nil
	spec.SecurityGroupSelectorTerms = nil
	spec.CapacityReservationSelectorTerms = nil
	spec.AMISelectorTerms = nil
	spec.AMIFamily = nil
	spec.IPPrefixCount = nil
	return v1.SetHash(struct {
		Spec      EC2NodeClassSpec
		AMIFamily string
	}{spec, in.AMIFamily()})
}

// HashDrifted reports whether a NodeClaim launched from the class no longer
// matches its spec. A NodeClaim without a stamp, or stamped under another
// hash version (launched by Karpenter, or by an older Joiner), is not
// comparable and is not drift: the NodeClaim disruption controller
// re-stamps it. The class's hash is computed, not read from its annotation,
// which lags a spec change by a reconcile and would meanwhile drift the
// NodeClaims launched from the new spec.
func HashDrifted(class *EC2NodeClass, nodeClaim *v1.NodeClaim) bool {
	stamped := nodeClaim.Annotations[AnnotationEC2NodeClassHash]
	if stamped == "" || nodeClaim.Annotations[AnnotationEC2NodeClassHashVersion] != EC2NodeClassHashVersion {
		return false
	}
	return stamped != class.Hash()
}
