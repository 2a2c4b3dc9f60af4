package fakeaws

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/smithy-go"
)

// createFleetChecks authorizes an instant fleet as EC2 does: ec2:CreateFleet
// and ec2:RunInstances on every resource it creates (with the tags it puts
// on them, from the request and the launch template) and uses (the launch
// template with its own tags, images, subnets, security groups, the
// capacity reservation and placement group it targets), the
// implicit ec2:CreateTags of each tagged resource, and iam:PassRole of the
// instance profile's role.
func (e *iamEnforcer) createFleetChecks(ctx context.Context, c *call) ([]authCheck, error) {
	specs := formTagSpecs(c.Form)
	spot := c.Form.Get("TargetCapacitySpecification.DefaultTargetCapacityType") == "spot"
	both := []string{"ec2:CreateFleet", "ec2:RunInstances"}
	var out []authCheck
	used := map[string]map[string][]string{} // ARN → context
	created := map[string]map[string]string{"fleet": specs["fleet"], "instance": specs["instance"]}
	var roles []string
	for i := 1; ; i++ {
		prefix := fmt.Sprintf("LaunchTemplateConfigs.%d.", i)
		id, name := c.Form.Get(prefix+"LaunchTemplateSpecification.LaunchTemplateId"), c.Form.Get(prefix+"LaunchTemplateSpecification.LaunchTemplateName")
		if id == "" && name == "" {
			break
		}
		lt, err := e.launchTemplateData(ctx, id, name)
		if err != nil {
			return nil, err
		}
		used[ec2ARN(c.Region, "launch-template", lt.id)] = resourceTags(lt.tags)
		for rt, tags := range lt.tagSpecs {
			if created[rt] == nil {
				created[rt] = map[string]string{}
			}
			for k, v := range tags {
				created[rt][k] = v
			}
		}
		if lt.image != "" {
			used[fmt.Sprintf("arn:aws:ec2:%s::image/%s", c.Region, lt.image)] = nil
		}
		// A targeted reservation and a placement group are resources the
		// launch uses, and EC2 authorizes it on them (a placement group's
		// ARN names it by its name).
		if lt.reservation != "" {
			used[ec2ARN(c.Region, "capacity-reservation", lt.reservation)] = nil
		}
		if lt.placementGroup != "" {
			used[ec2ARN(c.Region, "placement-group", lt.placementGroup)] = nil
		}
		for _, g := range lt.groups {
			used[ec2ARN(c.Region, "security-group", g)] = nil
		}
		if lt.role != "" && !slices.Contains(roles, lt.role) {
			roles = append(roles, lt.role)
		}
		for j := 1; ; j++ {
			o := fmt.Sprintf("%sOverrides.%d.", prefix, j)
			subnet, image := c.Form.Get(o+"SubnetId"), c.Form.Get(o+"ImageId")
			if subnet == "" && image == "" && c.Form.Get(o+"InstanceType") == "" {
				break
			}
			if subnet != "" {
				used[ec2ARN(c.Region, "subnet", subnet)] = nil
			}
			if image != "" {
				used[fmt.Sprintf("arn:aws:ec2:%s::image/%s", c.Region, image)] = nil
			}
		}
	}
	kinds := []string{"fleet", "instance", "volume", "network-interface"}
	if spot {
		kinds = append(kinds, "spot-instances-request")
	}
	for _, kind := range kinds {
		arn := ec2ARN(c.Region, kind, "*")
		for _, a := range both {
			if kind == "fleet" && a == "ec2:RunInstances" {
				continue
			}
			out = append(out, authCheck{Action: a, Resource: arn, Context: requestTags(created[kind])})
		}
		if len(created[kind]) > 0 {
			out = append(out, createTagsAtCreation(arn, created[kind], "CreateFleet"))
		}
	}
	for _, arn := range sortedMapKeys(used) {
		for _, a := range both {
			out = append(out, authCheck{Action: a, Resource: arn, Context: used[arn]})
		}
	}
	for _, role := range roles {
		out = append(out, passRole(role))
	}
	return out, nil
}

// ltData is what a launch template brings to a launch.
type ltData struct {
	id       string
	tags     map[string]string
	image    string
	groups   []string
	tagSpecs map[string]map[string]string // resource type → tags
	role     string                       // the instance profile's role ARN
	// reservation is the capacity reservation the template targets;
	// placementGroup the name of the group it places instances in.
	reservation, placementGroup string
}

