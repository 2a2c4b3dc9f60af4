package instanceprofile_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instanceprofile"
)

// TestGarbageCollect: after a role change, the old role's profile stays
// while Ensure's protection lasts and while a NodeClaim names it, and goes
// after; the class's profile, another cluster's and a profile outside
// Karpenter's path are never touched.
func TestGarbageCollect(t *testing.T) {
	api, p := setup(t, "OldRole", "NewRole")
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p.Clock = clk
	ctx := context.Background()
	nc := withRole("OldRole")
	nc.UID = types.UID("uid-1")
	old, err := p.Ensure(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	nc.Spec.Role, nc.Status.InstanceProfile = "NewRole", old
	cur, err := p.Ensure(ctx, nc)
	if err != nil || cur == old {
		t.Fatalf("the role change gave %q (%v), want a new profile", cur, err)
	}
	other, usersOwn := "other_cluster_profile", "users-own-profile"
	for name, path := range map[string]string{other: instanceprofile.Path("us-east-1", "other", "uid-9"), usersOwn: "/"} {
		if _, err := api.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(name), Path: aws.String(path)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct {
		name    string
		after   time.Duration
		claims  []string // profiles NodeClaims name
		deleted []string
	}{
		{name: "just after the role change, both protected"},
		{name: "an hour later, a NodeClaim still names the old one", after: instanceprofile.ProtectedFor, claims: []string{old}},
		{name: "its NodeClaims gone", deleted: []string{old}},
		{name: "nothing more to delete"},
	} {
		clk.Step(step.after)
		keep := map[string]bool{cur: true}
		for _, c := range step.claims {
			keep[c] = true
		}
		deleted, err := p.GarbageCollect(ctx, keep)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if !slices.Equal(deleted, step.deleted) {
			t.Fatalf("%s: deleted %v, want %v", step.name, deleted, step.deleted)
		}
	}
	for _, name := range []string{cur, other, usersOwn} {
		if get(t, api, name) == nil {
			t.Errorf("profile %s was deleted", name)
		}
	}
	if get(t, api, old) != nil {
		t.Errorf("the old role's profile %s is still there", old)
	}
}
