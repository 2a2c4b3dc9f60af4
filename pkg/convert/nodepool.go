package convert

import (
	"fmt"
	"strings"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// legacyKubelet is v1alpha5's and v1beta1's kubelet block: v1's plus the
// container runtime, which EKS images no longer let anyone choose.
type legacyKubelet struct {
	awsv1.KubeletConfiguration `json:",inline"`
	ContainerRuntime           *string `json:"containerRuntime,omitempty"`
}

func newNodePool(obj Object) *v1.NodePool {
	np := &v1.NodePool{TypeMeta: metav1.TypeMeta{APIVersion: v1.SchemeGroupVersion.String(), Kind: poolKind}}
	np.ObjectMeta = objectMeta(obj)
	np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{}
	return np
}

// objectMeta keeps what a user writes in metadata: name, labels and
// annotations. The objects are cluster-scoped, so a namespace is dropped.
func objectMeta(obj Object) metav1.ObjectMeta {
	meta, _ := obj["metadata"].(map[string]any)
	var om metav1.ObjectMeta
	om.Name, _ = meta["name"].(string)
	_ = decodeStrict(meta["labels"], &om.Labels)
	_ = decodeStrict(meta["annotations"], &om.Annotations)
	return om
}

// provisioner converts a karpenter.sh/v1alpha5 Provisioner.
func (c *converter) provisioner(ref string, obj Object) *pool {
	np := newNodePool(obj)
	p := &pool{ref: ref, np: np}
	c.pools = append(c.pools, p)
	spec := c.fields(ref, "spec", obj["spec"])
	tmpl := &np.Spec.Template

	var labels, annotations map[string]string
	spec.take("labels", &labels)
	spec.take("annotations", &annotations)
	tmpl.Labels = c.templateLabels(ref, "spec.labels", labels)
	tmpl.Annotations = c.templateAnnotations(ref, "spec.annotations", annotations)
	spec.take("taints", &tmpl.Spec.Taints)
	spec.take("startupTaints", &tmpl.Spec.StartupTaints)

	var reqs []corev1.NodeSelectorRequirement
	spec.take("requirements", &reqs)
	for _, r := range reqs {
		tmpl.Spec.Requirements = append(tmpl.Spec.Requirements, v1.NodeSelectorRequirementWithMinValues{Key: r.Key, Operator: r.Operator, Values: r.Values})
	}
	tmpl.Spec.Requirements = c.requirements(ref, "spec.requirements", tmpl.Spec.Requirements)
	if !c.opts.IgnoreDefaults {
		tmpl.Spec.Requirements = c.alphaDefaults(ref, tmpl.Spec.Requirements, tmpl.Labels)
	}

	if spec.has("kubeletConfiguration") {
		p.kubelet, p.kubeletField = c.kubelet(ref, spec, "kubeletConfiguration"), "spec.kubeletConfiguration"
	}

	if spec.has("provider") {
		spec.raw("provider")
		c.unmappable(ref, "spec.provider", "an inline provider block has no v1 form; move its settings into an AWSNodeTemplate, reference it with spec.providerRef, and convert both")
	}
	if providerRef := spec.sub("providerRef"); providerRef.m != nil {
		var n, kind, apiVersion string
		providerRef.take("name", &n)
		providerRef.take("kind", &kind)
		providerRef.take("apiVersion", &apiVersion)
		providerRef.rest("a v1alpha5 providerRef")
		switch {
		case kind != "" && kind != "AWSNodeTemplate":
			c.unmappable(ref, "spec.providerRef.kind", fmt.Sprintf("%q: only AWSNodeTemplate references convert (to EC2NodeClass)", kind))
		case n == "":
			c.unmappable(ref, "spec.providerRef.name", "empty; name the AWSNodeTemplate")
		default:
			tmpl.Spec.NodeClassRef = &v1.NodeClassReference{Group: awsGroup, Kind: classKind, Name: n}
		}
	} else if tmpl.Spec.NodeClassRef == nil && !c.hasUnmappable(ref, "spec.provider") {
		c.unmappable(ref, "spec.providerRef", "missing: a v1 NodePool needs nodeClassRef; add providerRef naming the AWSNodeTemplate")
	}

	// Disruption: v1alpha5 removed nothing for emptiness or underuse unless
	// asked, so "neither" is consolidateAfter: Never.
	var ttlEmpty, ttlExpired *int64
	spec.take("ttlSecondsAfterEmpty", &ttlEmpty)
	spec.take("ttlSecondsUntilExpired", &ttlExpired)
	var consolidation struct {
		Enabled *bool `json:"enabled,omitempty"`
	}
	spec.take("consolidation", &consolidation)
	consolidate := consolidation.Enabled != nil && *consolidation.Enabled
	d := &np.Spec.Disruption
	switch {
	case consolidate:
		d.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmptyOrUnderutilized
		d.ConsolidateAfter = v1.MustParseNillableDuration("0s")
		if ttlEmpty != nil {
			c.note(ref, "spec.ttlSecondsAfterEmpty", "dropped: consolidation.enabled already removes empty nodes (v1alpha5 refused both together)")
		}
	case ttlEmpty != nil:
		d.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmpty
		d.ConsolidateAfter = v1.MustParseNillableDuration(seconds(*ttlEmpty))
	default:
		d.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmpty
		d.ConsolidateAfter = v1.MustParseNillableDuration(v1.Never)
		c.note(ref, "spec", "no ttlSecondsAfterEmpty or consolidation: v1alpha5 removed no empty or underused nodes, so disruption.consolidateAfter is Never")
	}
	if ttlExpired != nil {
		tmpl.Spec.ExpireAfter = v1.MustParseNillableDuration(seconds(*ttlExpired))
	} else {
		// v1 would default to 720h; v1alpha5 without a TTL never expired.
		tmpl.Spec.ExpireAfter = v1.MustParseNillableDuration(v1.Never)
	}

	if limits := spec.sub("limits"); limits.m != nil {
		raw := limits.m["resources"]
		var rl corev1.ResourceList
		if limits.take("resources", &rl) {
			np.Spec.Limits, p.rawLimits = v1.Limits(rl), raw
		}
		limits.rest("v1alpha5 limits")
	}
	spec.take("weight", &np.Spec.Weight)
	spec.rest("a v1alpha5 Provisioner")
	return p
}

// nodePoolV1beta1 converts a karpenter.sh/v1beta1 NodePool.
func (c *converter) nodePoolV1beta1(ref string, obj Object) *pool {
	np := newNodePool(obj)
	p := &pool{ref: ref, np: np}
	c.pools = append(c.pools, p)
	spec := c.fields(ref, "spec", obj["spec"])
	tmpl := &np.Spec.Template

	template := spec.sub("template")
	if meta := template.sub("metadata"); meta.m != nil {
		var labels, annotations map[string]string
		meta.take("labels", &labels)
		meta.take("annotations", &annotations)
		tmpl.Labels = c.templateLabels(ref, "spec.template.metadata.labels", labels)
		tmpl.Annotations = c.templateAnnotations(ref, "spec.template.metadata.annotations", annotations)
		meta.rest("a v1beta1 NodePool template's metadata")
	}
	ts := template.sub("spec")
	ts.take("taints", &tmpl.Spec.Taints)
	ts.take("startupTaints", &tmpl.Spec.StartupTaints)
	ts.take("requirements", &tmpl.Spec.Requirements)
	if tmpl.Spec.Requirements == nil {
		tmpl.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{}
	}
	tmpl.Spec.Requirements = c.requirements(ref, "spec.template.spec.requirements", tmpl.Spec.Requirements)
	if ts.has("kubelet") {
		p.kubelet, p.kubeletField = c.kubelet(ref, ts, "kubelet"), "spec.template.spec.kubelet"
	}
	if cr := ts.sub("nodeClassRef"); cr.m != nil {
		var n, kind, apiVersion string
		cr.take("name", &n)
		cr.take("kind", &kind)
		cr.take("apiVersion", &apiVersion)
		cr.rest("a v1beta1 nodeClassRef")
		group, _, _ := strings.Cut(apiVersion, "/")
		if group == "" {
			group = awsGroup
		}
		if kind == "" {
			kind = classKind
		}
		if n == "" {
			c.unmappable(ref, "spec.template.spec.nodeClassRef.name", "empty; name the EC2NodeClass")
		} else {
			tmpl.Spec.NodeClassRef = &v1.NodeClassReference{Group: group, Kind: kind, Name: n}
		}
	} else {
		c.unmappable(ref, "spec.template.spec.nodeClassRef", "missing: a v1 NodePool needs nodeClassRef naming its EC2NodeClass")
	}
	ts.rest("a v1beta1 NodePool template's spec")
	template.rest("a v1beta1 NodePool template")

	// v1beta1's defaults were WhenUnderutilized with no consolidateAfter
	// (act at once) and expireAfter 720h, which is v1's default too.
	d := &np.Spec.Disruption
	d.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmptyOrUnderutilized
	d.ConsolidateAfter = v1.MustParseNillableDuration("0s")
	if disruption := spec.sub("disruption"); disruption.m != nil {
		var policy, after, expire string
		disruption.take("consolidationPolicy", &policy)
		switch policy {
		case "", "WhenUnderutilized":
		case string(v1.ConsolidationPolicyWhenEmpty):
			d.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmpty
		default:
			c.unmappable(ref, "spec.disruption.consolidationPolicy", fmt.Sprintf("%q: v1beta1 knew WhenEmpty and WhenUnderutilized", policy))
		}
		if disruption.take("consolidateAfter", &after) {
			if dur, err := v1.ParseNillableDuration(after); err != nil {
				c.unmappable(ref, "spec.disruption.consolidateAfter", err.Error())
			} else {
				d.ConsolidateAfter = dur
			}
		}
		if disruption.take("expireAfter", &expire) {
			if dur, err := v1.ParseNillableDuration(expire); err != nil {
				c.unmappable(ref, "spec.disruption.expireAfter", err.Error())
			} else {
				tmpl.Spec.ExpireAfter = dur
			}
		}
		disruption.take("budgets", &d.Budgets)
		disruption.rest("a v1beta1 NodePool's disruption")
	}
	raw := spec.m["limits"]
	var limits corev1.ResourceList
	if spec.take("limits", &limits) {
		np.Spec.Limits, p.rawLimits = v1.Limits(limits), raw
	}
	spec.take("weight", &np.Spec.Weight)
	spec.rest("a v1beta1 NodePool")
	return p
}

// kubelet takes a legacy kubelet block; a container runtime other than
// containerd cannot be had on v1 images.
func (c *converter) kubelet(ref string, f *fields, key string) *awsv1.KubeletConfiguration {
	var k legacyKubelet
	if !f.take(key, &k) {
		return nil
	}
	if k.ContainerRuntime != nil {
		field := f.field(key) + ".containerRuntime"
		if *k.ContainerRuntime == "containerd" {
			c.note(ref, field, "dropped: containerd is the only runtime, and v1 has no field for it")
		} else {
			c.unmappable(ref, field, fmt.Sprintf("%q: v1 nodes run containerd only", *k.ContainerRuntime))
		}
	}
	out := k.KubeletConfiguration
	return &out
}

func (c *converter) hasUnmappable(ref, field string) bool {
	for _, u := range c.res.Unmappable {
		if u.Object == ref && u.Field == field {
			return true
		}
	}
	return false
}

// seconds writes a legacy TTL in seconds as the shortest exact duration.
func seconds(s int64) string {
	switch {
	case s != 0 && s%3600 == 0:
		return fmt.Sprintf("%dh", s/3600)
	case s != 0 && s%60 == 0:
		return fmt.Sprintf("%dm", s/60)
	default:
		return fmt.Sprintf("%ds", s)
	}
}