func (e *iamEnforcer) launchTemplateData(ctx context.Context, id, name string) (ltData, error) {
	var d ltData
	var err error
	if d.id, d.tags, err = e.launchTemplate(ctx, id, name); err != nil {
		return d, err
	}
	v, err := e.s.motoEC2.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: aws.String(d.id), Versions: []string{"$Default"}})
	if err != nil {
		return d, fmt.Errorf("DescribeLaunchTemplateVersions %s: %w", d.id, err)
	}
	if len(v.LaunchTemplateVersions) == 0 || v.LaunchTemplateVersions[0].LaunchTemplateData == nil {
		return d, fmt.Errorf("launch template %s has no default version", d.id)
	}
	data := v.LaunchTemplateVersions[0].LaunchTemplateData
	d.image = aws.ToString(data.ImageId)
	if spec := data.CapacityReservationSpecification; spec != nil && spec.CapacityReservationTarget != nil {
		d.reservation = aws.ToString(spec.CapacityReservationTarget.CapacityReservationId)
	}
	if pl := data.Placement; pl != nil && (aws.ToString(pl.GroupId) != "" || aws.ToString(pl.GroupName) != "") {
		want := aws.ToString(pl.GroupId)
		if want == "" {
			want = aws.ToString(pl.GroupName)
		}
		e.s.pgs.mu.Lock()
		if g := e.s.pgs.find(want); g != nil {
			d.placementGroup = g.name
		}
		e.s.pgs.mu.Unlock()
	}
	d.groups = append(d.groups, data.SecurityGroupIds...)
	for _, n := range data.NetworkInterfaces {
		d.groups = append(d.groups, n.Groups...)
	}
	d.tagSpecs = map[string]map[string]string{}
	for _, ts := range data.TagSpecifications {
		m := map[string]string{}
		for _, t := range ts.Tags {
			m[aws.ToString(t.Key)] = aws.ToString(t.Value)
		}
		d.tagSpecs[string(ts.ResourceType)] = m
	}
	if p := data.IamInstanceProfile; p != nil && (p.Name != nil || p.Arn != nil) {
		profile := aws.ToString(p.Name)
		if profile == "" {
			profile = aws.ToString(p.Arn)[strings.LastIndex(aws.ToString(p.Arn), "/")+1:]
		}
		got, err := e.s.motoIAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(profile)})
		if err != nil {
			return d, fmt.Errorf("GetInstanceProfile %s: %w", profile, err)
		}
		for _, r := range got.InstanceProfile.Roles {
			d.role = aws.ToString(r.Arn)
		}
	}
	return d, nil
}

// launchTemplate finds a launch template by id or name, with its tags.
func (e *iamEnforcer) launchTemplate(ctx context.Context, id, name string) (string, map[string]string, error) {
	in := &ec2.DescribeLaunchTemplatesInput{}
	if id != "" {
		in.LaunchTemplateIds = []string{id}
	} else {
		in.LaunchTemplateNames = []string{name}
	}
	out, err := e.s.motoEC2.DescribeLaunchTemplates(ctx, in)
	if err != nil || len(out.LaunchTemplates) == 0 {
		return "", nil, fmt.Errorf("launch template %s%s not found: %v", id, name, err)
	}
	lt := out.LaunchTemplates[0]
	return aws.ToString(lt.LaunchTemplateId), ec2TagMap(lt.Tags), nil
}

