package nodeclass_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"
	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/securitygroup"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/subnet"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclass"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A transient AWS error (throttling past the SDK's retries) is retried
// without flapping a class that was ready; a lasting one is reported.
func TestTransientErrorKeepsReady(t *testing.T) {
	e := newEnv(t, guideClass())
	if _, err := e.reconcile(); err != nil {
		t.Fatal(err)
	}
	e.ctrl.Subnets = failingSubnets{err: &smithy.GenericAPIError{Code: "RequestLimitExceeded", Message: "Request limit exceeded."}}
	if _, err := e.reconcile(); err == nil {
		t.Error("want an error, to retry with backoff")
	}
	checkConditions(t, e.get(), allTrue())
	e.ctrl.Subnets = failingSubnets{err: &smithy.GenericAPIError{Code: "UnauthorizedOperation", Message: "You are not authorized to perform this operation."}}
	if _, err := e.reconcile(); err == nil {
		t.Error("want an error, to retry with backoff")
	}
	nc := e.get()
	checkConditions(t, nc, map[string]want{awsv1.ConditionTypeSubnetsReady: {status: metav1.ConditionFalse, reason: "UnauthorizedOperation"}})
	if len(nc.Status.Subnets) != 3 {
		t.Errorf("an AWS error emptied status.subnets: %v", nc.Status.Subnets)
	}
}

// Status follows AWS: a new tagged subnet appears, a security group whose
// tag is removed disappears, and the conditions follow.
func TestStatusFollowsAWS(t *testing.T) {
	e := newEnv(t, guideClass())
	if _, err := e.reconcile(); err != nil {
		t.Fatal(err)
	}
	added := e.createSubnet("us-east-1d", "10.0.8.0/23", discoveryTags)
	if _, err := e.clients.EC2.DeleteTags(e.ctx, &ec2.DeleteTagsInput{Resources: []string{e.group}, Tags: tags(discoveryTags)}); err != nil {
		t.Fatal(err)
	}
	// Within the providers' cache TTL nothing changes yet.
	if _, err := e.reconcile(); err != nil {
		t.Fatal(err)
	}
	if n := len(e.get().Status.Subnets); n != 3 {
		t.Fatalf("%d subnets within the cache TTL, want 3", n)
	}
	e.clock.Step(subnet.DefaultTTL)
	res, err := e.reconcile()
	if err != nil {
		t.Fatal(err)
	}
	nc := e.get()
	if len(nc.Status.Subnets) != 4 || nc.Status.Subnets[0].ID != added || nc.Status.Subnets[0].Zone != "us-east-1d" {
		t.Errorf("subnets %v, want the new /23 first", nc.Status.Subnets)
	}
	if nc.Status.SecurityGroups != nil {
		t.Errorf("security groups %v, want none", nc.Status.SecurityGroups)
	}
	checkConditions(t, nc, map[string]want{
		awsv1.ConditionTypeSubnetsReady:        {status: metav1.ConditionTrue},
		awsv1.ConditionTypeSecurityGroupsReady: {status: metav1.ConditionFalse, reason: "SecurityGroupsNotFound"},
		awsv1.ConditionTypeReady:               {status: metav1.ConditionFalse},
	})
	if res.RequeueAfter != nodeclass.NotReadyPeriod {
		t.Errorf("requeue after %v, want %v", res.RequeueAfter, nodeclass.NotReadyPeriod)
	}
	ready := meta.FindStatusCondition(nc.Status.Conditions, awsv1.ConditionTypeReady)
	if !ready.LastTransitionTime.Time.Equal(e.clock.Now()) {
		t.Errorf("Ready's transition time %v, want now %v", ready.LastTransitionTime, e.clock.Now())
	}
	// The tag is back: Ready again.
	if _, err := e.clients.EC2.CreateTags(e.ctx, &ec2.CreateTagsInput{Resources: []string{e.group}, Tags: tags(discoveryTags)}); err != nil {
		t.Fatal(err)
	}
	e.clock.Step(securitygroup.DefaultTTL)
	if _, err := e.reconcile(); err != nil {
		t.Fatal(err)
	}
	checkConditions(t, e.get(), allTrue())
}

// A spec change is not Ready until it is resolved: the conditions carry
// the generation they were written for.
func TestSpecChangeIsResolvedAgain(t *testing.T) {
	e := newEnv(t, guideClass())
	if _, err := e.reconcile(); err != nil {
		t.Fatal(err)
	}
	nc := e.get()
	nc.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{ID: e.subnets[2]}}
	nc.Generation = 2
	if err := e.kube.Update(e.ctx, nc); err != nil {
		t.Fatal(err)
	}
	if status, reason, _ := e.get().Readiness(); status != metav1.ConditionUnknown || reason != "ReconcilingDependents" {
		t.Errorf("before the reconcile Readiness is %s/%s, want Unknown/ReconcilingDependents", status, reason)
	}
	if _, err := e.reconcile(); err != nil {
		t.Fatal(err)
	}
	got := e.get()
	checkConditions(t, got, allTrue())
	if len(got.Status.Subnets) != 1 || got.Status.Subnets[0].ID != e.subnets[2] {
		t.Errorf("subnets %v, want only %s", got.Status.Subnets, e.subnets[2])
	}
}
