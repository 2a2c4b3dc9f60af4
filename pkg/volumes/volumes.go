// Package volumes says what a pod's volumes demand of the node it runs on:
// where the node must be (a disk lives in one zone, and a pod whose disk is
// in zone b can only ever run in zone b), and which volumes it attaches,
// since a node can attach only so many per CSI driver.
//
// It is pure: the PersistentVolumeClaims, PersistentVolumes and
// StorageClasses come in an Index, so the controller (from its cache) and
// the offline planner (from manifests) resolve volumes alike.
package volumes

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/component-helpers/storage/ephemeral"
	"k8s.io/component-helpers/storage/volume"
	csitrans "k8s.io/csi-translation-lib"
	"k8s.io/klog/v2"
)

// EBS CSI names. The driver labels nodes with its own zone key and writes
// it into the node affinity of the volumes it provisions; a node in a zone
// carries both keys with the same value, so the planner reads it as the
// zone (as Karpenter's AWS provider does).
const (
	EBSDriver  = "ebs.csi.aws.com"
	EBSZoneKey = "topology.ebs.csi.aws.com/zone"
)

// The annotations that make a StorageClass the default (the API server's
// DefaultStorageClass admission reads them; k8s.io/api does not name them).
const (
	defaultClassAnnotation     = "storageclass.kubernetes.io/is-default-class"
	betaDefaultClassAnnotation = "storageclass.beta.kubernetes.io/is-default-class"
)

// maxTerms bounds the alternatives a pod's volumes may multiply out to.
// Each volume's ORed terms multiply with every other volume's; real pods
// have one term per volume, so this only stops a pathological spec.
const maxTerms = 64

// zoneKeys maps topology keys that name a zone or region by another name to
// the well-known keys every node carries.
var zoneKeys = map[string]string{
	EBSZoneKey:                                 corev1.LabelTopologyZone,
	"failure-domain.beta.kubernetes.io/zone":   corev1.LabelTopologyZone,
	"failure-domain.beta.kubernetes.io/region": corev1.LabelTopologyRegion,
}

// Attachment is one volume a pod attaches to its node. Two pods that use
// the same claim have equal Attachments: on one node they attach it once.
type Attachment struct {
	// Driver is the CSI driver, in-tree plugins translated to theirs
	// (awsElasticBlockStore counts as ebs.csi.aws.com).
	Driver string
	// Handle identifies the volume: its claim, or an inline volume's ID.
	Handle string
}

// Needs are what one pod's volumes require of its node.
type Needs struct {
	// Terms are node selector terms, ORed, that a node must match to reach
	// every volume; nil when the volumes can be reached anywhere.
	Terms []corev1.NodeSelectorTerm
	// Attachments are the volumes the pod attaches, sorted.
	Attachments []Attachment
}

// Index holds the storage objects that volumes resolve against.
type Index struct {
	claims       map[string]*corev1.PersistentVolumeClaim
	volumes      map[string]*corev1.PersistentVolume
	classes      map[string]*storagev1.StorageClass
	defaultClass *storagev1.StorageClass
	// Partial says the objects are not the whole cluster (manifests for an
	// offline plan): a claim, volume or class it lacks exists somewhere
	// else and constrains nothing known, rather than blocking the pod.
	Partial bool
}

// NewIndex indexes the objects.
func NewIndex(claims []*corev1.PersistentVolumeClaim, pvs []*corev1.PersistentVolume, classes []*storagev1.StorageClass) *Index {
	ix := &Index{claims: map[string]*corev1.PersistentVolumeClaim{}, volumes: map[string]*corev1.PersistentVolume{}, classes: map[string]*storagev1.StorageClass{}}
	for _, c := range claims {
		ix.claims[c.Namespace+"/"+c.Name] = c
	}
	for _, pv := range pvs {
		ix.volumes[pv.Name] = pv
	}
	for _, sc := range classes {
		ix.classes[sc.Name] = sc
		// With several defaults the API server picks the newest; so do we.
		if sc.Annotations[defaultClassAnnotation] == "true" || sc.Annotations[betaDefaultClassAnnotation] == "true" {
			if d := ix.defaultClass; d == nil || d.CreationTimestamp.Before(&sc.CreationTimestamp) || (d.CreationTimestamp.Equal(&sc.CreationTimestamp) && sc.Name < d.Name) {
				ix.defaultClass = sc
			}
		}
	}
	return ix
}

