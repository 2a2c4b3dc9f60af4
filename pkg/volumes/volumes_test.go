package volumes

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const zone = corev1.LabelTopologyZone

func pod(name string, vols ...corev1.Volume) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid")}, Spec: corev1.PodSpec{Volumes: vols}}
}

func claimVol(name, claim string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
}

func ephemeralVol(name string, class *string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
		VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: class}}}}}
}

func ptr[T any](v T) *T { return &v }

func boundClaim(name, pv string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: pv, StorageClassName: ptr("gp3")},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
}

func unboundClaim(name string, class *string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: class},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}}
}

func csiPV(name, driver string, terms ...corev1.NodeSelectorTerm) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: "vol-" + name}}}}
	if len(terms) > 0 {
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: terms}}
	}
	return pv
}

func term(key string, values ...string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}}}
}

func class(name, provisioner string, mode storagev1.VolumeBindingMode, topo ...string) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner, VolumeBindingMode: &mode}
	if len(topo) > 0 {
		sc.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: topo[0], Values: topo[1:]}}}}
	}
	return sc
}

func TestResolve(t *testing.T) {
	wffc, immediate := storagev1.VolumeBindingWaitForFirstConsumer, storagev1.VolumeBindingImmediate
	ebs := func(handle string) Attachment { return Attachment{Driver: EBSDriver, Handle: handle} }
	cases := []struct {
		name    string
		pod     *corev1.Pod
		claims  []*corev1.PersistentVolumeClaim
		pvs     []*corev1.PersistentVolume
		classes []*storagev1.StorageClass
		partial bool
		terms   []corev1.NodeSelectorTerm
		atts    []Attachment
		err     string
	}{
		{name: "bound claim: the zone of the PV's node affinity",
			pod: pod("p", claimVol("data", "c")), claims: []*corev1.PersistentVolumeClaim{boundClaim("c", "pv")},
			pvs:   []*corev1.PersistentVolume{csiPV("pv", EBSDriver, term(zone, "us-east-1b"))},
			terms: []corev1.NodeSelectorTerm{term(zone, "us-east-1b")}, atts: []Attachment{ebs("claim:ns/c")}},
		{name: "the PV's terms stay ORed",
			pod: pod("p", claimVol("data", "c")), claims: []*corev1.PersistentVolumeClaim{boundClaim("c", "pv")},
			pvs:   []*corev1.PersistentVolume{csiPV("pv", EBSDriver, term(zone, "us-east-1a"), term(zone, "us-east-1c"))},
			terms: []corev1.NodeSelectorTerm{term(zone, "us-east-1a"), term(zone, "us-east-1c")}, atts: []Attachment{ebs("claim:ns/c")}},
		{name: "the EBS CSI zone key is the zone",
			pod: pod("p", claimVol("data", "c")), claims: []*corev1.PersistentVolumeClaim{boundClaim("c", "pv")},
			pvs:   []*corev1.PersistentVolume{csiPV("pv", EBSDriver, term(EBSZoneKey, "us-east-1b"))},
			terms: []corev1.NodeSelectorTerm{term(zone, "us-east-1b")}, atts: []Attachment{ebs("claim:ns/c")}},
		{name: "an in-tree EBS PV attaches through the EBS CSI driver",
			pod: pod("p", claimVol("data", "c")), claims: []*corev1.PersistentVolumeClaim{boundClaim("c", "pv")},
			pvs: []*corev1.PersistentVolume{{ObjectMeta: metav1.ObjectMeta{Name: "pv"}, Spec: corev1.PersistentVolumeSpec{
				PersistentVolumeSource: corev1.PersistentVolumeSource{AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: "vol-1"}},
				NodeAffinity:           &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term("failure-domain.beta.kubernetes.io/zone", "us-east-1a")}}}}}},
			terms: []corev1.NodeSelectorTerm{term(zone, "us-east-1a")}, atts: []Attachment{ebs("claim:ns/c")}},
		{name: "an NFS PV attaches nothing",
			pod: pod("p", claimVol("data", "c")), claims: []*corev1.PersistentVolumeClaim{boundClaim("c", "pv")},
			pvs: []*corev1.PersistentVolume{{ObjectMeta: metav1.ObjectMeta{Name: "pv"}, Spec: corev1.PersistentVolumeSpec{
				PersistentVolumeSource: corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "s", Path: "/"}}}}}},
		{name: "unbound, WaitForFirstConsumer: the class's allowedTopologies",
			pod: pod("p", claimVol("data", "c")), claims: []*corev1.PersistentVolumeClaim{unboundClaim("c", ptr("gp3"))},
			classes: []*storagev1.StorageClass{class("gp3", EBSDriver, wffc, EBSZoneKey, "us-east-1a", "us-east-1b")},
			terms:   []corev1.NodeSelectorTerm{term(zone, "us-east-1a", "us-east-1b")}, atts: []Attachment{ebs("claim:ns/c")}},
		{name: "unbound, WaitForFirstConsumer without allowedTopologies: anywhere; in-tree provisioner translated",
			pod: pod("p", claimVol("data", "c")), claims: []*corev1.PersistentVolumeClaim{unboundClaim("c", ptr("gp2"))},
			classes: []*storagev1.StorageClass{class("gp2", "kubernetes.io/aws-ebs", wffc)},
			atts:    []Attachment{ebs("claim:ns/c")}},
		{name: "a claim without a class takes the default class",
			pod: pod("p", claimVol("data", "c")), claims: []*corev1.PersistentVolumeClaim{unboundClaim("c", nil)},
			classes: []*storagev1.StorageClass{func() *storagev1.StorageClass {
				sc := class("gp3", EBSDriver, wffc, zone, "us-east-1c")
				sc.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
				return sc
			}()},
			terms: []corev1.NodeSelectorTerm{term(zone, "us-east-1c")}, atts: []Attachment{ebs("claim:ns/c")}},
		{name: "unbound, Immediate: wait for the volume",
			pod: pod("p", claimVol("data", "c")), claims: []*corev1.PersistentVolumeClaim{unboundClaim("c", ptr("fast"))},
			classes: []*storagev1.StorageClass{class("fast", EBSDriver, immediate)},
			err:     `persistentvolumeclaim "c" is not bound and its StorageClass "fast" binds Immediately`},
		{name: "unbound with the empty class: wait for a PV",
			pod: pod("p", claimVol("data", "c")), claims: []*corev1.PersistentVolumeClaim{unboundClaim("c", ptr(""))},
			err: `persistentvolumeclaim "c" is not bound and has no StorageClass`},
		{name: "a missing claim",
			pod: pod("p", claimVol("data", "nope")),
			err: `persistentvolumeclaim "nope" not found`},
		{name: "a missing class",
			pod: pod("p", claimVol("data", "c")), claims: []*corev1.PersistentVolumeClaim{unboundClaim("c", ptr("gone"))},
			err: `storageclass "gone" of persistentvolumeclaim "c" not found`},
		{name: "a missing PV",
			pod: pod("p", claimVol("data", "c")), claims: []*corev1.PersistentVolumeClaim{boundClaim("c", "gone")},
			err: `persistentvolume "gone" of persistentvolumeclaim "c" not found`},
		{name: "a claim being deleted",
			pod: pod("p", claimVol("data", "c")), claims: []*corev1.PersistentVolumeClaim{func() *corev1.PersistentVolumeClaim {
				c := boundClaim("c", "pv")
				c.DeletionTimestamp = &metav1.Time{}
				return c
			}()}, pvs: []*corev1.PersistentVolume{csiPV("pv", EBSDriver)},
			err: `persistentvolumeclaim "c" is being deleted`},
		{name: "a lost claim",
			pod: pod("p", claimVol("data", "c")), claims: []*corev1.PersistentVolumeClaim{func() *corev1.PersistentVolumeClaim {
				c := boundClaim("c", "pv")
				c.Status.Phase = corev1.ClaimLost
				return c
			}()},
			err: `persistentvolumeclaim "c" is Lost`},
		{name: "partial index: what it lacks constrains nothing",
			pod: pod("p", claimVol("a", "nope"), claimVol("b", "c")), claims: []*corev1.PersistentVolumeClaim{unboundClaim("c", ptr("gone"))}, partial: true},
		{name: "ephemeral volume before its claim exists: the template's class",
			pod:     pod("p", ephemeralVol("scratch", ptr("gp3"))),
			classes: []*storagev1.StorageClass{class("gp3", EBSDriver, wffc, zone, "us-east-1a")},
			terms:   []corev1.NodeSelectorTerm{term(zone, "us-east-1a")}, atts: []Attachment{ebs("claim:ns/p-scratch")}},
		{name: "ephemeral volume whose claim another pod owns",
			pod: pod("p", ephemeralVol("scratch", ptr("gp3"))),
			claims: []*corev1.PersistentVolumeClaim{func() *corev1.PersistentVolumeClaim {
				c := boundClaim("p-scratch", "pv")
				c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "other", UID: "other-uid", Controller: ptr(true)}}
				return c
			}()},
			err: `was not created for pod ns/p`},
		{name: "ephemeral volume of a pod on a node: moved, it gets a new claim, so no topology",
			pod: func() *corev1.Pod {
				p := pod("p", ephemeralVol("scratch", ptr("gp3")))
				p.Spec.NodeName = "n1"
				return p
			}(),
			claims: []*corev1.PersistentVolumeClaim{func() *corev1.PersistentVolumeClaim {
				c := boundClaim("p-scratch", "pv")
				c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "p-uid", Controller: ptr(true)}}
				return c
			}()},
			pvs:  []*corev1.PersistentVolume{csiPV("pv", EBSDriver, term(zone, "us-east-1b"))},
			atts: []Attachment{ebs("claim:ns/p-scratch")}},
		{name: "two volumes: their terms are ANDed, ORed terms multiply out",
			pod:    pod("p", claimVol("a", "c1"), claimVol("b", "c2")),
			claims: []*corev1.PersistentVolumeClaim{boundClaim("c1", "pv1"), boundClaim("c2", "pv2")},
			pvs: []*corev1.PersistentVolume{csiPV("pv1", EBSDriver, term(zone, "us-east-1a"), term(zone, "us-east-1b")),
				csiPV("pv2", "other.csi.example.com", term("rack", "r1"))},
			terms: []corev1.NodeSelectorTerm{
				{MatchExpressions: append(term(zone, "us-east-1a").MatchExpressions, term("rack", "r1").MatchExpressions...)},
				{MatchExpressions: append(term(zone, "us-east-1b").MatchExpressions, term("rack", "r1").MatchExpressions...)},
			},
			atts: []Attachment{ebs("claim:ns/c1"), {Driver: "other.csi.example.com", Handle: "claim:ns/c2"}}},
		{name: "the same claim twice attaches once",
			pod: pod("p", claimVol("a", "c"), claimVol("b", "c")), claims: []*corev1.PersistentVolumeClaim{boundClaim("c", "pv")},
			pvs:   []*corev1.PersistentVolume{csiPV("pv", EBSDriver, term(zone, "us-east-1b"))},
			terms: []corev1.NodeSelectorTerm{term(zone, "us-east-1b")}, atts: []Attachment{ebs("claim:ns/c")}},
		{name: "an inline in-tree EBS volume attaches",
			pod:  pod("p", corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: "vol-9"}}}),
			atts: []Attachment{ebs("inline:vol-9")}},
		{name: "emptyDir and configMap volumes need nothing",
			pod: pod("p", corev1.Volume{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				corev1.Volume{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ix := NewIndex(tc.claims, tc.pvs, tc.classes)
			ix.Partial = tc.partial
			needs, err := ix.Resolve(tc.pod)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(needs.Terms, tc.terms) {
				t.Errorf("terms %+v, want %+v", needs.Terms, tc.terms)
			}
			if !reflect.DeepEqual(needs.Attachments, tc.atts) {
				t.Errorf("attachments %+v, want %+v", needs.Attachments, tc.atts)
			}
		})
	}
}

