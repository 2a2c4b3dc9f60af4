package fakeaws_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
	"github.com/joiner-autoscaler/joiner/internal/fakeaws"
)

// controllerPolicy is a controller policy in the shape of Karpenter's
// published one, cut to the statements the cases below need.
const controllerPolicy = `{
  "Version": "2012-10-17",
  "Statement": [
    {"Sid": "SSM", "Effect": "Allow", "Action": "ssm:GetParameter", "Resource": "arn:aws:ssm:us-east-1::parameter/aws/service/*"},
    {"Sid": "Profiles", "Effect": "Allow", "Action": "iam:CreateInstanceProfile", "Resource": "arn:aws:iam::123456789012:instance-profile/*",
     "Condition": {"StringEquals": {"aws:RequestTag/kubernetes.io/cluster/demo": "owned", "aws:RequestTag/eks:eks-cluster-name": "demo"}}},
    {"Sid": "TagAfterLaunch", "Effect": "Allow", "Action": "ec2:CreateTags", "Resource": "arn:aws:ec2:us-east-1:*:instance/*",
     "Condition": {"StringEquals": {"aws:ResourceTag/kubernetes.io/cluster/demo": "owned"},
                   "ForAllValues:StringEquals": {"aws:TagKeys": ["karpenter.sh/nodeclaim", "Name"]}}},
    {"Sid": "Cluster", "Effect": "Allow", "Action": "eks:DescribeCluster", "Resource": "arn:aws:eks:us-east-1:123456789012:cluster/demo"},
    {"Sid": "Reads", "Effect": "Allow", "Action": "ec2:DescribeInstances", "Resource": "*",
     "Condition": {"StringEquals": {"aws:RequestedRegion": "us-east-1"}}}
  ]
}`

