// Package manifests turns the YAML a user would apply (NodePools,
// EC2NodeClasses, workloads and optionally Nodes) into a scheduling snapshot,
// so a plan can be computed offline, before anything is applied.
package manifests

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/api/v1alpha1"
	"github.com/joiner-autoscaler/joiner/pkg/overlay"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	"github.com/joiner-autoscaler/joiner/pkg/volumes"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// Objects are the manifests' objects by kind.
type Objects struct {
	NodePools      []*v1.NodePool
	EC2NodeClasses []*awsv1.EC2NodeClass
	// Pods are the workloads' pods: Deployments, StatefulSets, ReplicaSets
	// and Jobs expanded to their replicas, plus bare Pods. Pods with a
	// nodeName belong to the Nodes they name.
	Pods       []*corev1.Pod
	DaemonSets []*appsv1.DaemonSet
	Nodes      []*corev1.Node
	// Storage that pods' volumes resolve against: where their disks are
	// and what they attach. StatefulSets add the claims of their
	// volumeClaimTemplates that the manifests do not hold.
	Claims         []*corev1.PersistentVolumeClaim
	Volumes        []*corev1.PersistentVolume
	StorageClasses []*storagev1.StorageClass
	// templateClaims are the claims StatefulSets would create.
	templateClaims []*corev1.PersistentVolumeClaim
	// Namespaces give the labels that affinity terms' namespaceSelectors
	// match.
	Namespaces []*corev1.Namespace
	// LimitRanges default the containers of the workloads and DaemonSets
	// of their namespaces, as the API server's admission would.
	LimitRanges []corev1.LimitRange
	// NodeOverlays reprice and resize the pools' instance types, as the
	// controller does with the NodeOverlay gate on; Snapshot records how
	// each fared in OverlayVerdicts.
	NodeOverlays    []*v1alpha1.NodeOverlay
	OverlayVerdicts map[string]overlay.Verdict
	// Deployments, StatefulSets, ReplicaSets and Jobs are the workloads
	// as written, and BarePods the Pods given as such, besides their
	// expanded pods: joiner simulate scales and recreates them over time.
	Deployments  []*appsv1.Deployment
	StatefulSets []*appsv1.StatefulSet
	ReplicaSets  []*appsv1.ReplicaSet
	Jobs         []*batchv1.Job
	BarePods     []*corev1.Pod
	// PodDisruptionBudgets protect pods from eviction; only joiner
	// simulate evicts, so joiner plan refuses them.
	PodDisruptionBudgets []*policyv1.PodDisruptionBudget
}

var (
	scheme = func() *runtime.Scheme {
		s := runtime.NewScheme()
		_ = clientgoscheme.AddToScheme(s)
		_ = v1.AddToScheme(s)
		_ = awsv1.AddToScheme(s)
		_ = v1alpha1.AddToScheme(s)
		return s
	}()
	strict = serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
)

// LoadFiles reads every document of every file ("-" is standard input).
func LoadFiles(paths []string) (*Objects, error) {
	out := &Objects{}
	for _, p := range paths {
		var r io.Reader
		if p == "-" {
			r = os.Stdin
		} else {
			f, err := os.Open(p)
			if err != nil {
				return nil, err
			}
			defer f.Close()
			r = f
		}
		if err := out.load(p, r); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Parse reads every document of r; name says where they came from in
// errors.
func Parse(name string, r io.Reader) (*Objects, error) {
	out := &Objects{}
	if err := out.load(name, r); err != nil {
		return nil, err
	}
	return out, nil
}

func (o *Objects) load(name string, r io.Reader) error {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	for index := 0; ; index++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s, document %d: reading YAML: %w", name, index, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			index--
			continue
		}
		if doc, err = withCRDDefaults(doc); err != nil {
			return fmt.Errorf("%s, document %d: %w", name, index, err)
		}
		obj, gvk, err := strict.Decode(doc, nil, nil)
		if err != nil {
			if runtime.IsNotRegisteredError(err) {
				return fmt.Errorf("%s, document %d: unknown kind: %v; joiner plan reads NodePool, EC2NodeClass, NodeOverlay, Deployment, StatefulSet, ReplicaSet, Job, Pod, DaemonSet, Node, Namespace, LimitRange, PersistentVolumeClaim, PersistentVolume, StorageClass and (joiner simulate only) PodDisruptionBudget", name, index, err)
			}
			return fmt.Errorf("%s, document %d: %w", name, index, err)
		}
		if err := o.add(obj); err != nil {
			return fmt.Errorf("%s, document %d (%s): %w", name, index, gvk.Kind, err)
		}
	}
}