func TestWithTopology(t *testing.T) {
	vol := []corev1.NodeSelectorTerm{term(zone, "us-east-1b")}
	t.Run("a pod without node affinity gets the volume's", func(t *testing.T) {
		p := pod("p")
		got, err := WithTopology(p, vol)
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.Affinity != nil {
			t.Fatal("the pod itself was changed")
		}
		if terms := got.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms; !reflect.DeepEqual(terms, vol) {
			t.Fatalf("terms %+v", terms)
		}
	})
	t.Run("the volume's terms are ANDed into each of the pod's ORed terms", func(t *testing.T) {
		p := pod("p")
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{term("arch", "arm64"), term("arch", "amd64")}}}}
		got, err := WithTopology(p, vol)
		if err != nil {
			t.Fatal(err)
		}
		want := []corev1.NodeSelectorTerm{
			{MatchExpressions: append(term("arch", "arm64").MatchExpressions, vol[0].MatchExpressions...)},
			{MatchExpressions: append(term("arch", "amd64").MatchExpressions, vol[0].MatchExpressions...)},
		}
		if terms := got.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms; !reflect.DeepEqual(terms, want) {
			t.Fatalf("terms %+v, want %+v", terms, want)
		}
		if len(p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions) != 1 {
			t.Fatal("the pod itself was changed")
		}
	})
	t.Run("no terms, the same pod", func(t *testing.T) {
		p := pod("p")
		if got, _ := WithTopology(p, nil); got != p {
			t.Fatal("copied a pod that needed nothing")
		}
	})
}
