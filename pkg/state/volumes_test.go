package state

import (
	"reflect"
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/volumes"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAttachLimits(t *testing.T) {
	small := &cloudprovider.InstanceType{Name: "small", AttachLimits: map[string]int{volumes.EBSDriver: 26}}
	dedicated := &cloudprovider.InstanceType{Name: "dedicated", AttachLimits: map[string]int{volumes.EBSDriver: 31, "other": 5}}
	types := []*cloudprovider.InstanceType{small, dedicated}
	claim := func(labels map[string]string, options ...string) *v1.NodeClaim {
		return &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: v1.NodeClaimSpec{Requirements: []v1.NodeSelectorRequirementWithMinValues{
			{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: options}}}}
	}
	t.Run("an in-flight NodeClaim gets the least of its options", func(t *testing.T) {
		got := claimAttachLimits(claim(nil, "small", "dedicated"), types)
		if want := map[string]int{volumes.EBSDriver: 26, "other": 5}; !reflect.DeepEqual(got, want) {
			t.Fatalf("%v, want %v", got, want)
		}
	})
	t.Run("a launched NodeClaim gets its type's", func(t *testing.T) {
		got := claimAttachLimits(claim(map[string]string{corev1.LabelInstanceTypeStable: "dedicated"}, "small", "dedicated"), types)
		if want := dedicated.AttachLimits; !reflect.DeepEqual(got, want) {
			t.Fatalf("%v, want %v", got, want)
		}
	})
	t.Run("a node's CSINode wins over its type", func(t *testing.T) {
		cv := &clusterVolumes{csiLimits: map[string]map[string]int{"n1": {volumes.EBSDriver: 7}}}
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{corev1.LabelInstanceTypeStable: "dedicated"}}}
		got := cv.nodeAttachLimits(n, map[string]*cloudprovider.InstanceType{"dedicated": dedicated})
		if want := map[string]int{volumes.EBSDriver: 7, "other": 5}; !reflect.DeepEqual(got, want) {
			t.Fatalf("%v, want %v", got, want)
		}
	})
}
