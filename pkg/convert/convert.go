// Package convert turns Karpenter's legacy manifests (karpenter.sh/v1alpha5
// Provisioner, karpenter.k8s.aws/v1alpha1 AWSNodeTemplate, and the v1beta1
// NodePool and EC2NodeClass) into the v1 NodePools and EC2NodeClasses Joiner
// serves, following the mappings of Karpenter's public upgrade guides.
//
// It is pure: objects in, objects and findings out. What changes meaning is
// reported as a note; what has no v1 form is reported as unmappable, and the
// field is left out, so the caller decides whether that is fatal.
package convert

import (
	"encoding/json"
	"fmt"
	"strings"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// Options are what the legacy manifests cannot say.
type Options struct {
	// Role or InstanceProfile is given to converted EC2NodeClasses whose
	// source names neither: v1alpha1 templates used the global
	// aws.defaultInstanceProfile setting, which v1 no longer has.
	Role            string
	InstanceProfile string
	// DefaultAMIFamily replaces AL2, v1alpha1's default, for templates
	// that name no amiFamily.
	DefaultAMIFamily string
	// IgnoreDefaults leaves out the requirements v1alpha5's webhook added to
	// a Provisioner that did not constrain them (instance category and
	// generation, capacity type, OS, architecture).
	IgnoreDefaults bool
}

// AMIFamilies are the families DefaultAMIFamily may name.
var AMIFamilies = []string{awsv1.AMIFamilyAL2, awsv1.AMIFamilyAL2023, awsv1.AMIFamilyBottlerocket,
	awsv1.AMIFamilyWindows2019, awsv1.AMIFamilyWindows2022, awsv1.AMIFamilyWindows2025}

// Finding is one remark about one field of one input object.
type Finding struct {
	// Object is kind/name of the input object.
	Object string
	// Field is the path of the field in the input object.
	Field   string
	Message string
}

func (f Finding) String() string {
	if f.Field == "" {
		return f.Object + ": " + f.Message
	}
	return f.Object + ": " + f.Field + ": " + f.Message
}

// Result is a conversion's output.
type Result struct {
	// Objects are the v1 objects and the passed-through ones, in input order.
	Objects []Object
	// Notes say where the output means something the input did not spell
	// out, or where a field was dropped because v1 refuses it by design.
	Notes []Finding
	// Unmappable are fields with no v1 form; they are not in Objects.
	Unmappable []Finding
}

// API groups, versions and names of the inputs and outputs.
const (
	coreGroup   = v1.Group    // karpenter.sh
	awsGroup    = awsv1.Group // karpenter.k8s.aws
	v1alpha5    = "v1alpha5"  // Provisioner, Machine
	v1alpha1    = "v1alpha1"  // AWSNodeTemplate
	v1beta1     = "v1beta1"   // NodePool, NodeClaim, EC2NodeClass
	classKind   = "EC2NodeClass"
	poolKind    = "NodePool"
	annDisrupt  = v1.AnnotationDoNotDisrupt
	annEvict    = coreGroup + "/do-not-evict"
	annConsolid = coreGroup + "/do-not-consolidate"
)

// pool is a converted Provisioner or v1beta1 NodePool, with the kubelet
// settings that v1 keeps on its EC2NodeClass.
type pool struct {
	ref     string
	np      *v1.NodePool
	kubelet *awsv1.KubeletConfiguration
	// kubeletField is where the kubelet settings were in the source.
	kubeletField string
	// rawLimits are the limits as written: typed quantities would print
	// 1000 as 1k.
	rawLimits any
}

// class is a converted AWSNodeTemplate or v1beta1 EC2NodeClass; splits are
// copies made for NodePools whose kubelet settings differ.
type class struct {
	ref    string
	nc     *awsv1.EC2NodeClass
	splits []*awsv1.EC2NodeClass
}

type converter struct {
	opts    Options
	res     *Result
	pools   []*pool
	classes map[string]*class
}

// Convert converts every object of in. Objects of other kinds pass through
// unchanged apart from the server-set metadata and status, and the legacy
// do-not-evict and do-not-consolidate annotations on pods, pod templates and
// nodes, which become karpenter.sh/do-not-disrupt.
func Convert(in []Object, opts Options) *Result {
	c := &converter{opts: opts, res: &Result{}, classes: map[string]*class{}}
	// Each input becomes a slot, filled once every NodePool's kubelet
	// settings have found their EC2NodeClass.
	type slot struct {
		obj Object
		p   *pool
		c   *class
	}
	var slots []slot
	for _, obj := range in {
		clean(obj)
		group, version := groupVersion(obj)
		kind, _ := obj["kind"].(string)
		ref := kind + "/" + name(obj)
		switch {
		case group == coreGroup && version == v1alpha5 && kind == "Provisioner":
			slots = append(slots, slot{p: c.provisioner(ref, obj)})
		case group == coreGroup && version == v1beta1 && kind == poolKind:
			slots = append(slots, slot{p: c.nodePoolV1beta1(ref, obj)})
		case group == awsGroup && version == v1alpha1 && kind == "AWSNodeTemplate":
			cl := c.nodeTemplate(ref, obj)
			c.addClass(cl)
			slots = append(slots, slot{c: cl})
		case group == awsGroup && version == v1beta1 && kind == classKind:
			cl := c.nodeClassV1beta1(ref, obj)
			c.addClass(cl)
			slots = append(slots, slot{c: cl})
		case group == coreGroup && (kind == "Machine" || kind == "NodeClaim") && version != "v1":
			c.note(ref, "", "left out: the controller creates NodeClaims from the NodePools; a legacy "+kind+" has no v1 form to apply")
		case (group == coreGroup || group == awsGroup) && version != "v1":
			c.unmappable(ref, "apiVersion", fmt.Sprintf("%s/%s %s is not a kind convert knows; it reads Provisioner (karpenter.sh/v1alpha5), AWSNodeTemplate (karpenter.k8s.aws/v1alpha1), NodePool (karpenter.sh/v1beta1) and EC2NodeClass (karpenter.k8s.aws/v1beta1)", group, version, kind))
		default:
			c.passThrough(ref, obj)
			slots = append(slots, slot{obj: obj})
		}
	}
	c.placeKubelets()
	for _, s := range slots {
		switch {
		case s.p != nil:
			obj := toObject(s.p.np)
			if s.p.rawLimits != nil {
				obj["spec"].(map[string]any)["limits"] = s.p.rawLimits
			}
			c.res.Objects = append(c.res.Objects, obj)
		case s.c != nil:
			c.res.Objects = append(c.res.Objects, toObject(s.c.nc))
			for _, sp := range s.c.splits {
				c.res.Objects = append(c.res.Objects, toObject(sp))
			}
		default:
			c.res.Objects = append(c.res.Objects, s.obj)
		}
	}
	return c.res
}

func (c *converter) addClass(cl *class) {
	if _, dup := c.classes[cl.nc.Name]; dup {
		c.unmappable(cl.ref, "metadata.name", "another input converts to an EC2NodeClass of the same name; keep one of them")
		return
	}
	c.classes[cl.nc.Name] = cl
}

func (c *converter) note(ref, field, msg string) {
	c.res.Notes = append(c.res.Notes, Finding{Object: ref, Field: field, Message: msg})
}

func (c *converter) unmappable(ref, field, msg string) {
	c.res.Unmappable = append(c.res.Unmappable, Finding{Object: ref, Field: field, Message: msg})
}

// placeKubelets moves each NodePool's kubelet settings to its EC2NodeClass.
// NodePools that share a class but disagree get a copy of the class each
// (named <class>-<nodepool>), as Karpenter's v1 guide asks users to do by
// hand: one class cannot hold two kubelet configurations.
func (c *converter) placeKubelets() {
	byClass := map[string][]*pool{}
	var order []string
	for _, p := range c.pools {
		ref := p.np.Spec.Template.Spec.NodeClassRef
		if ref == nil || ref.Group != awsGroup || ref.Kind != classKind {
			if p.kubelet != nil {
				c.unmappable(p.ref, p.kubeletField, "v1 keeps kubelet settings on the EC2NodeClass, and this object references none")
			}
			continue
		}
		if _, seen := byClass[ref.Name]; !seen {
			order = append(order, ref.Name)
		}
		byClass[ref.Name] = append(byClass[ref.Name], p)
	}
	for _, className := range order {
		ps := byClass[className]
		cl := c.classes[className]
		if cl == nil {
			for _, p := range ps {
				if p.kubelet != nil {
					c.unmappable(p.ref, p.kubeletField, fmt.Sprintf("v1 keeps kubelet settings on the EC2NodeClass, and %s is not among the inputs; convert it together with this object (pass both files with -f)", className))
				}
			}
			continue
		}
		// Group the pools by kubelet settings, in input order.
		type group struct {
			kubelet *awsv1.KubeletConfiguration
			pools   []*pool
		}
		var groups []*group
	next:
		for _, p := range ps {
			for _, g := range groups {
				if equality.Semantic.DeepEqual(g.kubelet, p.kubelet) {
					g.pools = append(g.pools, p)
					continue next
				}
			}
			groups = append(groups, &group{kubelet: p.kubelet, pools: []*pool{p}})
		}
		cl.nc.Spec.Kubelet = groups[0].kubelet
		for _, g := range groups[1:] {
			split := cl.nc.DeepCopy()
			split.Name = className + "-" + g.pools[0].np.Name
			if _, taken := c.classes[split.Name]; taken {
				c.unmappable(g.pools[0].ref, g.pools[0].kubeletField, fmt.Sprintf("its kubelet settings differ from other NodePools of %s, and the name for its own copy, %s, is taken; rename one of them", className, split.Name))
				continue
			}
			split.Spec.Kubelet = g.kubelet
			cl.splits = append(cl.splits, split)
			var names []string
			for _, p := range g.pools {
				p.np.Spec.Template.Spec.NodeClassRef.Name = split.Name
				names = append(names, p.np.Name)
			}
			c.note(g.pools[0].ref, g.pools[0].kubeletField, fmt.Sprintf("kubelet settings differ from other NodePools of EC2NodeClass %s; v1 keeps them on the class, so NodePool(s) %s now use a copy of it, EC2NodeClass %s",
				className, strings.Join(names, ", "), split.Name))
		}
	}
}

// toObject renders a typed v1 object as a minimal manifest: no status, no
// nulls and no empty maps, so the apiserver's defaults apply as they would
// to a hand-written manifest.
func toObject(v any) Object {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("marshalling %T: %v", v, err)) // our own types always marshal
	}
	var obj Object
	if err := json.Unmarshal(b, &obj); err != nil {
		panic(err)
	}
	delete(obj, "status")
	prune(obj)
	return obj
}

func prune(m map[string]any) {
	for k, v := range m {
		switch x := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			prune(x)
			if len(x) == 0 {
				delete(m, k)
			}
		case []any:
			for _, it := range x {
				if mm, ok := it.(map[string]any); ok {
					prune(mm)
				}
			}
		}
	}
}

func groupVersion(obj Object) (string, string) {
	av, _ := obj["apiVersion"].(string)
	if g, ver, ok := strings.Cut(av, "/"); ok {
		return g, ver
	}
	return "", av
}

func name(obj Object) string {
	meta, _ := obj["metadata"].(map[string]any)
	n, _ := meta["name"].(string)
	return n
}