// Resolve returns what the pod's volumes require, or why the pod cannot be
// placed yet. It follows kube-scheduler's volume binding:
//   - a bound claim: the PersistentVolume's required node affinity;
//   - an unbound claim whose StorageClass waits for the first consumer: the
//     class's allowedTopologies, or anywhere when it has none;
//   - an unbound claim of an Immediate class, or of no class, waits for the
//     volume controller to bind it; a node launched before that could be in
//     the wrong zone, so the pod waits too;
//   - a missing claim, volume or class, a claim being deleted or lost, and
//     an ephemeral claim that another pod owns, block the pod.
//
// A generic ephemeral volume's claim (named <pod>-<volume>) is read from
// the pod's template until the ephemeral controller creates it. A pod
// already on a node does not keep its ephemeral volumes' topology: moved,
// it is a new pod with new claims.
func (ix *Index) Resolve(pod *corev1.Pod) (Needs, error) {
	var needs Needs
	var alternatives [][]corev1.NodeSelectorTerm
	seen := map[Attachment]bool{}
	claims := map[string]bool{}
	attach := func(a Attachment) {
		if a.Driver != "" && !seen[a] {
			seen[a] = true
			needs.Attachments = append(needs.Attachments, a)
		}
	}
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		var claimName string
		var template *corev1.PersistentVolumeClaimTemplate
		switch {
		case vol.PersistentVolumeClaim != nil:
			claimName = vol.PersistentVolumeClaim.ClaimName
		case vol.Ephemeral != nil:
			claimName = ephemeral.VolumeClaimName(pod, vol)
			template = vol.Ephemeral.VolumeClaimTemplate
		default:
			attach(inlineAttachment(vol, pod.Namespace))
			continue
		}
		if claims[claimName] {
			continue
		}
		claims[claimName] = true
		claim, err := ix.claim(pod, claimName, template)
		if err != nil {
			return Needs{}, err
		}
		if claim == nil {
			continue
		}
		terms, driver, err := ix.claimNeeds(claim)
		if err != nil {
			return Needs{}, err
		}
		attach(Attachment{Driver: driver, Handle: "claim:" + claim.Namespace + "/" + claim.Name})
		if template != nil && pod.Spec.NodeName != "" {
			continue
		}
		if len(terms) > 0 {
			alternatives = append(alternatives, terms)
		}
	}
	for _, terms := range alternatives {
		combined, err := and(needs.Terms, terms)
		if err != nil {
			return Needs{}, err
		}
		needs.Terms = combined
	}
	sort.Slice(needs.Attachments, func(i, j int) bool {
		a, b := needs.Attachments[i], needs.Attachments[j]
		return a.Driver < b.Driver || a.Driver == b.Driver && a.Handle < b.Handle
	})
	return needs, nil
}

// claim finds the pod's claim, or stands in the claim a generic ephemeral
// volume will get. It returns nil when a partial index lacks it.
func (ix *Index) claim(pod *corev1.Pod, name string, template *corev1.PersistentVolumeClaimTemplate) (*corev1.PersistentVolumeClaim, error) {
	claim := ix.claims[pod.Namespace+"/"+name]
	switch {
	case claim == nil && template != nil:
		meta := *template.ObjectMeta.DeepCopy()
		meta.Name, meta.Namespace = name, pod.Namespace
		return &corev1.PersistentVolumeClaim{ObjectMeta: meta, Spec: *template.Spec.DeepCopy()}, nil
	case claim == nil && ix.Partial:
		return nil, nil
	case claim == nil:
		return nil, fmt.Errorf("persistentvolumeclaim %q not found; create it or fix the pod's volumes", name)
	case template != nil && pod.UID != "":
		if err := ephemeral.VolumeIsForPod(pod, claim); err != nil {
			return nil, err
		}
	}
	if claim.DeletionTimestamp != nil {
		return nil, fmt.Errorf("persistentvolumeclaim %q is being deleted", name)
	}
	if claim.Status.Phase == corev1.ClaimLost {
		return nil, fmt.Errorf("persistentvolumeclaim %q is Lost: its persistentvolume %q no longer exists", name, claim.Spec.VolumeName)
	}
	return claim, nil
}

