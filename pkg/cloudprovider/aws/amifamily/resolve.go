package amifamily

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
)

// Instance-type labels an AMI's requirements select on: the accelerated
// variants of the EKS AMIs carry the drivers for one kind of accelerator, and
// the standard variant carries none.
const (
	LabelInstanceGPUCount         = awsv1.Group + "/instance-gpu-count"
	LabelInstanceAcceleratorCount = awsv1.Group + "/instance-accelerator-count"
)

// EC2API is the part of EC2 the resolver calls.
type EC2API interface {
	DescribeImages(ctx context.Context, in *ec2.DescribeImagesInput, opts ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error)
}

// Resolver turns a class's amiSelectorTerms into the AMIs of its status.
// It keeps no cache: the EC2NodeClass controller calls it on every
// reconcile, and a changed SSM value must show up there to drift nodes.
type Resolver struct {
	SSM SSMAPI
	EC2 EC2API
	// Clock decides which AMIs are past their deprecation time; nil is the
	// wall clock.
	Clock clock.PassiveClock
}

// ErrNoAMIs is what the *NoAMIsError Resolve returns when the terms
// matched no usable AMI is (errors.Is).
var ErrNoAMIs = errors.New("no AMIs matched amiSelectorTerms")

// NoAMIsError says the terms matched no usable AMI. It is the user's to
// fix, not an AWS failure to retry, so it names its condition reason
// (Karpenter's AMINotFound), and its message, after Karpenter's, says
// what each term found and what to change.
type NoAMIsError struct {
	// Detail names each term and why it matched nothing, and the fix.
	Detail string
}

func (e *NoAMIsError) Error() string { return "AMISelector did not match any AMIs: " + e.Detail }

// Reason is the AMIsReady condition reason.
func (e *NoAMIsError) Reason() string { return "AMINotFound" }

// Is makes the error ErrNoAMIs.
func (e *NoAMIsError) Is(target error) bool { return target == ErrNoAMIs }

// variant is an accelerator flavour of an EKS-optimized AMI.
type variant string

const (
	variantStandard variant = "standard"
	variantNvidia   variant = "nvidia"
	variantNeuron   variant = "neuron"
)

// requirements select the instance types a variant's drivers serve: the
// standard image only types without accelerators, the nvidia image types
// with GPUs, the neuron image types with Inferentia/Trainium accelerators.
func (v variant) requirements() []corev1.NodeSelectorRequirement {
	switch v {
	case variantNvidia:
		return []corev1.NodeSelectorRequirement{{Key: LabelInstanceGPUCount, Operator: corev1.NodeSelectorOpExists}}
	case variantNeuron:
		return []corev1.NodeSelectorRequirement{{Key: LabelInstanceAcceleratorCount, Operator: corev1.NodeSelectorOpExists}}
	}
	return []corev1.NodeSelectorRequirement{
		{Key: LabelInstanceGPUCount, Operator: corev1.NodeSelectorOpDoesNotExist},
		{Key: LabelInstanceAcceleratorCount, Operator: corev1.NodeSelectorOpDoesNotExist},
	}
}

// ssmPath is one public parameter of an alias and the requirement sets of
// the image it names (one image may serve several accelerator kinds).
type ssmPath struct {
	name string
	reqs [][]corev1.NodeSelectorRequirement
}

func variants(vs ...variant) [][]corev1.NodeSelectorRequirement {
	out := make([][]corev1.NodeSelectorRequirement, 0, len(vs))
	for _, v := range vs {
		out = append(out, v.requirements())
	}
	return out
}

// AliasParameters are the SSM parameter names an alias reads for a
// Kubernetes version ("1.31"), each with the requirement sets of its image.
// Every architecture and accelerator variant the family publishes is listed;
// the ones a region lacks are skipped at resolution.
func AliasParameters(a Alias, k8sVersion string) ([]string, error) {
	paths, err := aliasPaths(a, k8sVersion)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(paths))
	for _, p := range paths {
		names = append(names, p.name)
	}
	return names, nil
}