// Under IAMEnforce each call is authorized as AWS would for the identity
// that signed it: a role's session from AssumeRoleWithWebIdentity (IRSA's
// call), with the role's policies, their resources and their conditions.
func TestIAMEnforce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f, err := fakeaws.Start(ctx, fakeaws.Options{ClusterName: "demo", Region: region, Listen: "127.0.0.1:0",
		IAMEnforce: true, IAMSimulateModules: cluster.Bins.IAMSim, Kubeconfig: cluster.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	admin := f.AdminCredentials()
	if admin.AccessKeyID == "" {
		t.Fatal("no administrator credentials")
	}
	cfg := func(creds aws.CredentialsProvider) aws.Config {
		return aws.Config{Region: region, Credentials: creds, BaseEndpoint: aws.String(f.URL())}
	}
	adminCfg := cfg(credentials.NewStaticCredentialsProvider(admin.AccessKeyID, admin.SecretAccessKey, ""))

	// The administrator makes the controller's role and an instance of the
	// cluster's, as the guide's stack and an earlier launch would.
	adminIAM, adminEC2 := iam.NewFromConfig(adminCfg), ec2.NewFromConfig(adminCfg)
	// The local API server's issuer stands for the cluster's OIDC issuer;
	// the trust policy is eksctl's for kube-system/iam-enforce.
	const issuer = "kubernetes.default.svc.cluster.local"
	must(adminIAM.CreateOpenIDConnectProvider(ctx, &iam.CreateOpenIDConnectProviderInput{Url: aws.String("https://" + issuer),
		ClientIDList: []string{"sts.amazonaws.com"}, ThumbprintList: []string{strings.Repeat("0", 40)}}))(t)
	role := must(adminIAM.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("demo-karpenter"),
		AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Federated":"arn:aws:iam::123456789012:oidc-provider/` + issuer + `"},"Action":"sts:AssumeRoleWithWebIdentity",` +
			`"Condition":{"StringEquals":{"` + issuer + `:sub":"system:serviceaccount:kube-system:iam-enforce","` + issuer + `:aud":"sts.amazonaws.com"}}}]}`)}))(t)
	must(adminIAM.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String("demo-karpenter"), PolicyName: aws.String("controller"), PolicyDocument: aws.String(controllerPolicy)}))(t)
	images := must(adminEC2.DescribeImages(ctx, &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("architecture"), Values: []string{"x86_64"}}}}))(t)
	launched := must(adminEC2.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: images.Images[0].ImageId, MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{{Key: aws.String("kubernetes.io/cluster/demo"), Value: aws.String("owned")}}}}}))(t)
	instance := aws.ToString(launched.Instances[0].InstanceId)
	volume := "vol-0123456789abcdef0"

	// IRSA: the SDK trades the web identity token for the role's session.
	// A token of another service account is refused by the trust policy.
	anonSTS := sts.NewFromConfig(cfg(aws.AnonymousCredentials{}))
	if _, err := anonSTS.AssumeRoleWithWebIdentity(ctx, &sts.AssumeRoleWithWebIdentityInput{RoleArn: role.Role.Arn, RoleSessionName: aws.String("joiner"),
		WebIdentityToken: aws.String(serviceAccountToken(t, "kube-system", "other", "sts.amazonaws.com"))}); err == nil || !strings.Contains(err.Error(), "trust policy allows no") {
		t.Fatalf("a token of kube-system/other got a session of the role: %v", err)
	}
	out := must(anonSTS.AssumeRoleWithWebIdentity(ctx, &sts.AssumeRoleWithWebIdentityInput{RoleArn: role.Role.Arn, RoleSessionName: aws.String("joiner"),
		WebIdentityToken: aws.String(serviceAccountToken(t, "kube-system", "iam-enforce", "sts.amazonaws.com"))}))(t)
	sessionCfg := cfg(credentials.NewStaticCredentialsProvider(aws.ToString(out.Credentials.AccessKeyId), aws.ToString(out.Credentials.SecretAccessKey), aws.ToString(out.Credentials.SessionToken)))
	session := struct {
		ssm *ssm.Client
		iam *iam.Client
		ec2 *ec2.Client
		eks *eks.Client
	}{ssm.NewFromConfig(sessionCfg), iam.NewFromConfig(sessionCfg), ec2.NewFromConfig(sessionCfg), eks.NewFromConfig(sessionCfg)}
	ownedTags := []iamtypes.Tag{{Key: aws.String("kubernetes.io/cluster/demo"), Value: aws.String("owned")}, {Key: aws.String("eks:eks-cluster-name"), Value: aws.String("demo")}}
	nameTag := []ec2types.Tag{{Key: aws.String("Name"), Value: aws.String("ip-10-0-0-1.ec2.internal")}}

	cases := []struct {
		name string
		call func() error
		// denied is the refused action; empty when the call is allowed.
		denied string
	}{
		{"ssm:GetParameter on a public parameter", func() error {
			_, err := session.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id")})
			return err
		}, ""},
		{"ssm:GetParameters is another action", func() error {
			_, err := session.ssm.GetParameters(ctx, &ssm.GetParametersInput{Names: []string{"/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id"}})
			return err
		}, "ssm:GetParameters"},
		{"a profile with the condition's tags", func() error {
			_, err := session.iam.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("tagged"), Tags: ownedTags})
			return err
		}, ""},
		{"a profile without eks:eks-cluster-name", func() error {
			_, err := session.iam.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("untagged"), Tags: ownedTags[:1]})
			return err
		}, "iam:CreateInstanceProfile"},
		{"naming the cluster's instance", func() error {
			_, err := session.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{instance}, Tags: nameTag})
			return err
		}, ""},
		{"a tag key the condition does not list", func() error {
			_, err := session.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{instance}, Tags: []ec2types.Tag{{Key: aws.String("team"), Value: aws.String("a")}}})
			return err
		}, "ec2:CreateTags"},
		{"tagging a volume after creation", func() error {
			_, err := session.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{instance, volume}, Tags: nameTag})
			return err
		}, "ec2:CreateTags"},
		{"the cluster the policy names", func() error {
			_, err := session.eks.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String("demo")})
			return err
		}, ""},
		{"another cluster", func() error {
			_, err := session.eks.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String("other")})
			return err
		}, "eks:DescribeCluster"},
		{"a read in the policy's region", func() error {
			_, err := session.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
			return err
		}, ""},
		{"a read in another region", func() error {
			_, err := session.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{}, func(o *ec2.Options) { o.Region = "eu-west-1" })
			return err
		}, "ec2:DescribeInstances"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var ae smithy.APIError
			isDenied := errors.As(err, &ae) && (ae.ErrorCode() == "AccessDenied" || ae.ErrorCode() == "AccessDeniedException" || ae.ErrorCode() == "UnauthorizedOperation")
			switch {
			case tc.denied == "" && err != nil:
				t.Fatalf("want it allowed, got %v", err)
			case tc.denied != "" && !isDenied:
				t.Fatalf("want a refusal of %s, got %v", tc.denied, err)
			case tc.denied != "" && !strings.Contains(ae.ErrorMessage(), "perform: "+tc.denied+" ") && !strings.Contains(ae.ErrorMessage(), "perform: "+tc.denied+" on"):
				t.Errorf("the refusal does not name %s: %v", tc.denied, err)
			}
		})
	}

	t.Run("unknown credentials", func(t *testing.T) {
		stranger := ec2.NewFromConfig(cfg(credentials.NewStaticCredentialsProvider("AKIANOBODY", "secret", "")))
		_, err := stranger.DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
		if errorCode(err) != "AuthFailure" {
			t.Errorf("got %v, want AuthFailure", err)
		}
	})
}