// claimNeeds returns the node selector terms and CSI driver of a claim.
func (ix *Index) claimNeeds(claim *corev1.PersistentVolumeClaim) ([]corev1.NodeSelectorTerm, string, error) {
	if name := claim.Spec.VolumeName; name != "" {
		pv := ix.volumes[name]
		switch {
		case pv == nil && ix.Partial:
			return nil, "", nil
		case pv == nil:
			return nil, "", fmt.Errorf("persistentvolume %q of persistentvolumeclaim %q not found", name, claim.Name)
		case pv.DeletionTimestamp != nil:
			return nil, "", fmt.Errorf("persistentvolume %q of persistentvolumeclaim %q is being deleted", name, claim.Name)
		}
		return volumeTerms(pv), volumeDriver(pv), nil
	}
	className := volume.GetPersistentVolumeClaimClass(claim)
	var class *storagev1.StorageClass
	switch {
	case className != "":
		class = ix.classes[className]
	case claim.Spec.StorageClassName == nil:
		// A claim written without a class gets the default one, at once or
		// (since Kubernetes 1.28) when a default appears.
		class = ix.defaultClass
	}
	switch {
	case class == nil && ix.Partial:
		return nil, "", nil
	case class == nil && className != "":
		return nil, "", fmt.Errorf("storageclass %q of persistentvolumeclaim %q not found", className, claim.Name)
	case class == nil:
		return nil, "", fmt.Errorf("persistentvolumeclaim %q is not bound and has no StorageClass; waiting for a persistentvolume to bind it", claim.Name)
	case class.VolumeBindingMode == nil || *class.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer:
		return nil, "", fmt.Errorf("persistentvolumeclaim %q is not bound and its StorageClass %q binds Immediately; waiting for its volume to be provisioned, which decides the zone", claim.Name, class.Name)
	}
	var terms []corev1.NodeSelectorTerm
	for _, t := range class.AllowedTopologies {
		var term corev1.NodeSelectorTerm
		for _, e := range t.MatchLabelExpressions {
			term.MatchExpressions = append(term.MatchExpressions, corev1.NodeSelectorRequirement{Key: zoneKey(e.Key), Operator: corev1.NodeSelectorOpIn, Values: append([]string{}, e.Values...)})
		}
		terms = append(terms, term)
	}
	return terms, provisionerDriver(class.Provisioner), nil
}

// volumeTerms is the PersistentVolume's required node affinity, with zone
// keys under their well-known names.
func volumeTerms(pv *corev1.PersistentVolume) []corev1.NodeSelectorTerm {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return nil
	}
	var out []corev1.NodeSelectorTerm
	for _, t := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		term := *t.DeepCopy()
		for i := range term.MatchExpressions {
			term.MatchExpressions[i].Key = zoneKey(term.MatchExpressions[i].Key)
		}
		out = append(out, term)
	}
	return out
}

func zoneKey(k string) string {
	if n, ok := zoneKeys[k]; ok {
		return n
	}
	return k
}

var translator = csitrans.New()

// volumeDriver is the CSI driver that attaches the volume, in-tree plugins
// translated as CSI migration does; "" when nothing attaches (NFS, local).
func volumeDriver(pv *corev1.PersistentVolume) string {
	if pv.Spec.CSI != nil {
		return pv.Spec.CSI.Driver
	}
	if translator.IsPVMigratable(pv) {
		if plugin, err := translator.GetInTreePluginNameFromSpec(pv, nil); err == nil {
			if driver, err := translator.GetCSINameFromInTreeName(plugin); err == nil {
				return driver
			}
		}
	}
	return ""
}

// provisionerDriver is the CSI driver behind a StorageClass provisioner.
func provisionerDriver(provisioner string) string {
	if translator.IsMigratableIntreePluginByName(provisioner) {
		if driver, err := translator.GetCSINameFromInTreeName(provisioner); err == nil {
			return driver
		}
	}
	return provisioner
}

// inlineAttachment is the attachment of an in-tree volume written in the
// pod itself (awsElasticBlockStore, ...), or none.
// Constrains reports whether a volume can bear on where its pod runs: a
// claim (its volume's zone, its attachment) or an in-tree volume that
// attaches. Projected, ConfigMap, Secret, emptyDir and the like cannot,
// and the controller's cache leaves them out.
func Constrains(vol *corev1.Volume) bool {
	return vol.PersistentVolumeClaim != nil || vol.Ephemeral != nil || translator.IsInlineMigratable(vol)
}