func aliasPaths(a Alias, k8s string) ([]ssmPath, error) {
	latest := a.Version == AliasVersionLatest
	switch a.Family {
	case awsv1.AMIFamilyAL2023:
		var paths []ssmPath
		for _, av := range []struct {
			arch     string
			variants []variant
		}{
			{"x86_64", []variant{variantStandard, variantNvidia, variantNeuron}},
			{"arm64", []variant{variantStandard, variantNvidia}},
		} {
			for _, v := range av.variants {
				release := "recommended"
				if !latest {
					release = fmt.Sprintf("amazon-eks-node-al2023-%s-%s-%s-%s", av.arch, v, k8s, a.Version)
				}
				paths = append(paths, ssmPath{
					name: fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2023/%s/%s/%s/image_id", k8s, av.arch, v, release),
					reqs: variants(v),
				})
			}
		}
		return paths, nil
	case awsv1.AMIFamilyAL2:
		if minor, ok := kubernetesMinor(k8s); ok && minor >= 33 {
			return nil, fmt.Errorf("alias %q: Amazon Linux 2 AMIs are not published for Kubernetes %s (AL2 ends at 1.32); use al2023 or bottlerocket", a, k8s)
		}
		release := func(infix string) string {
			if latest {
				return "recommended"
			}
			return fmt.Sprintf("amazon-eks-%snode-%s-%s", infix, k8s, a.Version)
		}
		base := "/aws/service/eks/optimized-ami/" + k8s
		return []ssmPath{
			{name: fmt.Sprintf("%s/amazon-linux-2/%s/image_id", base, release("")), reqs: variants(variantStandard)},
			{name: fmt.Sprintf("%s/amazon-linux-2-arm64/%s/image_id", base, release("arm64-")), reqs: variants(variantStandard)},
			// One GPU image carries both the NVIDIA and the Neuron drivers.
			{name: fmt.Sprintf("%s/amazon-linux-2-gpu/%s/image_id", base, release("gpu-")), reqs: variants(variantNvidia, variantNeuron)},
		}, nil
	case awsv1.AMIFamilyBottlerocket:
		// Releases are tagged "v1.20.3" but published as "1.20.3".
		version := strings.TrimPrefix(a.Version, "v")
		base := "/aws/service/bottlerocket/aws-k8s-" + k8s
		return []ssmPath{
			// The standard x86_64 image also carries the Neuron driver.
			{name: fmt.Sprintf("%s/x86_64/%s/image_id", base, version), reqs: variants(variantStandard, variantNeuron)},
			{name: fmt.Sprintf("%s/arm64/%s/image_id", base, version), reqs: variants(variantStandard)},
			{name: fmt.Sprintf("%s-nvidia/x86_64/%s/image_id", base, version), reqs: variants(variantNvidia)},
			{name: fmt.Sprintf("%s-nvidia/arm64/%s/image_id", base, version), reqs: variants(variantNvidia)},
		}, nil
	case awsv1.AMIFamilyWindows2019, awsv1.AMIFamilyWindows2022, awsv1.AMIFamilyWindows2025:
		return []ssmPath{{
			name: fmt.Sprintf("/aws/service/ami-windows-latest/Windows_Server-%s-English-Core-EKS_Optimized-%s/image_id", windowsYear[a.Family], k8s),
			reqs: [][]corev1.NodeSelectorRequirement{{
				{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{string(corev1.Windows)}},
				{Key: corev1.LabelWindowsBuild, Operator: corev1.NodeSelectorOpIn, Values: []string{windowsBuild[a.Family]}},
			}},
		}}, nil
	}
	return nil, fmt.Errorf("alias %q: family %s has no SSM parameters", a, a.Family)
}

func kubernetesMinor(version string) (int, bool) {
	_, minor, ok := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	if !ok {
		return 0, false
	}
	minor, _, _ = strings.Cut(minor, ".")
	n, err := strconv.Atoi(strings.TrimSuffix(minor, "+"))
	return n, err == nil
}

// query is one DescribeImages call made for one selector term.
type query struct {
	term    string
	filters []ec2types.Filter
	owners  []string
	// known holds the requirement sets SSM told us for an image id; images
	// not in it get their architecture only.
	known map[string][][]corev1.NodeSelectorRequirement
	// none says why the term cannot match before any DescribeImages call.
	none string
}

// candidate is an image that won, so far, its requirement set.
type candidate struct {
	ami     awsv1.AMI
	created time.Time
}

