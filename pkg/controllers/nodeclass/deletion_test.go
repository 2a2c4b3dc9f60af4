package nodeclass_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/smithy-go"
	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/internal/mototest"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instanceprofile"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A deleted class waits for its NodeClaims, saying which, then removes its
// instance profile and then its launch templates, and only then lets go.
func TestDeletion(t *testing.T) {
	claim := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abcde"}, Spec: v1.NodeClaimSpec{
		NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"}}}
	other := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "gpu-fghij"}, Spec: v1.NodeClaimSpec{
		NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "gpu"}}}
	e := newEnv(t, guideClass(), claim, other)
	if _, err := e.reconcile(); err != nil {
		t.Fatal(err)
	}
	profile := instanceprofile.Name("demo", "us-east-1", "default", role)
	if err := e.kube.Delete(e.ctx, e.get()); err != nil {
		t.Fatal(err)
	}

	res, err := e.reconcile()
	if err != nil || res.RequeueAfter == 0 {
		t.Fatalf("blocked deletion: (%+v, %v), want a requeue", res, err)
	}
	nc := e.get()
	if !hasFinalizer(nc) {
		t.Fatal("finalizer removed while a NodeClaim uses the class")
	}
	checkConditions(t, nc, map[string]want{awsv1.ConditionTypeReady: {status: metav1.ConditionFalse, reason: "NodeClassTerminating",
		message: []string{"Waiting on NodeClaim termination for default-abcde"}}})
	if strings.Contains(meta.FindStatusCondition(nc.Status.Conditions, awsv1.ConditionTypeReady).Message, "gpu-fghij") {
		t.Error("names a NodeClaim of another class")
	}
	select {
	case ev := <-e.recorder.Events:
		if !strings.Contains(ev, "WaitingOnNodeClaimTermination") || !strings.Contains(ev, "default-abcde") {
			t.Errorf("event %q", ev)
		}
	default:
		t.Error("no event")
	}
	if len(*e.calls) != 0 {
		t.Errorf("cleaned up while a NodeClaim uses the class: %v", *e.calls)
	}
	if !profileExists(t, e, profile) {
		t.Fatal("instance profile deleted while a NodeClaim uses the class")
	}

	if err := e.kube.Delete(e.ctx, claim); err != nil {
		t.Fatal(err)
	}
	if _, err := e.reconcile(); err != nil {
		t.Fatal(err)
	}
	if err := e.kube.Get(e.ctx, types.NamespacedName{Name: "default"}, &awsv1.EC2NodeClass{}); !apierrors.IsNotFound(err) {
		t.Errorf("class still there after its finalizer ran: %v", err)
	}
	if want := []string{"instanceprofile:default:true", "launchtemplates:default"}; !reflect.DeepEqual(*e.calls, want) {
		t.Errorf("clean-up %v, want %v", *e.calls, want)
	}
	if profileExists(t, e, profile) {
		t.Error("instance profile left behind")
	}
}

func profileExists(t *testing.T, e *env, name string) bool {
	t.Helper()
	_, err := e.clients.IAM.GetInstanceProfile(e.ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode() == "NoSuchEntity" {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// The finalizer stays until every clean-up step has succeeded, and the
// steps run in order: instance profile, then launch templates.
func TestFinalizerOrder(t *testing.T) {
	cases := []struct {
		name string
		// fail sets up the failure of the first attempt.
		fail func(e *env)
		// firstCalls are the clean-up calls of the failed attempt.
		firstCalls []string
	}{
		{name: "instance profile deletion fails",
			fail: func(e *env) {
				mototest.Current().Fail("iam", "DeleteInstanceProfile", "AccessDenied", "not authorized to perform: iam:DeleteInstanceProfile")
			},
			firstCalls: []string{"instanceprofile:default:false"}},
		{name: "launch template deletion fails",
			fail:       func(e *env) { e.lts.err = errors.New("throttled") },
			firstCalls: []string{"instanceprofile:default:true", "launchtemplates:default"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, guideClass())
			if _, err := e.reconcile(); err != nil {
				t.Fatal(err)
			}
			if err := e.kube.Delete(e.ctx, e.get()); err != nil {
				t.Fatal(err)
			}
			tc.fail(e)
			if _, err := e.reconcile(); err == nil {
				t.Error("a failed clean-up returned no error")
			}
			if !hasFinalizer(e.get()) {
				t.Fatal("finalizer removed before the clean-up succeeded")
			}
			if !reflect.DeepEqual(*e.calls, tc.firstCalls) {
				t.Errorf("calls %v, want %v", *e.calls, tc.firstCalls)
			}
			mototest.Current().Heal()
			e.lts.err = nil
			*e.calls = nil
			if _, err := e.reconcile(); err != nil {
				t.Fatal(err)
			}
			if err := e.kube.Get(e.ctx, types.NamespacedName{Name: "default"}, &awsv1.EC2NodeClass{}); !apierrors.IsNotFound(err) {
				t.Errorf("class still there: %v", err)
			}
			if want := []string{"instanceprofile:default:true", "launchtemplates:default"}; !reflect.DeepEqual(*e.calls, want) {
				t.Errorf("second attempt %v, want %v", *e.calls, want)
			}
		})
	}
}

// A class given an instance profile keeps it when deleted.
func TestDeletionKeepsAGivenInstanceProfile(t *testing.T) {
	nc := guideClass()
	nc.Spec.Role, nc.Spec.InstanceProfile = "", aws.String("MyProfile")
	e := newEnv(t, nc)
	if _, err := e.clients.IAM.CreateInstanceProfile(e.ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("MyProfile")}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.reconcile(); err != nil {
		t.Fatal(err)
	}
	got := e.get()
	checkConditions(t, got, allTrue())
	if got.Status.InstanceProfile != "MyProfile" {
		t.Errorf("instance profile %q", got.Status.InstanceProfile)
	}
	if err := e.kube.Delete(e.ctx, got); err != nil {
		t.Fatal(err)
	}
	if _, err := e.reconcile(); err != nil {
		t.Fatal(err)
	}
	if !profileExists(t, e, "MyProfile") {
		t.Error("deleted a profile given in spec.instanceProfile")
	}
}
