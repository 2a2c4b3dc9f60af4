package framework

import "testing"

func TestResourceOf(t *testing.T) {
	for _, tc := range []struct{ path, resource, sub, name, ns string }{
		{"/api/v1/nodes/ip-10-0-1-2.ec2.internal", "nodes", "", "ip-10-0-1-2.ec2.internal", ""},
		{"/api/v1/nodes/n1/status", "nodes", "status", "n1", ""},
		{"/apis/karpenter.sh/v1/nodeclaims/default-abc/status", "nodeclaims", "status", "default-abc", ""},
		{"/apis/karpenter.sh/v1/nodeclaims", "nodeclaims", "", "", ""},
		{"/api/v1/namespaces/default/pods/web-0/eviction", "pods", "eviction", "web-0", "default"},
		{"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/joiner", "leases", "", "joiner", "kube-system"},
		{"/healthz", "", "", "", ""},
		{"/api/v1/namespaces/web", "namespaces", "", "web", ""},
	} {
		resource, sub := resourceOf(tc.path)
		if resource != tc.resource || sub != tc.sub || nameOf(tc.path) != tc.name || namespaceOf(tc.path) != tc.ns {
			t.Errorf("%s: %q %q %q in %q, want %q %q %q in %q", tc.path, resource, sub, nameOf(tc.path), namespaceOf(tc.path), tc.resource, tc.sub, tc.name, tc.ns)
		}
	}
}
