// Package v1beta1 holds the autoscaling.x-k8s.io/v1beta1 API (CapacityBuffer)
// as Joiner serves it. The API belongs to the Kubernetes autoscaling SIG
// (Cluster Autoscaler serves it too); Karpenter v1.14.1 ships the CRD, and
// so does Joiner, with the same schema, so that buffers move between them.
// The Go types are our own: the SIG's module is not served by the module
// proxy this project builds from, and the types are a few fields.
//
// +kubebuilder:object:generate=true
// +groupName=autoscaling.x-k8s.io
package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group of CapacityBuffer.
const Group = "autoscaling.x-k8s.io"

// SchemeGroupVersion is the group version used to register these objects.
var SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: "v1beta1"}

var (
	schemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &CapacityBuffer{}, &CapacityBufferList{})
		metav1.AddToGroupVersion(s, SchemeGroupVersion)
		return nil
	})
	// AddToScheme adds CapacityBuffer to a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)
