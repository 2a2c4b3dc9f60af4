package scheduling

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Namespaces. A pod affinity term may select the namespaces whose pods it
// counts by their labels, so a plan knows every namespace's labels.

// termNamespaces resolves the namespaces an affinity term applies to, as
// kube-scheduler does: the listed namespaces, and those whose labels the
// namespaceSelector matches; the pod's own when there is neither. An empty
// namespaceSelector means all namespaces (nil).
func (s *solver) termNamespaces(podNamespace string, term corev1.PodAffinityTerm) map[string]struct{} {
	out := map[string]struct{}{}
	for _, n := range term.Namespaces {
		out[n] = struct{}{}
	}
	if term.NamespaceSelector == nil {
		if len(out) == 0 {
			out[podNamespace] = struct{}{}
		}
		return out
	}
	sel, err := metav1.LabelSelectorAsSelector(term.NamespaceSelector)
	if err != nil {
		return out // the API server rejects such a pod; match the listed ones only
	}
	if sel.Empty() {
		return nil
	}
	for name, l := range s.namespaces {
		if sel.Matches(l) {
			out[name] = struct{}{}
		}
	}
	return out
}

// buildNamespaces records every namespace's labels: those the snapshot
// lists, and the namespaces of its pods. buildExisting adds those of the
// nodes' pods. Every namespace carries kubernetes.io/metadata.name, which
// the API server sets.
func (s *solver) buildNamespaces(snap Snapshot) {
	s.namespaces = map[string]labels.Set{}
	for name, l := range snap.Namespaces {
		s.addNamespace(name, l)
	}
	for _, p := range snap.Pods {
		s.addNamespace(p.Namespace, nil)
	}
}

func (s *solver) addNamespace(name string, l map[string]string) {
	set, ok := s.namespaces[name]
	if !ok {
		set = labels.Set{corev1.LabelMetadataName: name}
		s.namespaces[name] = set
	}
	for k, v := range l {
		set[k] = v
	}
}
