package state

import (
	"context"
	"reflect"
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/volumes"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// scheme is operator.Scheme's, which this package cannot import.
func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = v1.AddToScheme(s)
	return s
}

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
	c := &Cluster{Client: fake.NewClientBuilder().WithScheme(scheme()).WithObjects(objs...).Build()}

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
