// Package config embeds the CustomResourceDefinitions controller-gen writes
// into crd/ (make generate), so that offline commands (joiner plan, joiner
// simulate) default objects exactly as the API server would. It lives
// beside crd/, not in it: the joiner-crd chart's templates are that
// directory, and Helm refuses any file there but YAML.
package config

import _ "embed"

// NodePools, NodeClaims and EC2NodeClasses are the CRDs' YAML.
var (
	//go:embed crd/karpenter.sh_nodepools.yaml
	NodePools []byte
	//go:embed crd/karpenter.sh_nodeclaims.yaml
	NodeClaims []byte
	//go:embed crd/karpenter.k8s.aws_ec2nodeclasses.yaml
	EC2NodeClasses []byte
)