// ec2Tags are a resource's tags, by its id.
func (e *iamEnforcer) ec2Tags(ctx context.Context, id string) (map[string]string, error) {
	out, err := e.s.motoEC2.DescribeTags(ctx, &ec2.DescribeTagsInput{Filters: []ec2types.Filter{{Name: aws.String("resource-id"), Values: []string{id}}}})
	if err != nil {
		return nil, fmt.Errorf("DescribeTags %s: %w", id, err)
	}
	m := map[string]string{}
	for _, t := range out.Tags {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m, nil
}

// profileTags are an instance profile's tags; none when it does not exist.
func (e *iamEnforcer) profileTags(ctx context.Context, name string) (map[string]string, error) {
	out, err := e.s.motoIAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode() == "NoSuchEntity" {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, t := range out.InstanceProfile.Tags {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m, nil
}

func ec2TagMap(tags []ec2types.Tag) map[string]string {
	m := map[string]string{}
	for _, t := range tags {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m
}

// requestTags are the aws:RequestTag/<key> and aws:TagKeys condition keys.
func requestTags(tags map[string]string) map[string][]string {
	out := map[string][]string{}
	keys := make([]string, 0, len(tags))
	for k, v := range tags {
		out["aws:RequestTag/"+k] = []string{v}
		keys = append(keys, k)
	}
	if len(keys) > 0 {
		sort.Strings(keys)
		out["aws:TagKeys"] = keys
	}
	return out
}

// resourceTags are the aws:ResourceTag/<key> condition keys.
func resourceTags(tags map[string]string) map[string][]string {
	out := map[string][]string{}
	for k, v := range tags {
		out["aws:ResourceTag/"+k] = []string{v}
	}
	return out
}

// createTagsAtCreation is the ec2:CreateTags EC2 authorizes for tags given
// in the creating call itself.
func createTagsAtCreation(arn string, tags map[string]string, createAction string) authCheck {
	vars := requestTags(tags)
	vars["ec2:CreateAction"] = []string{createAction}
	return authCheck{Action: "ec2:CreateTags", Resource: arn, Context: vars}
}

func passRole(role string) authCheck {
	return authCheck{Action: "iam:PassRole", Resource: role, Context: map[string][]string{"iam:PassedToService": {"ec2.amazonaws.com"}}}
}

func ec2ARN(region, kind, id string) string {
	return fmt.Sprintf("arn:aws:ec2:%s:%s:%s/%s", region, accountID, kind, id)
}

func profileARN(name string) string {
	return fmt.Sprintf("arn:aws:iam::%s:instance-profile/%s", accountID, name)
}

func roleARN(name string) string {
	if strings.HasPrefix(name, "arn:") {
		return name
	}
	return fmt.Sprintf("arn:aws:iam::%s:role/%s", accountID, name)
}

func queueARN(region, name string) string {
	return fmt.Sprintf("arn:aws:sqs:%s:%s:%s", region, accountID, name)
}

// parameterARN is an SSM parameter's ARN; AWS's public parameters
// (/aws/service/...) belong to no account.
func parameterARN(region, name string) string {
	if strings.HasPrefix(name, "arn:") {
		return name
	}
	account := accountID
	if strings.HasPrefix(name, "/aws/") {
		account = ""
	}
	return fmt.Sprintf("arn:aws:ssm:%s:%s:parameter/%s", region, account, strings.TrimPrefix(name, "/"))
}

// ec2Type is the ARN resource type of an EC2 id.
func ec2Type(id string) string {
	prefix, _, _ := strings.Cut(id, "-")
	switch prefix {
	case "i":
		return "instance"
	case "vol":
		return "volume"
	case "eni":
		return "network-interface"
	case "lt":
		return "launch-template"
	case "fleet":
		return "fleet"
	case "sir":
		return "spot-instances-request"
	case "sg":
		return "security-group"
	case "subnet":
		return "subnet"
	case "ami":
		return "image"
	}
	return prefix
}

// formList is the values of an EC2 list parameter: Name.1, Name.2, ...
func formList(form url.Values, name string) []string {
	var out []string
	for i := 1; ; i++ {
		v := form.Get(fmt.Sprintf("%s.%d", name, i))
		if v == "" {
			return out
		}
		out = append(out, v)
	}
}

// formTags reads Prefix.N.Key / Prefix.N.Value pairs.
func formTags(form url.Values, prefix string) map[string]string {
	out := map[string]string{}
	for i := 1; ; i++ {
		k := form.Get(fmt.Sprintf("%s.%d.Key", prefix, i))
		if k == "" {
			return out
		}
		out[k] = form.Get(fmt.Sprintf("%s.%d.Value", prefix, i))
	}
}

// formTagSpecs reads TagSpecification.N.{ResourceType,Tag.M.Key,Tag.M.Value}
// by resource type.
func formTagSpecs(form url.Values) map[string]map[string]string {
	out := map[string]map[string]string{}
	for i := 1; ; i++ {
		rt := form.Get(fmt.Sprintf("TagSpecification.%d.ResourceType", i))
		if rt == "" {
			return out
		}
		out[rt] = formTags(form, fmt.Sprintf("TagSpecification.%d.Tag", i))
	}
}

func jsonString(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

func jsonList(m map[string]any, key string) []string {
	var out []string
	list, _ := m[key].([]any)
	for _, v := range list {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
