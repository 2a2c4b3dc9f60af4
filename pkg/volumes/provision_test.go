package volumes

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// TestProvision: the volume a claim's provisioner makes lives in the zone
// given, under the driver's zone key, and once the claim is bound to it
// the claim's pods resolve to that zone alone.
func TestProvision(t *testing.T) {
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	ebs := &storagev1.StorageClass{Provisioner: EBSDriver, VolumeBindingMode: &wait}
	ebs.Name = "gp3"
	ebs.Annotations = map[string]string{defaultClassAnnotation: "true"}
	nfs := &storagev1.StorageClass{Provisioner: "example.com/nfs", VolumeBindingMode: &wait,
		AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: zone, Values: []string{"zone-b"}}}}}}
	nfs.Name = "nfs"
	cases := []struct {
		name    string
		claim   *corev1.PersistentVolumeClaim
		zone    string
		key     string
		wantErr string
	}{
		{"an EBS class", unboundClaim("data", ptr("gp3")), "zone-a", EBSZoneKey, ""},
		{"no class: the default one", unboundClaim("data", nil), "zone-a", EBSZoneKey, ""},
		{"another driver", unboundClaim("data", ptr("nfs")), "zone-b", zone, ""},
		{"a zone the class does not allow", unboundClaim("data", ptr("nfs")), "zone-a", "", `StorageClass "nfs" does not allow zone zone-a`},
		{"a class not given", unboundClaim("data", ptr("io2")), "zone-a", "", "has no StorageClass to provision it"},
		{"a bound claim", boundClaim("data", "pv-1"), "zone-a", "", "is bound to"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ix := NewIndex([]*corev1.PersistentVolumeClaim{c.claim}, nil, []*storagev1.StorageClass{ebs, nfs})
			pv, err := ix.Provision(c.claim, c.zone)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v; want one with %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := []corev1.NodeSelectorRequirement{{Key: c.key, Operator: corev1.NodeSelectorOpIn, Values: []string{c.zone}}}
			if got := pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions; !reflect.DeepEqual(got, want) {
				t.Errorf("affinity %v; want %v", got, want)
			}
			bound := c.claim.DeepCopy()
			bound.Spec.VolumeName = pv.Name
			ix.SetVolume(pv)
			ix.SetClaim(bound)
			needs, err := ix.Resolve(pod("p", claimVol("v", "data")))
			if err != nil {
				t.Fatal(err)
			}
			wantTerms := []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: zone, Operator: corev1.NodeSelectorOpIn, Values: []string{c.zone}}}}}
			if !reflect.DeepEqual(needs.Terms, wantTerms) {
				t.Errorf("the claim's pod resolves to %v; want %v", needs.Terms, wantTerms)
			}
		})
	}
}
