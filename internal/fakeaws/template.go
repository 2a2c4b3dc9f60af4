package fakeaws

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// applyTemplate gives an instance CreateFleet launched the security groups
// and instance profile of its launch template, as EC2 does. moto's
// CreateFleet leaves the instance in the VPC's default group with no
// profile, which a client comparing its instances with its configuration
// (drift) would read as a change nobody made.
func (s *Server) applyTemplate(ctx context.Context, id, template, version string) error {
	if template == "" {
		return nil
	}
	if version == "" {
		version = "$Latest"
	}
	out, err := s.motoEC2.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{
		LaunchTemplateId: aws.String(template), Versions: []string{version},
	})
	if err != nil {
		return fmt.Errorf("reading launch template %s version %s: %w", template, version, err)
	}
	if len(out.LaunchTemplateVersions) == 0 || out.LaunchTemplateVersions[0].LaunchTemplateData == nil {
		return nil
	}
	data := out.LaunchTemplateVersions[0].LaunchTemplateData
	groups := append([]string{}, data.SecurityGroupIds...)
	for _, ni := range data.NetworkInterfaces {
		if aws.ToInt32(ni.DeviceIndex) == 0 {
			groups = append(groups, ni.Groups...)
		}
	}
	if len(groups) > 0 {
		if _, err := s.motoEC2.ModifyInstanceAttribute(ctx, &ec2.ModifyInstanceAttributeInput{InstanceId: aws.String(id), Groups: groups}); err != nil {
			return fmt.Errorf("giving %s its template's security groups: %w", id, err)
		}
	}
	if p := data.IamInstanceProfile; p != nil && (p.Name != nil || p.Arn != nil) {
		spec := &ec2types.IamInstanceProfileSpecification{Name: p.Name, Arn: p.Arn}
		if _, err := s.motoEC2.AssociateIamInstanceProfile(ctx, &ec2.AssociateIamInstanceProfileInput{InstanceId: aws.String(id), IamInstanceProfile: spec}); err != nil {
			s.log.Error(err, "giving an instance its template's instance profile", "instance", id)
		}
	}
	return nil
}

// templateData is a launch template version's data, by id or name; nil
// when moto has none (moto's own answer to the launch says why).
func (s *Server) templateData(ctx context.Context, id, name, version string) *ec2types.ResponseLaunchTemplateData {
	in := &ec2.DescribeLaunchTemplateVersionsInput{Versions: []string{version}}
	if version == "" {
		in.Versions = []string{"$Latest"}
	}
	if id != "" {
		in.LaunchTemplateId = aws.String(id)
	} else {
		in.LaunchTemplateName = aws.String(name)
	}
	out, err := s.motoEC2.DescribeLaunchTemplateVersions(ctx, in)
	if err != nil || len(out.LaunchTemplateVersions) == 0 {
		return nil
	}
	return out.LaunchTemplateVersions[0].LaunchTemplateData
}
