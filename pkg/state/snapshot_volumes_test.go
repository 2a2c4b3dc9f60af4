package state_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/joiner-autoscaler/joiner/pkg/operator"
	"github.com/joiner-autoscaler/joiner/pkg/state"
	"github.com/joiner-autoscaler/joiner/pkg/volumes"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func zoneTerm(zone string) []corev1.NodeSelectorTerm {
	return []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}}}}
}

func claimPod(name, node, claim string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{NodeName: node,
		Containers: []corev1.Container{{Name: "c"}},
		Volumes:    []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}}}
}

func zonalDisk(claim, zone string) []client.Object {
	return []client.Object{
		&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-" + claim}, Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: volumes.EBSDriver, VolumeHandle: "vol-" + claim}},
			NodeAffinity:           &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: zoneTerm(zone)}}}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-" + claim},
			Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}},
	}
}

// TestSnapshotVolumes reads storage through the client: pending pods and
// pods on nodes both carry their volumes' zone, CSINodes give limits.
func TestSnapshotVolumes(t *testing.T) {
	count := int32(3)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{corev1.LabelTopologyZone: "us-east-1b"}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	running := claimPod("running", "n1", "running")
	pending := claimPod("pending", "", "data")
	objs := []client.Object{node, running, pending,
		&storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{
			{Name: volumes.EBSDriver, NodeID: "i-1", Allocatable: &storagev1.VolumeNodeResources{Count: &count}},
			{Name: "efs.csi.aws.com", NodeID: "i-1"},
		}}}}
	objs = append(objs, zonalDisk("running", "us-east-1b")...)
	objs = append(objs, zonalDisk("data", "us-east-1c")...)
	c := &state.Cluster{Client: fake.NewClientBuilder().WithScheme(operator.Scheme()).WithObjects(objs...).Build()}

	snap, _, err := c.Snapshot(context.Background(), []*corev1.Pod{pending})
	if err != nil {
		t.Fatal(err)
	}
	required := func(p *corev1.Pod) []corev1.NodeSelectorTerm {
		if p.Spec.Affinity == nil || p.Spec.Affinity.NodeAffinity == nil || p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
			return nil
		}
		return p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	}
	if got := required(snap.Pods[0]); !reflect.DeepEqual(got, zoneTerm("us-east-1c")) {
		t.Errorf("pending pod's required terms %+v, want zone us-east-1c", got)
	}
	if pending.Spec.Affinity != nil {
		t.Error("the pending pod itself was changed")
	}
	if len(snap.Nodes) != 1 || len(snap.Nodes[0].Pods) != 1 {
		t.Fatalf("nodes %+v", snap.Nodes)
	}
	if got := required(snap.Nodes[0].Pods[0]); !reflect.DeepEqual(got, zoneTerm("us-east-1b")) {
		t.Errorf("running pod's required terms %+v, want zone us-east-1b", got)
	}
	if want := map[string]int{volumes.EBSDriver: 3}; !reflect.DeepEqual(snap.Nodes[0].AttachLimits, want) {
		t.Errorf("attach limits %v, want %v", snap.Nodes[0].AttachLimits, want)
	}
	for _, key := range []string{"default/running", "default/pending"} {
		if u := snap.Volumes[key]; len(u.Attachments) != 1 || u.Attachments[0].Driver != volumes.EBSDriver {
			t.Errorf("%s attaches %+v", key, u)
		}
	}
}
