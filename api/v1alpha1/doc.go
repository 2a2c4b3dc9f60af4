// Package v1alpha1 holds the karpenter.sh/v1alpha1 API (NodeOverlay) as
// Joiner serves it. The types are our own; their JSON shape and validation
// rules match Karpenter v1.14.1's, so that overlays written for Karpenter
// apply unchanged and a cluster moving between the two keeps one schema.
//
// +kubebuilder:object:generate=true
// +groupName=karpenter.sh
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group of NodeOverlay, shared with NodePool and NodeClaim.
const Group = "karpenter.sh"

// SchemeGroupVersion is the group version used to register these objects.
var SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: "v1alpha1"}

var (
	schemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &NodeOverlay{}, &NodeOverlayList{})
		metav1.AddToGroupVersion(s, SchemeGroupVersion)
		return nil
	})
	// AddToScheme adds NodeOverlay to a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)
