package garbagecollection

import (
	"context"
	"slices"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/state"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// cloud lists its instances and records what it deletes.
type cloud struct {
	cloudprovider.CloudProvider
	instances []*v1.NodeClaim
	deleted   []string
}

func (c *cloud) List(context.Context) ([]*v1.NodeClaim, error) { return c.instances, nil }
func (c *cloud) Delete(_ context.Context, nc *v1.NodeClaim) error {
	c.deleted = append(c.deleted, nc.Status.ProviderID)
	return nil
}

func TestCollect(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	// instance is one of pool "default", tagged with the NodeClaim name
	// claim ("" for untagged), launched ago.
	instance := func(id, claim string, ago time.Duration) *v1.NodeClaim {
		return &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: claim, Labels: map[string]string{v1.LabelNodePool: "default"}, CreationTimestamp: metav1.NewTime(now.Add(-ago))},
			Status: v1.NodeClaimStatus{ProviderID: "aws:///us-east-1a/" + id}}
	}
	// claim is a NodeClaim of pool "default" with the provider ID of id
	// ("" while launching), whose launch was attempted ago.
	claim := func(name, id string, attemptedAgo time.Duration) *v1.NodeClaim {
		nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelNodePool: "default"},
			Annotations: map[string]string{v1.AnnotationLaunchAttempted: now.Add(-attemptedAgo).Format(time.RFC3339)}}}
		if id != "" {
			nc.Status.ProviderID = "aws:///us-east-1a/" + id
		}
		return nc
	}
	for _, tc := range []struct {
		name      string
		instance  *v1.NodeClaim
		claims    []*v1.NodeClaim
		collected bool
	}{
		{name: "owned by a NodeClaim's provider ID", instance: instance("i-1", "a", time.Hour), claims: []*v1.NodeClaim{claim("a", "i-1", time.Hour)}},
		{name: "no NodeClaim at all", instance: instance("i-1", "", time.Hour), collected: true},
		{name: "too young to tell", instance: instance("i-1", "", 10*time.Second)},
		{name: "a second launch for a NodeClaim that recorded another instance", instance: instance("i-2", "a", time.Hour),
			claims: []*v1.NodeClaim{claim("a", "i-1", time.Hour)}, collected: true},
		{name: "tagged for a NodeClaim still recording its launch", instance: instance("i-1", "a", time.Hour), claims: []*v1.NodeClaim{claim("a", "", time.Hour)}},
		{name: "untagged, launched after a launch still being recorded in its pool began", instance: instance("i-1", "", 10*time.Minute),
			claims: []*v1.NodeClaim{claim("a", "", 11*time.Minute)}},
		{name: "untagged, launched well before any launch still being recorded in its pool", instance: instance("i-1", "", time.Hour),
			claims: []*v1.NodeClaim{claim("a", "", 10*time.Minute)}, collected: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scheme := runtime.NewScheme()
			if err := v1.AddToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			b := fake.NewClientBuilder().WithScheme(scheme)
			for _, nc := range tc.claims {
				b = b.WithObjects(nc)
			}
			cp := &cloud{instances: []*v1.NodeClaim{tc.instance}}
			c := &Controller{Cluster: &state.Cluster{Client: b.Build()}, CloudProvider: cp, Clock: clocktesting.NewFakeClock(now), MinAge: 30 * time.Second}
			if err := c.collect(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := slices.Contains(cp.deleted, tc.instance.Status.ProviderID); got != tc.collected {
				t.Fatalf("collected %t, want %t", got, tc.collected)
			}
		})
	}
}
