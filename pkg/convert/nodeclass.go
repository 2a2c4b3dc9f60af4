package convert

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Keys of v1alpha1's map selectors that are not tags. Both spellings
// appeared in Karpenter's releases.
var (
	idsKeys    = []string{"aws::ids", "aws-ids"}
	nameKeys   = []string{"aws::name"}
	ownersKeys = []string{"aws::owners"}
)

// maxTerms is the CRDs' MaxItems on selector terms.
const maxTerms = 30

// aliases are the alias families of the AMI families that have one.
var aliases = map[string]string{
	awsv1.AMIFamilyAL2: "al2", awsv1.AMIFamilyAL2023: "al2023", awsv1.AMIFamilyBottlerocket: "bottlerocket",
	awsv1.AMIFamilyWindows2019: "windows2019", awsv1.AMIFamilyWindows2022: "windows2022", awsv1.AMIFamilyWindows2025: "windows2025",
}

func newNodeClass(obj Object) *awsv1.EC2NodeClass {
	nc := &awsv1.EC2NodeClass{TypeMeta: metav1.TypeMeta{APIVersion: awsv1.SchemeGroupVersion.String(), Kind: classKind}}
	nc.ObjectMeta = objectMeta(obj)
	return nc
}

// legacyBlockDevice is v1alpha1's block device mapping, which could also
// name an instance store volume.
type legacyBlockDevice struct {
	awsv1.BlockDeviceMapping `json:",inline"`
	VirtualName              *string `json:"virtualName,omitempty"`
}

// nodeTemplate converts a karpenter.k8s.aws/v1alpha1 AWSNodeTemplate.
func (c *converter) nodeTemplate(ref string, obj Object) *class {
	nc := newNodeClass(obj)
	spec := c.fields(ref, "spec", obj["spec"])
	s := &nc.Spec

	var subnets, groups, amis map[string]string
	if spec.take("subnetSelector", &subnets) {
		for _, t := range c.selectorTerms(ref, "spec.subnetSelector", subnets, false) {
			s.SubnetSelectorTerms = append(s.SubnetSelectorTerms, awsv1.SubnetSelectorTerm{Tags: t.tags, ID: t.id})
		}
	} else {
		c.unmappable(ref, "spec.subnetSelector", "missing: v1 needs subnetSelectorTerms")
	}
	if spec.take("securityGroupSelector", &groups) {
		for _, t := range c.selectorTerms(ref, "spec.securityGroupSelector", groups, false) {
			s.SecurityGroupSelectorTerms = append(s.SecurityGroupSelectorTerms, awsv1.SecurityGroupSelectorTerm{Tags: t.tags, ID: t.id})
		}
	} else {
		c.unmappable(ref, "spec.securityGroupSelector", "missing: v1 needs securityGroupSelectorTerms")
	}

	var family string
	if !spec.take("amiFamily", &family) {
		// v1alpha1's default was AL2, which EKS no longer publishes for
		// new Kubernetes versions; the caller may choose another.
		family = awsv1.AMIFamilyAL2
		if f := c.opts.DefaultAMIFamily; f != "" && f != family {
			family = f
			c.note(ref, "spec.amiFamily", "not set: v1alpha1 meant AL2; --ami-family made it "+f)
		} else {
			c.note(ref, "spec.amiFamily", "not set: v1alpha1 meant AL2, and so does the output; EKS publishes no AL2 images for Kubernetes 1.33 and later, where --ami-family AL2023 picks another family")
		}
	}
	var terms []awsv1.AMISelectorTerm
	if spec.take("amiSelector", &amis) {
		for _, t := range c.selectorTerms(ref, "spec.amiSelector", amis, true) {
			terms = append(terms, awsv1.AMISelectorTerm{Tags: t.tags, ID: t.id, Name: t.name, Owner: t.owner})
		}
	}
	c.amis(ref, "spec.amiFamily", nc, family, terms)

	var profile string
	if spec.take("instanceProfile", &profile) {
		s.InstanceProfile = &profile
	}
	c.identity(ref, "spec.instanceProfile", nc)

	spec.take("userData", &s.UserData)
	spec.take("tags", &s.Tags)
	spec.take("context", &s.Context)
	spec.take("detailedMonitoring", &s.DetailedMonitoring)
	spec.take("associatePublicIpAddress", &s.AssociatePublicIPAddress)
	if spec.take("metadataOptions", &s.MetadataOptions) {
		// v1alpha1 left unset options to EC2, whose default for tokens is
		// optional; v1's CRD would default them to required.
		if m := s.MetadataOptions; m.HTTPTokens == nil {
			m.HTTPTokens = ptr.To("optional")
			c.note(ref, "spec.metadataOptions.httpTokens", "not set: v1alpha1 left it to EC2 (optional), v1 would default it to required; written as optional")
		}
	} else {
		s.MetadataOptions = legacyMetadataOptions()
		c.note(ref, "spec.metadataOptions", "not set: v1alpha1 defaulted httpPutResponseHopLimit to 2 and v1 to 1, which pods without host networking cannot reach IMDS through; written as v1alpha1's defaults, so nodes keep 2")
	}
	var bdms []legacyBlockDevice
	if spec.take("blockDeviceMappings", &bdms) {
		for i, b := range bdms {
			if b.VirtualName != nil {
				c.unmappable(ref, fmt.Sprintf("spec.blockDeviceMappings[%d].virtualName", i), "v1 maps EBS volumes only; instance store volumes are used through spec.instanceStorePolicy")
				continue
			}
			bdm := b.BlockDeviceMapping
			s.BlockDeviceMappings = append(s.BlockDeviceMappings, &bdm)
		}
	}
	if family == "Ubuntu" {
		c.ubuntuRoot(ref, nc)
	}
	if spec.has("launchTemplate") {
		spec.raw("launchTemplate")
		c.unmappable(ref, "spec.launchTemplate", "v1 launches from launch templates it generates; move the template's settings (AMI, user data, block devices, metadata options, security groups) into this class's fields")
	}
	spec.rest("a v1alpha1 AWSNodeTemplate")
	return &class{ref: ref, nc: nc}
}

