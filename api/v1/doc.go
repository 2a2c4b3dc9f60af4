// Package v1 holds the karpenter.sh/v1 API (NodePool and NodeClaim) as Joiner
// serves it. The types are our own; their JSON shape, defaults and validation
// rules match Karpenter v1.14 so that users' manifests apply unchanged.
//
// +kubebuilder:object:generate=true
// +groupName=karpenter.sh
package v1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group of NodePool and NodeClaim.
const Group = "karpenter.sh"

// SchemeGroupVersion is the group version used to register these objects.
var SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: "v1"}

var (
	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds NodePool and NodeClaim to a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &NodePool{}, &NodePoolList{}, &NodeClaim{}, &NodeClaimList{})
	metav1AddToGroupVersion(s)
	return nil
}
