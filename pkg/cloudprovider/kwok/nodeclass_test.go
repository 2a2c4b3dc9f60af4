package kwok

import (
	"context"
	"strings"
	"testing"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// A launch is refused while the NodeClaim's EC2NodeClass is missing or
// reports Ready False, with the class's reason, as Karpenter's kwok provider refuses it
// (its regression spec "should delete a NodeClaim if it references a
// NodeClass that isn't Ready" and "... that doesn't exist"). Readiness not
// reported yet does not block.
func TestCreateWaitsForReadyNodeClass(t *testing.T) {
	kube := kubeClient(t)
	scheme := runtime.NewScheme()
	if err := awsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		condition *metav1.Condition
		refused   bool
		missing   bool
	}{
		{"class missing", nil, true, true},
		{"ready false", &metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "TestingNotReady", Message: "NodeClass is not ready"}, true, false},
		{"ready unknown", &metav1.Condition{Type: "Ready", Status: metav1.ConditionUnknown, Reason: "AwaitingReconciliation"}, false, false},
		{"ready true", &metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready"}, false, false},
		{"not reported", nil, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "class"}}
			if tt.condition != nil {
				class.Status.Conditions = []metav1.Condition{*tt.condition}
			}
			b := fake.NewClientBuilder().WithScheme(scheme)
			if !tt.missing {
				b = b.WithObjects(class)
			}
			reader := b.Build()
			p := newProvider(t, kube, Options{NodeClasses: reader})
			nc := newNodeClaim(uniqueName("ready"), req(itKey, in, "m5.large"))
			nc.Spec.NodeClassRef = &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "class"}
			cleanupNode(t, kube, nc.Name)
			_, err := p.Create(context.Background(), nc)
			if got := cloudprovider.IsNodeClassNotReady(err); got != tt.refused {
				t.Fatalf("Create = %v; refused as not ready %v, want %v", err, got, tt.refused)
			}
			if want := map[bool]string{false: "TestingNotReady", true: "not found"}[tt.missing]; tt.refused && !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not give the class's reason", err)
			}
			if exists := nodeExists(t, kube, nc.Name); exists == tt.refused {
				t.Errorf("Node exists %v, want %v", exists, !tt.refused)
			}
		})
	}
}
