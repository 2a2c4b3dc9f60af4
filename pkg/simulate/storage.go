package simulate

import (
	"fmt"
	"slices"
	"sort"

	"github.com/joiner-autoscaler/joiner/pkg/manifests"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	"github.com/joiner-autoscaler/joiner/pkg/volumes"
	corev1 "k8s.io/api/core/v1"
)

// Storage. A pod's claims decide where it may run: a disk lives in one
// zone. The simulator keeps the claims, volumes and classes as the cluster
// would, doing what the StatefulSet controller and the CSI provisioner do
// (volumes.StatefulClaims, Index.Provision): a StatefulSet pod's claims
// are made with it and outlive it; a claim whose class waits for the
// first consumer gets its volume in the zone of the node its first pod
// lands on, and one of an Immediate class at once, in a zone the class
// allows, chosen by the seed. From then on every plan of the pod, by the
// provisioner or consolidation, is held to that zone through the same
// volumes.Index the controller resolves pods with. Claims, volumes or
// classes the manifests leave out exist elsewhere and constrain nothing
// (as in joiner plan).

// startStorage indexes the manifests' storage and gives the unbound claims
// of Immediate classes their volumes.
func (s *sim) startStorage(objs *manifests.Objects) {
	s.store = volumes.NewIndex(objs.Claims, objs.Volumes, objs.StorageClasses)
	s.store.Partial = true
	s.usage = map[string]volumes.Usage{}
	s.addClaims(objs.Claims)
}

// addClaims adds the claims the index lacks; an unbound claim of an
// Immediate class is provisioned at once.
func (s *sim) addClaims(claims []*corev1.PersistentVolumeClaim) {
	for _, c := range claims {
		key := c.Namespace + "/" + c.Name
		if existing := s.store.Claim(key); existing != nil && existing != c {
			continue
		}
		s.store.SetClaim(c)
		if c.Spec.VolumeName == "" && s.store.ClassOf(c) != nil && !s.store.WaitsForConsumer(c) {
			zones := s.store.Zones(c)
			if len(zones) == 0 {
				zones = s.zones()
			}
			if len(zones) > 0 {
				s.provisionClaim(c, zones[s.rng.Intn(len(zones))])
			}
		}
	}
}

// zones are the zones the pools' offerings are in, sorted.
func (s *sim) zones() []string {
	seen := map[string]bool{}
	var out []string
	for _, name := range sortedKeys(s.poolTypes) {
		for _, it := range s.poolTypes[name] {
			for _, o := range it.Offerings {
				if !seen[o.Zone] {
					seen[o.Zone] = true
					out = append(out, o.Zone)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// bindClaims provisions, in n's zone, the unbound claims of p that wait
// for their first consumer.
func (s *sim) bindClaims(p *simPod, n *simNode) {
	for _, name := range pods.ClaimNames(p.pod) {
		c := s.store.Claim(p.pod.Namespace + "/" + name)
		if c != nil && c.Spec.VolumeName == "" && s.store.WaitsForConsumer(c) {
			s.provisionClaim(c, n.labels[corev1.LabelTopologyZone])
		}
	}
}

// provisionClaim binds c to a new volume in zone, and resolves again the
// pods that use it.
func (s *sim) provisionClaim(c *corev1.PersistentVolumeClaim, zone string) {
	pv, err := s.store.Provision(c, zone)
	if err != nil {
		s.problems = append(s.problems, fmt.Sprintf("at %s: %v", s.now.Sub(s.start), err))
		return
	}
	bound := c.DeepCopy()
	bound.Spec.VolumeName = pv.Name
	bound.Status.Phase = corev1.ClaimBound
	s.store.SetVolume(pv)
	s.store.SetClaim(bound)
	for _, key := range sortedKeys(s.pods) {
		if p := s.pods[key]; p.pod.Namespace == c.Namespace && slices.Contains(pods.ClaimNames(p.pod), c.Name) {
			s.resolve(p)
		}
	}
}

// deleteClaims deletes the claims of StatefulSet o's pod podName, as a
// retention policy of Delete does when the set scales down or goes.
func (s *sim) deleteClaims(o *owner, podName string) {
	for _, t := range o.sts.Spec.VolumeClaimTemplates {
		s.store.DeleteClaim(o.ns + "/" + volumes.StatefulClaimName(t.Name, podName))
	}
}

// resolve works out p's view and usage: what its volumes demand now.
func (s *sim) resolve(p *simPod) {
	p.view = p.pod
	delete(s.usage, p.key)
	constrained := false
	for i := range p.pod.Spec.Volumes {
		constrained = constrained || volumes.Constrains(&p.pod.Spec.Volumes[i])
	}
	if constrained {
		p.view = s.store.Apply([]*corev1.Pod{p.pod}, s.usage)[0]
	}
}

// volumeUsage is the snapshot's Volumes: nil when no pod has any, so
// plans of clusters without volumes build nothing for them.
func (s *sim) volumeUsage() map[string]volumes.Usage {
	if len(s.usage) == 0 {
		return nil
	}
	return s.usage
}