// Resolve returns the AMIs of the class's status for the cluster's
// Kubernetes version ("1.31"): for every distinct requirement set (an
// architecture, and for alias families an accelerator kind) the best image,
// where a non-deprecated image beats a deprecated one and then the newest
// wins. A deprecated image is therefore listed only where no current image
// serves its requirements. Terms are ORed; the fields of a term are ANDed.
// The result is ordered newest first.
func (r *Resolver) Resolve(ctx context.Context, nc *awsv1.EC2NodeClass, k8sVersion string) ([]awsv1.AMI, error) {
	if len(nc.Spec.AMISelectorTerms) == 0 {
		return nil, &NoAMIsError{Detail: "spec.amiSelectorTerms is empty; add a term such as {alias: al2023@latest}"}
	}
	queries, err := r.queries(ctx, nc, k8sVersion)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	if r.Clock != nil {
		now = r.Clock.Now()
	}
	best := map[string]candidate{}
	var unmatched []string
	for _, q := range queries {
		if q.none != "" {
			unmatched = append(unmatched, q.term+": "+q.none)
			continue
		}
		found, err := r.describe(ctx, q, now)
		if err != nil {
			return nil, fmt.Errorf("%s: describing images: %w", q.term, err)
		}
		if len(found) == 0 {
			unmatched = append(unmatched, q.term+": "+q.describeNothing())
		}
		for key, c := range found {
			if old, ok := best[key]; !ok || better(c, old) {
				best[key] = c
			}
		}
	}
	if len(best) == 0 {
		return nil, &NoAMIsError{Detail: strings.Join(unmatched, "; ") +
			"; check the images' ids, names, owners and tags in this account and region, or fix the terms"}
	}
	type keyed struct {
		key string
		candidate
	}
	all := make([]keyed, 0, len(best))
	for k, c := range best {
		all = append(all, keyed{k, c})
	}
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if !a.created.Equal(b.created) {
			return a.created.After(b.created)
		}
		if a.ami.ID != b.ami.ID {
			return a.ami.ID < b.ami.ID
		}
		return a.key < b.key
	})
	out := make([]awsv1.AMI, 0, len(all))
	for _, k := range all {
		out = append(out, k.ami)
	}
	return out, nil
}

func (q query) describeNothing() string {
	if len(q.known) > 0 {
		ids := make([]string, 0, len(q.known))
		for id := range q.known {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		return fmt.Sprintf("SSM names %s, but DescribeImages finds no available image with that id", strings.Join(ids, ", "))
	}
	return "DescribeImages finds no available image"
}

// better orders two images competing for one requirement set.
func better(a, b candidate) bool {
	if a.ami.Deprecated != b.ami.Deprecated {
		return !a.ami.Deprecated
	}
	if !a.created.Equal(b.created) {
		return a.created.After(b.created)
	}
	if a.ami.Name != b.ami.Name {
		return a.ami.Name > b.ami.Name
	}
	return a.ami.ID < b.ami.ID
}

// architectures maps EC2's image architectures to kubernetes.io/arch; images
// of other architectures (i386, Mac) cannot run a node and are skipped.
var architectures = map[ec2types.ArchitectureValues]string{
	ec2types.ArchitectureValuesX8664: "amd64",
	ec2types.ArchitectureValuesArm64: "arm64",
}

func (r *Resolver) describe(ctx context.Context, q query, now time.Time) (map[string]candidate, error) {
	in := &ec2.DescribeImagesInput{
		Filters: append(append([]ec2types.Filter{}, q.filters...), ec2types.Filter{
			Name: aws.String("state"), Values: []string{string(ec2types.ImageStateAvailable)},
		}),
		Owners: q.owners,
		// Deprecated images are still launchable and are the fallback when
		// nothing current matches; a class pinned to one must keep working.
		IncludeDeprecated: aws.Bool(true),
		MaxResults:        aws.Int32(1000),
	}
	found := map[string]candidate{}
	pages := ec2.NewDescribeImagesPaginator(r.EC2, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, image := range page.Images {
			arch, ok := architectures[image.Architecture]
			if !ok {
				continue
			}
			id := aws.ToString(image.ImageId)
			sets := q.known[id]
			if len(q.known) > 0 && sets == nil {
				// Not one of the ids SSM named.
				continue
			}
			if sets == nil {
				sets = [][]corev1.NodeSelectorRequirement{nil}
			}
			created := parseTime(aws.ToString(image.CreationDate), time.Time{})
			deprecated := false
			if t := aws.ToString(image.DeprecationTime); t != "" {
				deprecated = !parseTime(t, now.Add(time.Hour)).After(now)
			}
			for _, set := range sets {
				reqs := append([]corev1.NodeSelectorRequirement{{
					Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{arch},
				}}, deepCopy(set)...)
				c := candidate{
					ami: awsv1.AMI{
						ID:           id,
						Name:         aws.ToString(image.Name),
						Deprecated:   deprecated,
						Requirements: reqs,
					},
					created: created,
				}
				key := requirementsKey(reqs)
				if old, ok := found[key]; !ok || better(c, old) {
					found[key] = c
				}
			}
		}
	}
	return found, nil
}

func deepCopy(reqs []corev1.NodeSelectorRequirement) []corev1.NodeSelectorRequirement {
	out := make([]corev1.NodeSelectorRequirement, len(reqs))
	for i := range reqs {
		reqs[i].DeepCopyInto(&out[i])
	}
	return out
}

// requirementsKey identifies a requirement set regardless of its order.
func requirementsKey(reqs []corev1.NodeSelectorRequirement) string {
	parts := make([]string, 0, len(reqs))
	for _, r := range reqs {
		values := append([]string(nil), r.Values...)
		sort.Strings(values)
		parts = append(parts, r.Key+" "+string(r.Operator)+" "+strings.Join(values, ","))
	}
	sort.Strings(parts)
	return strings.Join(parts, ";")
}

func parseTime(s string, otherwise time.Time) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return otherwise
	}
	return t
}

