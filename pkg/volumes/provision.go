package volumes

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/component-helpers/storage/volume"
)

// What the rest of the cluster does with claims, for the offline tools
// (joiner plan, joiner simulate) that stand in for it: the StatefulSet
// controller's claims for each pod, and the provisioner's volume for an
// unbound claim. The controller never needs them: it reads what those
// controllers did.

// StatefulClaims gives pod (a pod of sts) the volumes of the set's
// volumeClaimTemplates, claims named <template>-<pod>, as the StatefulSet
// controller does, and returns the claims it creates for them.
func StatefulClaims(sts *appsv1.StatefulSet, pod *corev1.Pod) []*corev1.PersistentVolumeClaim {
	var out []*corev1.PersistentVolumeClaim
	for _, t := range sts.Spec.VolumeClaimTemplates {
		name := StatefulClaimName(t.Name, pod.Name)
		vol := corev1.Volume{Name: t.Name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}}
		replaced := false
		for i := range pod.Spec.Volumes {
			if pod.Spec.Volumes[i].Name == t.Name {
				pod.Spec.Volumes[i], replaced = vol, true
			}
		}
		if !replaced {
			pod.Spec.Volumes = append(pod.Spec.Volumes, vol)
		}
		claim := &corev1.PersistentVolumeClaim{ObjectMeta: *t.ObjectMeta.DeepCopy(), Spec: *t.Spec.DeepCopy()}
		claim.Name, claim.Namespace = name, pod.Namespace
		out = append(out, claim)
	}
	return out
}

// StatefulClaimName is the claim a StatefulSet's volumeClaimTemplate
// template gives its pod pod.
func StatefulClaimName(template, pod string) string { return template + "-" + pod }

// SetClaim adds claim to the index, or replaces the one of its name.
func (ix *Index) SetClaim(claim *corev1.PersistentVolumeClaim) {
	ix.claims[claim.Namespace+"/"+claim.Name] = claim
}

// DeleteClaim removes the claim NAMESPACE/NAME.
func (ix *Index) DeleteClaim(key string) { delete(ix.claims, key) }

// Claim is the claim NAMESPACE/NAME, or nil.
func (ix *Index) Claim(key string) *corev1.PersistentVolumeClaim { return ix.claims[key] }

// SetVolume adds pv to the index, or replaces the one of its name.
func (ix *Index) SetVolume(pv *corev1.PersistentVolume) { ix.volumes[pv.Name] = pv }

// ClassOf is the StorageClass claim is provisioned with: its own, or the
// default for a claim written without one; nil when neither is known.
func (ix *Index) ClassOf(claim *corev1.PersistentVolumeClaim) *storagev1.StorageClass {
	if name := volume.GetPersistentVolumeClaimClass(claim); name != "" {
		return ix.classes[name]
	}
	if claim.Spec.StorageClassName == nil {
		return ix.defaultClass
	}
	return nil
}

// Provision is the volume claim's provisioner creates for it in zone, as
// EBS CSI does: in that zone, reachable only from it, bound to the claim.
// It fails for a claim that is bound already or has no known class.
func (ix *Index) Provision(claim *corev1.PersistentVolumeClaim, zone string) (*corev1.PersistentVolume, error) {
	if claim.Spec.VolumeName != "" {
		return nil, fmt.Errorf("persistentvolumeclaim %q is bound to %q already", claim.Name, claim.Spec.VolumeName)
	}
	class := ix.ClassOf(claim)
	if class == nil {
		return nil, fmt.Errorf("persistentvolumeclaim %q has no StorageClass to provision it; give the StorageClass, or a default one, with the manifests", claim.Name)
	}
	if !zoneAllowed(class, zone) {
		return nil, fmt.Errorf("StorageClass %q does not allow zone %s", class.Name, zone)
	}
	driver := provisionerDriver(class.Provisioner)
	key := corev1.LabelTopologyZone
	if driver == EBSDriver {
		key = EBSZoneKey
	}
	size := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	pv := &corev1.PersistentVolume{}
	pv.Name = "pv-" + claim.Namespace + "-" + claim.Name
	pv.Spec = corev1.PersistentVolumeSpec{
		Capacity:         corev1.ResourceList{corev1.ResourceStorage: size.DeepCopy()},
		AccessModes:      claim.Spec.AccessModes,
		StorageClassName: class.Name,
		ClaimRef:         &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: claim.Namespace, Name: claim.Name},
		PersistentVolumeSource: corev1.PersistentVolumeSource{
			CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: pv.Name},
		},
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}},
		}}}},
	}
	if size.IsZero() {
		pv.Spec.Capacity[corev1.ResourceStorage] = resource.MustParse("1Gi")
	}
	return pv, nil
}

// WaitsForConsumer reports whether claim's class provisions it once a pod
// using it is scheduled (WaitForFirstConsumer), rather than at once.
func (ix *Index) WaitsForConsumer(claim *corev1.PersistentVolumeClaim) bool {
	class := ix.ClassOf(claim)
	return class != nil && class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
}

// Zones are the zones claim's class allows, nil for any.
func (ix *Index) Zones(claim *corev1.PersistentVolumeClaim) []string {
	class := ix.ClassOf(claim)
	if class == nil {
		return nil
	}
	var out []string
	for _, t := range class.AllowedTopologies {
		for _, e := range t.MatchLabelExpressions {
			if zoneKey(e.Key) == corev1.LabelTopologyZone {
				out = append(out, e.Values...)
			}
		}
	}
	return out
}

func zoneAllowed(class *storagev1.StorageClass, zone string) bool {
	if len(class.AllowedTopologies) == 0 {
		return true
	}
	for _, t := range class.AllowedTopologies {
		ok := true
		for _, e := range t.MatchLabelExpressions {
			if zoneKey(e.Key) != corev1.LabelTopologyZone {
				continue
			}
			in := false
			for _, v := range e.Values {
				in = in || v == zone
			}
			ok = ok && in
		}
		if ok {
			return true
		}
	}
	return false
}
