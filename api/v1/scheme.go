package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func metav1AddToGroupVersion(s *runtime.Scheme) { metav1.AddToGroupVersion(s, SchemeGroupVersion) }