// queries builds one DescribeImages query per term; alias and ssmParameter
// terms read SSM first.
func (r *Resolver) queries(ctx context.Context, nc *awsv1.EC2NodeClass, k8sVersion string) ([]query, error) {
	var out []query
	for i, t := range nc.Spec.AMISelectorTerms {
		term := fmt.Sprintf("amiSelectorTerms[%d]", i)
		switch {
		case t.Alias != "":
			a, err := ParseAlias(t.Alias)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", term, err)
			}
			term += fmt.Sprintf(" (alias %q)", t.Alias)
			if k8sVersion == "" {
				return nil, fmt.Errorf("%s: the cluster's Kubernetes version is unknown, so the alias cannot be resolved", term)
			}
			paths, err := aliasPaths(a, k8sVersion)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", term, err)
			}
			names := make([]string, 0, len(paths))
			for _, p := range paths {
				names = append(names, p.name)
			}
			values, err := r.parameters(ctx, names)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", term, err)
			}
			q := query{term: term, known: map[string][][]corev1.NodeSelectorRequirement{}}
			for _, p := range paths {
				if id, ok := values[p.name]; ok {
					q.known[id] = append(q.known[id], p.reqs...)
				}
			}
			if len(q.known) == 0 {
				q.none = fmt.Sprintf("none of its SSM parameters exist in this region (%s)", strings.Join(names, ", "))
			} else {
				q.filters = []ec2types.Filter{{Name: aws.String("image-id"), Values: slices.Sorted(maps.Keys(q.known))}}
			}
			out = append(out, q)
		case t.ID != "":
			out = append(out, query{
				term:    term + fmt.Sprintf(" (id %q)", t.ID),
				filters: []ec2types.Filter{{Name: aws.String("image-id"), Values: []string{t.ID}}},
			})
		case t.SSMParameter != "":
			term += fmt.Sprintf(" (ssmParameter %q)", t.SSMParameter)
			values, err := r.parameters(ctx, []string{t.SSMParameter})
			if err != nil {
				return nil, fmt.Errorf("%s: %w", term, err)
			}
			q := query{term: term}
			if id, ok := values[t.SSMParameter]; !ok {
				q.none = "the SSM parameter does not exist"
			} else {
				q.filters = []ec2types.Filter{{Name: aws.String("image-id"), Values: []string{id}}}
			}
			out = append(out, q)
		default:
			q := query{}
			var desc []string
			if t.Owner != "" {
				q.owners = []string{t.Owner}
				desc = append(desc, fmt.Sprintf("owner %q", t.Owner))
			}
			if t.Name != "" {
				// A bare name would match any account's public image of that
				// name; without an owner only our own and Amazon's are taken.
				if t.Owner == "" {
					q.owners = []string{"self", "amazon"}
					desc = append(desc, `owner "self,amazon" (the default with a name)`)
				}
				q.filters = append(q.filters, ec2types.Filter{Name: aws.String("name"), Values: []string{t.Name}})
				desc = append(desc, fmt.Sprintf("name %q", t.Name))
			}
			for _, k := range slices.Sorted(maps.Keys(t.Tags)) {
				if v := t.Tags[k]; v == "*" {
					q.filters = append(q.filters, ec2types.Filter{Name: aws.String("tag-key"), Values: []string{k}})
				} else {
					q.filters = append(q.filters, ec2types.Filter{Name: aws.String("tag:" + k), Values: []string{v}})
				}
				desc = append(desc, fmt.Sprintf("tag %s=%s", k, t.Tags[k]))
			}
			q.term = term + " (" + strings.Join(desc, ", ") + ")"
			out = append(out, q)
		}
	}
	return out, nil
}

// parameters reads SSM parameters by name (ReadParameters); names that do
// not exist are left out of the result, and so are values that are not AMI
// ids: an ssmParameter term may name anything.
func (r *Resolver) parameters(ctx context.Context, names []string) (map[string]string, error) {
	values, err := ReadParameters(ctx, r.SSM, names)
	if err != nil {
		return nil, err
	}
	for name, v := range values {
		if !strings.HasPrefix(v, "ami-") {
			delete(values, name)
		}
	}
	return values, nil
}
