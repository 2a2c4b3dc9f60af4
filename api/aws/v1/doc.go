// Package v1 holds the karpenter.k8s.aws/v1 API (EC2NodeClass) as Joiner
// serves it: our own types with the JSON shape, defaults and validation rules
// of Karpenter's AWS provider v1.14, so that users' manifests apply unchanged.
//
// +kubebuilder:object:generate=true
// +groupName=karpenter.k8s.aws
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group of EC2NodeClass.
const Group = "karpenter.k8s.aws"

// SchemeGroupVersion is the group version used to register these objects.
var SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: "v1"}

var (
	schemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &EC2NodeClass{}, &EC2NodeClassList{})
		metav1.AddToGroupVersion(s, SchemeGroupVersion)
		return nil
	})
	// AddToScheme adds EC2NodeClass to a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)
