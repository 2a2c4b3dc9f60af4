package kwok

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestGetListDelete(t *testing.T) {
	kube := kubeClient(t)
	ctx := context.Background()
	p := newProvider(t, kube, Options{})

	launch := func(t *testing.T, prefix string) *v1.NodeClaim {
		t.Helper()
		nc := newNodeClaim(uniqueName(prefix), req(itKey, in, "c5a.large"), req(ctKey, in, v1.CapacityTypeOnDemand))
		cleanupNode(t, kube, nc.Name)
		got, err := p.Create(ctx, nc)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	listed := func(t *testing.T) map[string]*v1.NodeClaim {
		t.Helper()
		all, err := p.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*v1.NodeClaim{}
		for _, nc := range all {
			out[nc.Status.ProviderID] = nc
		}
		return out
	}
	a, b := launch(t, "gld-a"), launch(t, "gld-b")
	it := catalogType(t, "c5a.large")

	// A Node kwok runs but this provider did not launch is not an instance.
	other := uniqueName("other")
	cleanupNode(t, kube, other)
	if err := kube.Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: other, Annotations: map[string]string{AnnotationKwokNode: "fake"}},
		Spec:       corev1.NodeSpec{ProviderID: ProviderID("us-east-1", "us-east-1a", other)},
	}); err != nil {
		t.Fatal(err)
	}

	// A page of one Node: List must follow every page, not only the first.
	for _, page := range []int64{listPage, 1} {
		t.Run(fmt.Sprintf("List in pages of %d", page), func(t *testing.T) {
			defer func(was int64) { listPage = was }(listPage)
			listPage = page
			listEntries(t, listed(t), it, other, a, b)
		})
	}

	t.Run("Get", func(t *testing.T) {
		got, err := p.Get(ctx, a.Status.ProviderID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.ProviderID != a.Status.ProviderID || got.Labels[itKey] != "c5a.large" || !resourcesEqual(got.Status.Allocatable, it.Allocatable) {
			t.Errorf("Get = %+v", got)
		}
		for _, tt := range []struct {
			name, providerID string
			notFound         bool
		}{
			{"unknown name", ProviderID("us-east-1", "us-east-1a", "no-such-node"), true},
			{"known name in another zone", ProviderID("us-east-1", "us-east-1c", a.Name), a.Labels[zoneKey] != "us-east-1c"},
			{"Node not launched by us", ProviderID("us-east-1", "us-east-1a", other), true},
			{"another cloud's ID", "aws:///us-east-1a/i-0123456789", false},
		} {
			_, err := p.Get(ctx, tt.providerID)
			if got := cloudprovider.IsNodeClaimNotFound(err); got != tt.notFound || err == nil {
				t.Errorf("%s: Get(%q) = %v, want not-found=%v", tt.name, tt.providerID, err, tt.notFound)
			}
		}
	})

	t.Run("Delete by provider ID", func(t *testing.T) {
		if err := p.Delete(ctx, a); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		eventually(t, 10*time.Second, "the Node to go", func() bool { return !nodeExists(t, kube, a.Name) })
		if _, err := p.Get(ctx, a.Status.ProviderID); !cloudprovider.IsNodeClaimNotFound(err) {
			t.Errorf("Get after Delete = %v, want NodeClaimNotFoundError", err)
		}
		if err := p.Delete(ctx, a); !cloudprovider.IsNodeClaimNotFound(err) {
			t.Errorf("second Delete = %v, want NodeClaimNotFoundError", err)
		}
		if _, ok := listed(t)[a.Status.ProviderID]; ok {
			t.Error("List still reports the deleted instance")
		}
		if _, ok := listed(t)[b.Status.ProviderID]; !ok {
			t.Error("List lost the instance that was not deleted")
		}
	})

	t.Run("Delete by name when the launch never returned", func(t *testing.T) {
		unlaunched := newNodeClaim(b.Name)
		if err := p.Delete(ctx, unlaunched); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		eventually(t, 10*time.Second, "the Node to go", func() bool { return !nodeExists(t, kube, b.Name) })
		if err := p.Delete(ctx, unlaunched); !cloudprovider.IsNodeClaimNotFound(err) {
			t.Errorf("second Delete = %v, want NodeClaimNotFoundError", err)
		}
	})

	t.Run("Delete leaves finalizers and reports a terminating Node gone", func(t *testing.T) {
		c := launch(t, "gld-fin")
		node := getNode(t, kube, c.Name)
		patch := client.MergeFrom(node.DeepCopy())
		node.Finalizers = append(node.Finalizers, v1.TerminationFinalizer)
		if err := kube.Patch(ctx, node, patch); err != nil {
			t.Fatal(err)
		}
		if err := p.Delete(ctx, c); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		n := getNode(t, kube, c.Name)
		if n.DeletionTimestamp == nil || !slices.Contains(n.Finalizers, v1.TerminationFinalizer) {
			t.Fatalf("Node deletionTimestamp %v finalizers %v, want marked for deletion with the finalizer kept", n.DeletionTimestamp, n.Finalizers)
		}
		if err := p.Delete(ctx, c); !cloudprovider.IsNodeClaimNotFound(err) {
			t.Errorf("Delete of a terminating Node = %v, want NodeClaimNotFoundError", err)
		}
		if _, err := p.Get(ctx, c.Status.ProviderID); !cloudprovider.IsNodeClaimNotFound(err) {
			t.Errorf("Get of a terminating Node = %v, want NodeClaimNotFoundError", err)
		}
		if _, ok := listed(t)[c.Status.ProviderID]; ok {
			t.Error("List reports a terminating Node")
		}
	})

	t.Run("Delete of a NodeClaim with another cloud's ID", func(t *testing.T) {
		d := launch(t, "gld-foreign")
		foreign := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: d.Name}, Status: v1.NodeClaimStatus{ProviderID: "Provider:///AZ/i-01234567890123456"}}
		if err := p.Delete(ctx, foreign); !cloudprovider.IsNodeClaimNotFound(err) {
			t.Errorf("Delete = %v, want NodeClaimNotFoundError", err)
		}
		if !nodeExists(t, kube, d.Name) {
			t.Error("Delete removed the Node of the NodeClaim's name, not of its provider ID")
		}
	})
	t.Run("Delete of a Node not launched by us", func(t *testing.T) {
		err := p.Delete(ctx, &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: other}})
		if !cloudprovider.IsNodeClaimNotFound(err) {
			t.Errorf("Delete = %v, want NodeClaimNotFoundError", err)
		}
		if !nodeExists(t, kube, other) {
			t.Error("Delete removed a Node this provider did not launch")
		}
	})
}

