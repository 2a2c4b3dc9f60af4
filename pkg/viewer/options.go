package viewer

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Options are what the user chose on the command line; the flags carry
// eks-node-viewer's names and meanings so its users' scripts and habits
// carry over.
type Options struct {
	// Resources get one bar each, in this order (--resources).
	Resources []corev1.ResourceName
	// Selector keeps the nodes (and launching NodeClaims) it matches
	// (--node-selector).
	Selector labels.Selector
	// ExtraLabels are shown as extra columns (--extra-labels).
	ExtraLabels []string
	// Sort orders the nodes (--node-sort).
	Sort Sort
	// DisablePricing hides prices, totals in dollars and the LP bound
	// (--disable-pricing).
	DisablePricing bool
}

// Sort is --node-sort: "creation" or a label key, ascending or descending.
type Sort struct {
	// Key is "creation" or a label key.
	Key        string
	Descending bool
}

// SortCreation sorts by creation time, the default.
const SortCreation = "creation"

// ComputedLabelNodeAge is eks-node-viewer's computed label for --extra-labels
// and --node-sort: how long ago the node was created. Its name is kept so
// users' flags keep working.
const ComputedLabelNodeAge = "eks-node-viewer/node-age"

// ParseResources reads --resources: a comma-separated list of resource
// names such as cpu,memory,pods,nvidia.com/gpu.
func ParseResources(s string) ([]corev1.ResourceName, error) {
	var out []corev1.ResourceName
	seen := map[string]bool{}
	for _, r := range strings.Split(s, ",") {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		if errs := validation.IsQualifiedName(r); len(errs) > 0 {
			return nil, fmt.Errorf("--resources %q: %q is not a resource name (%s); use names such as cpu,memory,pods,nvidia.com/gpu", s, r, strings.Join(errs, "; "))
		}
		if !seen[r] {
			seen[r] = true
			out = append(out, corev1.ResourceName(r))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--resources %q: name at least one resource, such as cpu or cpu,memory", s)
	}
	return out, nil
}

// ParseSelector reads --node-selector, a label selector as kubectl takes it.
func ParseSelector(s string) (labels.Selector, error) {
	sel, err := labels.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("--node-selector %q: %v; use a label selector such as karpenter.sh/nodepool=default or 'karpenter.sh/capacity-type in (spot)'", s, err)
	}
	return sel, nil
}

// ParseExtraLabels reads --extra-labels, a comma-separated list of label keys.
func ParseExtraLabels(s string) ([]string, error) {
	var out []string
	for _, k := range strings.Split(s, ",") {
		k = strings.TrimSpace(k)
		if k == "" {
			continue
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, fmt.Errorf("--extra-labels %q: %q is not a label key (%s); use keys such as topology.kubernetes.io/zone,%s", s, k, strings.Join(errs, "; "), ComputedLabelNodeAge)
		}
		out = append(out, k)
	}
	return out, nil
}

// ParseSort reads --node-sort: "creation" or a label key, optionally
// followed by "=asc" or "=dsc" (eks-node-viewer's spelling); ascending when
// the order is left out.
func ParseSort(s string) (Sort, error) {
	key, order, hasOrder := strings.Cut(strings.TrimSpace(s), "=")
	out := Sort{Key: key}
	if key == "" {
		return Sort{}, fmt.Errorf("--node-sort %q: name what to sort by, such as creation=dsc or karpenter.sh/nodepool=asc", s)
	}
	if key != SortCreation {
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			return Sort{}, fmt.Errorf("--node-sort %q: %q is neither creation nor a label key (%s); use creation=dsc or a label such as karpenter.sh/nodepool=asc", s, key, strings.Join(errs, "; "))
		}
	}
	if hasOrder {
		switch order {
		case "asc":
		case "dsc":
			out.Descending = true
		default:
			return Sort{}, fmt.Errorf("--node-sort %q: the order %q is neither asc nor dsc; use %s=asc or %s=dsc", s, order, key, key)
		}
	}
	return out, nil
}

// sortNodes orders the lines: by creation time or a label's value, then by
// name so equal keys keep a stable order between refreshes.
func sortNodes(nodes []Node, s Sort) {
	sort.SliceStable(nodes, func(i, j int) bool {
		a, b := nodes[i], nodes[j]
		var less, greater bool
		if s.Key == SortCreation || s.Key == ComputedLabelNodeAge {
			less, greater = a.Created.Before(b.Created), b.Created.Before(a.Created)
			if s.Key == ComputedLabelNodeAge {
				// Age sorts opposite to creation: the youngest is the smallest.
				less, greater = greater, less
			}
		} else {
			va, vb := a.Labels[s.Key], b.Labels[s.Key]
			less, greater = va < vb, vb < va
		}
		if s.Descending {
			less, greater = greater, less
		}
		if less != greater {
			return less
		}
		return a.Name < b.Name
	})
}
