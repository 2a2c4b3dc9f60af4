package simulate

import (
	"github.com/joiner-autoscaler/joiner/pkg/manifests"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
)

// classPrint fingerprints what, changed in an EC2NodeClass, drifts the
// nodes launched from it in the controller: its static hash
// (EC2NodeClass.Hash: kubelet, block devices, metadata options, user data,
// tags, role, AMI family) and what its AMI and security group selectors
// resolve to. With no AWS to resolve them, the simulator takes a change
// of the terms for a change of what they resolve to. Subnet selectors are
// left out: Karpenter drifts a node only when its own subnet is no longer
// selected, and a run has no subnets.
func classPrint(c *awsv1.EC2NodeClass) string {
	return c.Hash() + "/" + v1.SetHash(struct {
		AMI []awsv1.AMISelectorTerm
		SG  []awsv1.SecurityGroupSelectorTerm
	}{c.Spec.AMISelectorTerms, c.Spec.SecurityGroupSelectorTerms})
}

// classOf names pool's EC2NodeClass.
func (s *sim) classOf(pool string) string {
	if ref := s.pools[pool].Spec.Template.Spec.NodeClassRef; ref != nil {
		return ref.Name
	}
	return ""
}

// applyClass replaces an EC2NodeClass mid-run: the nodes of the NodePools
// that use it drift if it changed what drifts them.
func (s *sim) applyClass(c *awsv1.EC2NodeClass) {
	s.classes[c.Name] = c
	s.classPrints[c.Name] = classPrint(c)
	for _, pool := range sortedKeys(s.pools) {
		if s.classOf(pool) == c.Name {
			s.markDrift(pool)
		}
	}
}

// refreshTypes works the pools' types out again after a NodePool or an
// EC2NodeClass was applied, as the manifests' snapshot does at the start:
// the catalog's types as each pool's class's nodes report them, with the
// NodeOverlays. The trace's validation refused what would leave a pool
// without types.
func (s *sim) refreshTypes() {
	objs := &manifests.Objects{NodeOverlays: s.cfg.Objects.NodeOverlays}
	for _, name := range sortedKeys(s.pools) {
		objs.NodePools = append(objs.NodePools, s.pools[name])
	}
	for _, name := range sortedKeys(s.classes) {
		objs.EC2NodeClasses = append(objs.EC2NodeClasses, s.classes[name])
	}
	snap, _ := objs.Snapshot(s.cfg.InstanceTypes)
	for _, p := range snap.NodePools {
		s.poolTypes[p.NodePool.Name] = p.InstanceTypes
	}
	s.typesGen++
	s.free = nil
	s.noteCanSave()
}
