package aws

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	"github.com/joiner-autoscaler/joiner/test/framework"
)

// TestInstanceProfileGC: the class's role changes; its node drifts and is
// replaced by one launched with the new role's profile. The old role's
// profile stays while the old NodeClaim names it, through collections that
// run meanwhile, and is deleted once it is gone; the new one stays.
func TestInstanceProfileGC(t *testing.T) {
	ctx := context.Background()
	adminIAM := iam.NewFromConfig(clientConfig(t, fake.URL(), region))
	if _, err := adminIAM.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("KarpenterNodeRole-next"),
		AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = adminIAM.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: aws.String("KarpenterNodeRole-next")})
	})
	j := framework.StartJoiner(t, awsEnv("INSTANCE_PROFILE_GC_INTERVAL=2s")...)
	t.Cleanup(func() { framework.ResetCluster(t) })
	framework.Kubectl(t, framework.PoolAndClass, "apply", "-f", "-")
	framework.Kubectl(t, framework.Deployment("profiled", 1, "500m", "512Mi", ""), "apply", "-f", "-")
	var first string
	var oldProfile string
	framework.Eventually(t, 3*time.Minute, "the pod running on a NodeClaim that names its profile", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "profiled"})
		claims := framework.NodeClaims(t)
		if n != 1 || len(claims) != 1 {
			return false, fmt.Sprintf("%d running, %d NodeClaims", n, len(claims))
		}
		first, oldProfile = claims[0].Name, claims[0].Annotations[awsv1.AnnotationInstanceProfile]
		return oldProfile != "", "no instance profile annotation"
	})
	exists := func(name string) bool {
		_, err := adminIAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
		return err == nil
	}
	listings := func() int { return len(fake.Calls("iam", "ListInstanceProfiles")) }

	framework.Kubectl(t, "", "patch", "ec2nodeclass", "default", "--type=merge", "-p", `{"spec":{"role":"KarpenterNodeRole-next"}}`)
	// While the old NodeClaim is there, its profile is too, however many
	// collections run.
	whileUsed, newProfile := 0, ""
	var atStart int
	framework.Eventually(t, 4*time.Minute, "the old NodeClaim replaced and its profile deleted", func() (bool, string) {
		claims := framework.NodeClaims(t)
		oldThere := false
		for _, nc := range claims {
			if nc.Name == first {
				oldThere = true
			} else {
				newProfile = nc.Annotations[awsv1.AnnotationInstanceProfile]
			}
		}
		if oldThere {
			if atStart == 0 {
				atStart = listings()
			}
			whileUsed = listings() - atStart
			if !exists(oldProfile) {
				t.Fatalf("the profile %s was deleted while NodeClaim %s, launched with it, was there", oldProfile, first)
			}
			return false, fmt.Sprintf("the old NodeClaim is there; %d collections since the change", whileUsed)
		}
		return !exists(oldProfile), fmt.Sprintf("the old NodeClaim is gone, its profile %s exists: %v", oldProfile, exists(oldProfile))
	})
	if whileUsed < 2 {
		t.Fatalf("%d collections ran while the old NodeClaim was there; the test saw none keep its profile", whileUsed)
	}
	if newProfile == "" || newProfile == oldProfile || !exists(newProfile) {
		t.Fatalf("the replacement's profile %q (the old one %q) does not exist", newProfile, oldProfile)
	}
	if !strings.Contains(j.Logs(), `"instance-profile":"`+oldProfile+`"`) {
		t.Errorf("no log line names the deleted profile %s", oldProfile)
	}
}
