package kwok

import (
	"context"
	"testing"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestClassShapesTheMachines: an EC2NodeClass's kubelet settings hold on
// kwok machines as on AWS. With maxPods 8, the NodePool's m5.large offers
// 8 pods and its machine reports 8; with no kubelet settings, the
// catalog's 29. A machine keeps what it launched with when its class
// changes later, as a booted kubelet does.
func TestClassShapesTheMachines(t *testing.T) {
	kube := kubeClient(t)
	scheme := runtime.NewScheme()
	if err := awsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		kubelet *awsv1.KubeletConfiguration
		pods    int64
	}{
		{"maxPods 8", &awsv1.KubeletConfiguration{MaxPods: ptr.To[int32](8)}, 8},
		{"no kubelet settings", nil, 29},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "class", UID: "class-uid", Generation: 1},
				Spec: awsv1.EC2NodeClassSpec{Kubelet: tt.kubelet}}
			reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(class).Build()
			p := newProvider(t, kube, Options{NodeClasses: reader})
			ref := &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "class"}
			np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
			np.Spec.Template.Spec.NodeClassRef = ref
			its, err := p.InstanceTypes(context.Background(), np)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range its {
				if it.Name == "m5.large" {
					if got := it.Allocatable.Pods().Value(); got != tt.pods {
						t.Errorf("the pool's m5.large offers %d pods; want %d", got, tt.pods)
					}
				}
			}
			nc := newNodeClaim(uniqueName("shaped"), req(itKey, in, "m5.large"))
			nc.Spec.NodeClassRef = ref
			cleanupNode(t, kube, nc.Name)
			out, err := p.Create(context.Background(), nc)
			if err != nil {
				t.Fatal(err)
			}
			if got := out.Status.Allocatable.Pods().Value(); got != tt.pods {
				t.Errorf("the launched NodeClaim reports %d pods; want %d", got, tt.pods)
			}
			// The class changes: the machine does not.
			class.Spec.Kubelet, class.Generation = &awsv1.KubeletConfiguration{MaxPods: ptr.To[int32](50)}, 2
			if err := reader.Update(context.Background(), class); err != nil {
				t.Fatal(err)
			}
			got, err := p.Get(context.Background(), out.Status.ProviderID)
			if err != nil {
				t.Fatal(err)
			}
			if pods := got.Status.Allocatable.Pods().Value(); pods != tt.pods && tt.kubelet != nil {
				t.Errorf("after the class changed, the machine reports %d pods; want the %d it launched with", pods, tt.pods)
			}
			var node corev1.Node
			if err := kube.Get(context.Background(), types.NamespacedName{Name: nc.Name}, &node); err != nil {
				t.Fatal(err)
			}
			if pods := node.Status.Allocatable.Pods().Value(); pods != tt.pods {
				t.Errorf("the Node reports %d pods; want %d", pods, tt.pods)
			}
		})
	}
}

// TestRetryReshapesFromTheClass: a retried Create that finds its Node
// without a status (kwok's defaults filled in) gives it the shape it
// launched with: from the class for a Node the class shaped, from the
// catalog for one it did not.
func TestRetryReshapesFromTheClass(t *testing.T) {
	kube := kubeClient(t)
	scheme := runtime.NewScheme()
	if err := awsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "class", UID: "class-uid", Generation: 1},
		Spec: awsv1.EC2NodeClassSpec{Kubelet: &awsv1.KubeletConfiguration{MaxPods: ptr.To[int32](8)}}}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(class).Build()
	ref := &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "class"}
	kwokDefaults := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1k"), corev1.ResourceMemory: resource.MustParse("1Ti"), corev1.ResourcePods: resource.MustParse("1M")}
	cases := []struct {
		name   string
		shaped bool
		pods   int64
	}{
		{"shaped by its class", true, 8},
		{"launched from the catalog", false, 29},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			nc := newNodeClaim(uniqueName("reshape"), req(itKey, in, "m5.large"))
			nc.Spec.NodeClassRef = ref
			cleanupNode(t, kube, nc.Name)
			node := &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: nc.Name, Labels: map[string]string{LabelInstance: "true", itKey: "m5.large", zoneKey: "us-east-1a", v1.LabelNodePool: "default"}},
				Spec:       corev1.NodeSpec{ProviderID: ProviderID("us-east-1", "us-east-1a", nc.Name)},
				Status:     corev1.NodeStatus{Capacity: kwokDefaults, Allocatable: kwokDefaults},
			}
			if tt.shaped {
				node.Annotations = map[string]string{AnnotationClassShaped: "true"}
			}
			if err := kube.Create(context.Background(), node); err != nil {
				t.Fatal(err)
			}
			out, err := newProvider(t, kube, Options{NodeClasses: reader}).Create(context.Background(), nc)
			if err != nil {
				t.Fatal(err)
			}
			if got := getNode(t, kube, nc.Name).Status.Allocatable.Pods().Value(); got != tt.pods {
				t.Errorf("the Node reports %d pods after the retry; want %d", got, tt.pods)
			}
			if got := out.Status.Allocatable.Pods().Value(); got != tt.pods {
				t.Errorf("the NodeClaim reports %d pods after the retry; want %d", got, tt.pods)
			}
		})
	}
}
