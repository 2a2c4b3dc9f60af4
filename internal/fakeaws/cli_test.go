package fakeaws_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// awsCLI runs the AWS CLI, a second client with its own reading of the wire
// formats, against the endpoint, and decodes its JSON output.
func awsCLI(t *testing.T, args ...string) map[string]any {
	t.Helper()
	if _, err := exec.LookPath("aws"); err != nil {
		t.Fatalf("the AWS CLI is needed (pip install awscli): %v", err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("aws", append(args, "--output", "json")...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("aws %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	out := map[string]any{}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("aws %s: output is not JSON: %v\n%s", strings.Join(args, " "), err, stdout.String())
	}
	return out
}

func TestAWSCLI(t *testing.T) {
	ctx := context.Background()
	c := clients(t)
	lt := must(c.EC2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String("cli-test"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{
			ImageId:  aws.String(imageID(t, "/aws/service/bottlerocket/aws-k8s-1.33/x86_64/latest/image_id")),
			UserData: aws.String("W3NldHRpbmdzXQo="),
		},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: []ec2types.Tag{{Key: aws.String("karpenter.k8s.aws/cluster"), Value: aws.String(clusterName)}}}},
	}))(t)
	run := must(c.EC2.RunInstances(ctx, &ec2.RunInstancesInput{
		LaunchTemplate: &ec2types.LaunchTemplateSpecification{LaunchTemplateId: lt.LaunchTemplate.LaunchTemplateId},
		InstanceType:   "m5.large", MinCount: aws.Int32(1), MaxCount: aws.Int32(1), SubnetId: aws.String(fake.Seed().SubnetIDs[1]),
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{{Key: aws.String("karpenter.sh/nodepool"), Value: aws.String("cli")}}}},
	}))(t)
	id := aws.ToString(run.Instances[0].InstanceId)
	t.Cleanup(func() { terminate(t, id) })

	count := func(v any) int { l, _ := v.([]any); return len(l) }
	tests := []struct {
		name  string
		args  []string
		check func(out map[string]any) bool
	}{
		{"describe-subnets", []string{"ec2", "describe-subnets", "--filters", "Name=tag:karpenter.sh/discovery,Values=" + clusterName},
			func(out map[string]any) bool { return count(out["Subnets"]) == 3 }},
		{"describe-instances", []string{"ec2", "describe-instances", "--instance-ids", id},
			func(out map[string]any) bool { return count(out["Reservations"]) == 1 }},
		{"describe-tags", []string{"ec2", "describe-tags", "--filters", "Name=resource-id,Values=" + id, "Name=key,Values=karpenter.sh/nodepool"},
			func(out map[string]any) bool { return count(out["Tags"]) == 1 }},
		{"describe-launch-template-versions", []string{"ec2", "describe-launch-template-versions", "--launch-template-id", aws.ToString(lt.LaunchTemplate.LaunchTemplateId)},
			func(out map[string]any) bool {
				v, _ := out["LaunchTemplateVersions"].([]any)
				return len(v) == 1 && strings.Contains(describe(v[0]), "W3NldHRpbmdzXQo=")
			}},
		{"ssm get-parameter", []string{"ssm", "get-parameter", "--name", "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id"},
			func(out map[string]any) bool {
				return strings.HasPrefix(describe(out["Parameter"]), `{"ARN":"arn:aws:ssm:us-east-1::parameter/aws/service/eks`)
			}},
		// The CLI pins SQS in us-east-1 to its legacy endpoint unless
		// --endpoint-url is given; AWS_ENDPOINT_URL alone is ignored there.
		{"sqs list-queues", []string{"sqs", "list-queues", "--endpoint-url", fake.URL()},
			func(out map[string]any) bool {
				return strings.Contains(describe(out["QueueUrls"]), "/"+clusterName+`"`)
			}},
		{"pricing get-products", []string{"pricing", "get-products", "--service-code", "AmazonEC2", "--filters", "Type=TERM_MATCH,Field=instanceType,Value=m5.large", "Type=TERM_MATCH,Field=regionCode,Value=us-east-1"},
			func(out map[string]any) bool { return count(out["PriceList"]) == 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := awsCLI(t, tt.args...)
			if !tt.check(out) {
				t.Errorf("aws %s:\n%s", strings.Join(tt.args, " "), describe(out))
			}
		})
	}
}
