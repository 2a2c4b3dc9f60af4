// Package tags names the AWS tags Joiner puts on what it creates, as
// Karpenter names them, so that IAM policies, cost reports and tools
// written for Karpenter keep working; and it turns tag maps into the SDK's
// lists in key order, so equal tags make equal requests.
package tags

import (
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

const (
	NodePool  = "karpenter.sh/nodepool"
	NodeClaim = "karpenter.sh/nodeclaim"
	NodeClass = "karpenter.k8s.aws/ec2nodeclass"
	// ManagedBy marks IAM resources Joiner created for a cluster.
	ManagedBy      = "karpenter.sh/managed-by"
	EKSClusterName = "eks:eks-cluster-name"
	Region         = "topology.kubernetes.io/region"
	Name           = "Name"
	// ClusterPrefix + the cluster's name, with the value "owned".
	ClusterPrefix = "kubernetes.io/cluster/"
	// LaunchToken is Joiner's own: the client token of the fleet call that
	// launched the instance. While a call's outcome is unknown its
	// instances have no NodeClaim yet, and garbage collection tells them
	// by it (instance.UnsettledTTL).
	LaunchToken = "joiner.sh/launch-token"
)

// Cluster is the tag key that says a resource belongs to the cluster.
func Cluster(clusterName string) string { return ClusterPrefix + clusterName }

// SortedKeys are m's keys in order.
func SortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// EC2 is m as EC2 tags, in key order.
func EC2(m map[string]string) []ec2types.Tag {
	out := make([]ec2types.Tag, 0, len(m))
	for _, k := range SortedKeys(m) {
		out = append(out, ec2types.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return out
}
