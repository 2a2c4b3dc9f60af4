// Package crd holds the CustomResourceDefinitions controller-gen writes
// (make generate), embedded so that offline commands (joiner plan, joiner
// simulate) default objects exactly as the API server would.
package crd

import _ "embed"

// NodePools, NodeClaims and EC2NodeClasses are the CRDs' YAML.
var (
	//go:embed karpenter.sh_nodepools.yaml
	NodePools []byte
	//go:embed karpenter.sh_nodeclaims.yaml
	NodeClaims []byte
	//go:embed karpenter.k8s.aws_ec2nodeclasses.yaml
	EC2NodeClasses []byte
)