func stripComments(doc []byte) []byte {
	var out [][]byte
	for _, line := range bytes.Split(doc, []byte("\n")) {
		t := bytes.TrimSpace(line)
		if len(t) > 0 && t[0] != '#' {
			out = append(out, line)
		}
	}
	return bytes.Join(out, []byte("\n"))
}

func (o *Objects) add(obj runtime.Object) error {
	switch x := obj.(type) {
	case *v1.NodePool:
		o.NodePools = append(o.NodePools, x)
	case *awsv1.EC2NodeClass:
		o.EC2NodeClasses = append(o.EC2NodeClasses, x)
	case *corev1.Pod:
		defaultNamespace(&x.ObjectMeta)
		o.Pods = append(o.Pods, x)
		o.BarePods = append(o.BarePods, x)
	case *appsv1.Deployment:
		defaultNamespace(&x.ObjectMeta)
		o.Deployments = append(o.Deployments, x)
		o.expand(x.ObjectMeta, x.Spec.Replicas, x.Spec.Template, func(i int) string { return fmt.Sprintf("%s-%d", x.Name, i) })
	case *appsv1.StatefulSet:
		defaultNamespace(&x.ObjectMeta)
		o.StatefulSets = append(o.StatefulSets, x)
		first := len(o.Pods)
		o.expand(x.ObjectMeta, x.Spec.Replicas, x.Spec.Template, func(i int) string { return x.Name + "-" + strconv.Itoa(i) })
		for _, p := range o.Pods[first:] {
			o.templateClaims = append(o.templateClaims, volumes.StatefulClaims(x, p)...)
		}
	case *appsv1.ReplicaSet:
		defaultNamespace(&x.ObjectMeta)
		o.ReplicaSets = append(o.ReplicaSets, x)
		o.expand(x.ObjectMeta, x.Spec.Replicas, x.Spec.Template, func(i int) string { return fmt.Sprintf("%s-%d", x.Name, i) })
	case *batchv1.Job:
		defaultNamespace(&x.ObjectMeta)
		o.Jobs = append(o.Jobs, x)
		o.expand(x.ObjectMeta, x.Spec.Parallelism, x.Spec.Template, func(i int) string { return fmt.Sprintf("%s-%d", x.Name, i) })
	case *appsv1.DaemonSet:
		defaultNamespace(&x.ObjectMeta)
		o.DaemonSets = append(o.DaemonSets, x)
	case *corev1.Node:
		o.Nodes = append(o.Nodes, x)
	case *corev1.PersistentVolumeClaim:
		defaultNamespace(&x.ObjectMeta)
		o.Claims = append(o.Claims, x)
	case *corev1.PersistentVolume:
		o.Volumes = append(o.Volumes, x)
	case *storagev1.StorageClass:
		o.StorageClasses = append(o.StorageClasses, x)
	case *corev1.Namespace:
		o.Namespaces = append(o.Namespaces, x)
	case *corev1.LimitRange:
		defaultNamespace(&x.ObjectMeta)
		o.LimitRanges = append(o.LimitRanges, *x)
	case *policyv1.PodDisruptionBudget:
		defaultNamespace(&x.ObjectMeta)
		o.PodDisruptionBudgets = append(o.PodDisruptionBudgets, x)
	case *v1alpha1.NodeOverlay:
		o.NodeOverlays = append(o.NodeOverlays, x)
	default:
		return fmt.Errorf("kind %T is not used for planning; remove it or plan with the kinds listed in joiner plan --help", obj)
	}
	return nil
}

func defaultNamespace(m *metav1.ObjectMeta) {
	if m.Namespace == "" {
		m.Namespace = corev1.NamespaceDefault
	}
}

func (o *Objects) expand(meta metav1.ObjectMeta, replicas *int32, tmpl corev1.PodTemplateSpec, name func(int) string) {
	defaultNamespace(&meta)
	n := 1
	if replicas != nil {
		n = int(*replicas)
	}
	for i := 0; i < n; i++ {
		p := &corev1.Pod{ObjectMeta: *tmpl.ObjectMeta.DeepCopy(), Spec: *tmpl.Spec.DeepCopy()}
		pods.DefaultRequests(&p.Spec)
		p.Name, p.Namespace = name(i), meta.Namespace
		p.CreationTimestamp = meta.CreationTimestamp
		o.Pods = append(o.Pods, p)
	}
}
