package fakeaws

import (
	"net/url"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// A policy document given as a !Sub JSON string reaches moto as the
// structured document CloudFormation would give IAM, substituted; anything
// else is left for moto.
func TestFixPolicyDocuments(t *testing.T) {
	const template = `Parameters:
  ClusterName:
    Type: String
Resources:
  NodeRole:
    Type: AWS::IAM::Role
    Properties:
      RoleName: !Sub "NodeRole-${ClusterName}"
      Path: /
  Queue:
    Type: AWS::SQS::Queue
    Properties:
      QueueName: !Sub "${ClusterName}"
  Policy:
    Type: AWS::IAM::ManagedPolicy
    Properties:
      ManagedPolicyName: !Sub "Policy-${ClusterName}"
      PolicyDocument: !Sub |
        {"Statement": [
          {"Effect": "Allow", "Action": "iam:PassRole", "Resource": "${NodeRole.Arn}"},
          {"Effect": "Allow", "Action": "sqs:ReceiveMessage", "Resource": "${Queue.Arn}"},
          {"Effect": "Allow", "Action": "ec2:CreateTags", "Resource": "arn:${AWS::Partition}:ec2:${AWS::Region}:*:instance/*",
           "Condition": {"StringEquals": {"aws:ResourceTag/kubernetes.io/cluster/${ClusterName}": "owned"}}}]}
  Structured:
    Type: AWS::IAM::ManagedPolicy
    Properties:
      PolicyDocument:
        Statement:
          - Effect: Allow
            Action: ec2:DescribeImages
            Resource: "*"
`
	form := url.Values{"Action": {"CreateChangeSet"}, "StackName": {"Karpenter-demo"}, "TemplateBody": {template},
		"Parameters.member.1.ParameterKey": {"ClusterName"}, "Parameters.member.1.ParameterValue": {"demo"}}
	c := &call{Service: "cloudformation", Action: "CreateChangeSet", Region: "eu-west-1", Form: form, Body: []byte(form.Encode())}
	body, err := url.ParseQuery(string(fixPolicyDocuments(c)))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(body.Get("TemplateBody")), &doc); err != nil {
		t.Fatal(err)
	}
	props := func(id string) map[string]any {
		return doc["Resources"].(map[string]any)[id].(map[string]any)["Properties"].(map[string]any)
	}
	statements, ok := props("Policy")["PolicyDocument"].(map[string]any)["Statement"].([]any)
	if !ok || len(statements) != 3 {
		t.Fatalf("PolicyDocument is not a structured document: %#v", props("Policy")["PolicyDocument"])
	}
	cases := []struct {
		name string
		got  any
		want string
	}{
		{"a role's Arn", statements[0].(map[string]any)["Resource"], "arn:aws:iam::123456789012:role/NodeRole-demo"},
		{"a queue's Arn", statements[1].(map[string]any)["Resource"], "arn:aws:sqs:eu-west-1:123456789012:demo"},
		{"pseudo parameters", statements[2].(map[string]any)["Resource"], "arn:aws:ec2:eu-west-1:*:instance/*"},
		{"a parameter in a condition key", strings.Join(keys(statements[2].(map[string]any)["Condition"].(map[string]any)["StringEquals"].(map[string]any)), ","), "aws:ResourceTag/kubernetes.io/cluster/demo"},
		{"a structured document is left alone", props("Structured")["PolicyDocument"].(map[string]any)["Statement"].([]any)[0].(map[string]any)["Action"], "ec2:DescribeImages"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
	if !strings.Contains(body.Get("TemplateBody"), `!Sub "NodeRole-${ClusterName}"`) && !strings.Contains(body.Get("TemplateBody"), "!Sub NodeRole-${ClusterName}") {
		t.Errorf("other !Sub values must stay for moto:\n%s", body.Get("TemplateBody"))
	}
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