// nodeClassV1beta1 converts a karpenter.k8s.aws/v1beta1 EC2NodeClass: its
// fields are v1's except that amiSelectorTerms may be empty (the family's
// default images), which v1 spells as an alias.
func (c *converter) nodeClassV1beta1(ref string, obj Object) *class {
	nc := newNodeClass(obj)
	spec := c.fields(ref, "spec", obj["spec"])
	var family string
	spec.take("amiFamily", &family)
	var terms []awsv1.AMISelectorTerm
	spec.take("amiSelectorTerms", &terms)
	if family == "" {
		c.unmappable(ref, "spec.amiFamily", "missing: v1beta1 required it; set the family the nodes run")
	} else {
		c.amis(ref, "spec.amiFamily", nc, family, terms)
	}
	known := map[string]bool{}
	for _, k := range jsonFields(awsv1.EC2NodeClassSpec{}) {
		known[k] = true
	}
	rest := map[string]any{}
	for _, k := range slices.Sorted(maps.Keys(spec.m)) {
		if known[k] && k != "amiSelectorTerms" && k != "amiFamily" {
			rest[k] = spec.raw(k)
		}
	}
	spec.rest("a v1beta1 EC2NodeClass")
	var s awsv1.EC2NodeClassSpec
	if err := decodeStrict(rest, &s); err != nil {
		c.unmappable(ref, "spec", err.Error())
	}
	s.AMIFamily, s.AMISelectorTerms = nc.Spec.AMIFamily, nc.Spec.AMISelectorTerms
	nc.Spec = s
	if s.MetadataOptions == nil {
		nc.Spec.MetadataOptions = legacyMetadataOptions()
		c.note(ref, "spec.metadataOptions", "not set: v1beta1 defaulted httpPutResponseHopLimit to 2 and v1 to 1, which pods without host networking cannot reach IMDS through; written as v1beta1's defaults, so nodes keep 2")
	}
	if family == "Ubuntu" {
		c.ubuntuRoot(ref, nc)
	}
	c.identity(ref, "spec.role", nc)
	return &class{ref: ref, nc: nc}
}

// legacyMetadataOptions are v1alpha1's and v1beta1's defaults for a class
// that set no metadata options: IMDSv2 with a hop limit of 2, which lets
// pods on the pod network reach IMDS. v1's default is 1.
func legacyMetadataOptions() *awsv1.MetadataOptions {
	return &awsv1.MetadataOptions{HTTPEndpoint: ptr.To("enabled"), HTTPProtocolIPv6: ptr.To("disabled"),
		HTTPPutResponseHopLimit: ptr.To(int64(2)), HTTPTokens: ptr.To("required")}
}

// ubuntuRoot keeps the root volume of a class that was Ubuntu: Ubuntu's
// images boot from /dev/sda1, and AL2 (what the class becomes) maps its
// default root volume at /dev/xvda, which those images would not use. A
// class that mapped its own volumes keeps them.
func (c *converter) ubuntuRoot(ref string, nc *awsv1.EC2NodeClass) {
	if nc.Spec.AMIFamily == nil || len(nc.Spec.BlockDeviceMappings) > 0 {
		return
	}
	nc.Spec.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{{
		DeviceName: ptr.To("/dev/sda1"), RootVolume: true,
		EBS: &awsv1.BlockDevice{Encrypted: ptr.To(true), VolumeSize: ptr.To(resource.MustParse("20Gi")), VolumeType: ptr.To("gp3")},
	}}
	c.note(ref, "spec.blockDeviceMappings", "not set: Ubuntu's default root volume was /dev/sda1 (20Gi, gp3, encrypted), which AL2's default (/dev/xvda) would miss; written out")
}

