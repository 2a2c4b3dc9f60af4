package aws

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestObserveCapacity: a node's memory is learned for its type only when
// it booted from an image the class still maps to that type.
func TestObserveCapacity(t *testing.T) {
	for _, tt := range []struct {
		name, typ, image string
		want             bool
	}{
		{name: "the class's image for the type", typ: "m5.large", image: amiAMD, want: true},
		{name: "an image the class dropped", typ: "m5.large", image: "ami-0old"},
		{name: "the class's image for another architecture", typ: "m5.large", image: amiARM},
		{name: "no image recorded", typ: "m5.large"},
		{name: "arm64 on its image", typ: "m6g.large", image: amiARM, want: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakes{instanceTypes: &fakeInstanceTypes{types: launchCatalog()}}
			p := newProvider(t, kubeWith(t, readyClass()), f)
			nc := nodeClaim()
			nc.Status.ImageID = tt.image
			nc.Labels[corev1.LabelInstanceTypeStable] = tt.typ
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{corev1.LabelInstanceTypeStable: tt.typ}},
				Status: corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("7901Mi")}}}
			if err := p.ObserveCapacity(context.Background(), node, nc); err != nil {
				t.Fatal(err)
			}
			got, ok := f.instanceTypes.observed[tt.typ]
			if ok != tt.want || (ok && got != "7901Mi") {
				t.Fatalf("observed %q (%v), want observed: %v", got, ok, tt.want)
			}
		})
	}
}