// listEntries checks what List returned: the instances wanted, as they
// were launched, and not the Node other that this provider did not launch.
func listEntries(t *testing.T, all map[string]*v1.NodeClaim, it *cloudprovider.InstanceType, other string, wanted ...*v1.NodeClaim) {
	t.Helper()
	for _, want := range wanted {
		got, ok := all[want.Status.ProviderID]
		if !ok {
			t.Errorf("List lacks %s", want.Status.ProviderID)
			continue
		}
		if got.Name != want.Name || got.Labels[itKey] != "c5a.large" || got.Labels[zoneKey] != want.Labels[zoneKey] || got.Labels[v1.LabelNodePool] != "default" {
			t.Errorf("List entry %s: name %q labels %v", want.Status.ProviderID, got.Name, got.Labels)
		}
		if !resourcesEqual(got.Status.Capacity, it.Capacity) {
			t.Errorf("List entry %s capacity {%s}", want.Status.ProviderID, fmtResources(got.Status.Capacity))
		}
		if got.CreationTimestamp.IsZero() {
			t.Errorf("List entry %s has no creation time", want.Status.ProviderID)
		}
	}
	if _, ok := all[ProviderID("us-east-1", "us-east-1a", other)]; ok {
		t.Error("List reports a Node this provider did not launch")
	}
}

func TestProviderIDRoundTrip(t *testing.T) {
	tests := []struct {
		id                 string
		region, zone, name string
		ok                 bool
	}{
		{id: "kwok://us-east-1/us-east-1a/default-abcde", region: "us-east-1", zone: "us-east-1a", name: "default-abcde", ok: true},
		{id: ProviderID("eu-west-1", "eu-west-1c", "n"), region: "eu-west-1", zone: "eu-west-1c", name: "n", ok: true},
		{id: "aws:///us-east-1a/i-0123"},
		{id: "kwok://us-east-1/us-east-1a"},
		{id: "kwok://us-east-1//name"},
		{id: "kwok://us-east-1/us-east-1a/name/extra"},
		{id: ""},
	}
	for _, tt := range tests {
		region, zone, name, err := ParseProviderID(tt.id)
		if (err == nil) != tt.ok {
			t.Errorf("ParseProviderID(%q) error = %v, want ok=%v", tt.id, err, tt.ok)
			continue
		}
		if tt.ok && (region != tt.region || zone != tt.zone || name != tt.name) {
			t.Errorf("ParseProviderID(%q) = %q, %q, %q, want %q, %q, %q", tt.id, region, zone, name, tt.region, tt.zone, tt.name)
		}
		if tt.ok && ProviderID(region, zone, name) != tt.id {
			t.Errorf("ProviderID(ParseProviderID(%q)) = %q", tt.id, ProviderID(region, zone, name))
		}
	}
}