func inlineAttachment(vol *corev1.Volume, namespace string) Attachment {
	if !translator.IsInlineMigratable(vol) {
		return Attachment{}
	}
	pv, err := translator.TranslateInTreeInlineVolumeToCSI(klog.Background(), vol, namespace)
	if err != nil || pv.Spec.CSI == nil {
		return Attachment{}
	}
	return Attachment{Driver: pv.Spec.CSI.Driver, Handle: "inline:" + pv.Spec.CSI.VolumeHandle}
}

// and returns the terms that match where both a and b match: every pair
// of terms merged. nil a or b matches everywhere.
func and(a, b []corev1.NodeSelectorTerm) ([]corev1.NodeSelectorTerm, error) {
	if len(a) == 0 {
		return b, nil
	}
	if len(b) == 0 {
		return a, nil
	}
	if len(a)*len(b) > maxTerms {
		return nil, fmt.Errorf("the pod's node affinity and volumes combine into %d alternative node selector terms, more than %d", len(a)*len(b), maxTerms)
	}
	out := make([]corev1.NodeSelectorTerm, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			var t corev1.NodeSelectorTerm
			t.MatchExpressions = append(append(t.MatchExpressions, x.MatchExpressions...), y.MatchExpressions...)
			t.MatchFields = append(append(t.MatchFields, x.MatchFields...), y.MatchFields...)
			out = append(out, *t.DeepCopy())
		}
	}
	return out, nil
}

// WithTopology returns the pod, or a copy whose required node affinity also
// requires terms (ANDed into each of its own terms), so that every
// consumer of the pod's node affinity (the planner, the replay of
// kube-scheduler) keeps it where its volumes are. The pod is not changed.
func WithTopology(pod *corev1.Pod, terms []corev1.NodeSelectorTerm) (*corev1.Pod, error) {
	if len(terms) == 0 {
		return pod, nil
	}
	var own []corev1.NodeSelectorTerm
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		own = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	}
	combined, err := and(own, terms)
	if err != nil {
		return nil, err
	}
	cp := pod.DeepCopy()
	if cp.Spec.Affinity == nil {
		cp.Spec.Affinity = &corev1.Affinity{}
	}
	if cp.Spec.Affinity.NodeAffinity == nil {
		cp.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	cp.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: combined}
	return cp, nil
}

// Usage is what planning needs of a pod's volumes besides their topology,
// which WithTopology puts in the pod.
type Usage struct {
	// Attachments are the volumes the pod attaches to its node.
	Attachments []Attachment
	// Problem says why the pod's volumes cannot be resolved; the pod is
	// not placed, for this reason.
	Problem string
	// Injected says the pod planning sees carries its volumes' topology
	// in its required node affinity, and OwnAffinity is that affinity as
	// the user wrote it (nil: none). kube-scheduler's topology spread
	// (nodeAffinityPolicy Honor) counts the nodes matching the pod's own
	// affinity, not where its volumes are, so the planner must too.
	Injected    bool
	OwnAffinity *corev1.NodeSelector
}

// Apply returns pods as planning must see them: each carries its volumes'
// topology in its required node affinity (a copy, for a pod with such
// volumes; the pod itself is not changed), and usage records, by
// namespace/name, what each attaches or why its volumes cannot be
// resolved. Pods already on nodes need it as much as pending ones:
// consolidation moves them, and a pod whose disk is in zone b must never be
// planned into zone a.
func (ix *Index) Apply(pods []*corev1.Pod, usage map[string]Usage) []*corev1.Pod {
	out := make([]*corev1.Pod, len(pods))
	for i, pod := range pods {
		out[i] = pod
		if len(pod.Spec.Volumes) == 0 {
			continue
		}
		needs, err := ix.Resolve(pod)
		var cp *corev1.Pod
		if err == nil {
			if cp, err = WithTopology(pod, needs.Terms); err == nil {
				out[i] = cp
			}
		}
		u := Usage{Attachments: needs.Attachments}
		if err == nil && cp != pod {
			u.Injected = true
			if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
				u.OwnAffinity = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
			}
		}
		if err != nil {
			u = Usage{Problem: err.Error()}
		}
		if len(u.Attachments) > 0 || u.Problem != "" || u.Injected {
			usage[pod.Namespace+"/"+pod.Name] = u
		}
	}
	return out
}