// amis sets amiFamily and amiSelectorTerms: a family without terms meant
// that family's current EKS images, which v1 says with an alias.
func (c *converter) amis(ref, field string, nc *awsv1.EC2NodeClass, family string, terms []awsv1.AMISelectorTerm) {
	if family == "Ubuntu" {
		if len(terms) == 0 {
			c.unmappable(ref, field, "Ubuntu: v1 has no Ubuntu family or alias; select the Ubuntu AMIs with amiSelector (terms) and convert again")
			return
		}
		family = awsv1.AMIFamilyAL2
		c.note(ref, field, "Ubuntu became AL2, whose user data format Ubuntu's EKS images share; check the root volume device name (/dev/sda1 on Ubuntu)")
	}
	if len(terms) > 0 {
		nc.Spec.AMIFamily = &family
		nc.Spec.AMISelectorTerms = terms
		return
	}
	alias, ok := aliases[family]
	if !ok {
		c.unmappable(ref, field, fmt.Sprintf("%s with no AMI selector: v1 needs amiSelectorTerms naming the images", family))
		return
	}
	nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: alias + "@latest"}}
}

// identity fills role or instanceProfile from the options when the source
// had neither: v1 needs exactly one.
func (c *converter) identity(ref, field string, nc *awsv1.EC2NodeClass) {
	s := &nc.Spec
	if s.Role != "" || s.InstanceProfile != nil {
		return
	}
	switch {
	case c.opts.Role != "" && c.opts.InstanceProfile != "":
		c.unmappable(ref, field, "both --role and --instance-profile are set; v1 takes exactly one of spec.role and spec.instanceProfile")
	case c.opts.Role != "":
		s.Role = c.opts.Role
	case c.opts.InstanceProfile != "":
		s.InstanceProfile = ptr.To(c.opts.InstanceProfile)
	default:
		c.unmappable(ref, field, "missing, and v1 has no global default instance profile: pass --role NODE_ROLE (Joiner manages an instance profile for it) or --instance-profile NAME (used as is)")
	}
}

type term struct {
	tags            map[string]string
	id, name, owner string
}

// selectorTerms turns a v1alpha1 map selector into v1 terms. A value with
// commas meant any of the values, so terms multiply out; "" meant any
// value, which v1 writes "*". IDs become one term each and cannot carry
// other filters in v1.
func (c *converter) selectorTerms(ref, field string, sel map[string]string, ami bool) []term {
	sel = maps.Clone(sel)
	ids := popAny(sel, idsKeys)
	var names, owners string
	if ami {
		names, owners = popAny(sel, nameKeys), popAny(sel, ownersKeys)
	}
	if ids != "" {
		if len(sel) > 0 || names != "" || owners != "" {
			c.unmappable(ref, field, "aws::ids is combined with other filters; v1 id terms stand alone: keep only the ids, or only the other filters")
			return nil
		}
		var out []term
		for _, id := range splitList(ids) {
			out = append(out, term{id: id})
		}
		return c.capTerms(ref, field, out)
	}
	for k, v := range sel {
		if strings.HasPrefix(k, "aws::") {
			c.unmappable(ref, field+"["+k+"]", "not a filter convert knows (aws::ids, aws::name and, for AMIs, aws::owners)")
			delete(sel, k)
			continue
		}
		if v == "" {
			sel[k] = "*"
		}
	}
	// Multiply out the comma lists, in key order for a stable output.
	combos := []map[string]string{{}}
	for _, k := range slices.Sorted(maps.Keys(sel)) {
		var next []map[string]string
		for _, v := range splitList(sel[k]) {
			for _, base := range combos {
				m := maps.Clone(base)
				m[k] = v
				next = append(next, m)
			}
		}
		combos = next
	}
	nameList, ownerList := splitList(names), splitList(owners)
	if len(nameList) == 0 {
		nameList = []string{""}
	}
	if len(ownerList) == 0 {
		ownerList = []string{""}
	}
	var out []term
	for _, o := range ownerList {
		for _, n := range nameList {
			for _, tags := range combos {
				t := term{name: n, owner: o}
				if len(tags) > 0 {
					t.tags = tags
				}
				if t.tags == nil && t.name == "" {
					c.unmappable(ref, field, "aws::owners alone selects every image of the owner; add aws::name or tags")
					return nil
				}
				out = append(out, t)
			}
		}
	}
	return c.capTerms(ref, field, out)
}

func (c *converter) capTerms(ref, field string, ts []term) []term {
	if len(ts) > maxTerms {
		c.unmappable(ref, field, fmt.Sprintf("becomes %d selector terms, over v1's limit of %d; select with fewer comma-separated values", len(ts), maxTerms))
		return nil
	}
	return ts
}

func popAny(m map[string]string, keys []string) string {
	var out []string
	for _, k := range keys {
		if v, ok := m[k]; ok {
			out = append(out, v)
			delete(m, k)
		}
	}
	return strings.Join(out, ",")
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// jsonFields are the JSON names of a struct's fields.
func jsonFields(v any) []string {
	var out []string
	t := reflect.TypeOf(v)
	for i := 0; i < t.NumField(); i++ {
		n, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if n != "" && n != "-" {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}
