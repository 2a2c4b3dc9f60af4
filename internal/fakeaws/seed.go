package fakeaws

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// DiscoveryTag is the tag the guides select subnets and security groups by.
const DiscoveryTag = "karpenter.sh/discovery"

// Seed is what Start creates in moto: the cluster's network, node role,
// EKS cluster and interruption queue.
type Seed struct {
	VPCID           string   `json:"vpcId"`
	SubnetIDs       []string `json:"subnetIds"`
	Zones           []string `json:"zones"`
	SecurityGroupID string   `json:"securityGroupId"`
	NodeRoleName    string   `json:"nodeRoleName"`
	NodeRoleARN     string   `json:"nodeRoleArn"`
	ClusterARN      string   `json:"clusterArn"`
	QueueURL        string   `json:"queueUrl"`
}

// seedMoto creates, through moto's own APIs, what a guide's cluster has
// before Joiner is installed.
func (s *Server) seedMoto(ctx context.Context) (Seed, error) {
	name := s.opts.ClusterName
	var seed Seed
	tags := func(rt ec2types.ResourceType, extra ...ec2types.Tag) []ec2types.TagSpecification {
		return []ec2types.TagSpecification{{ResourceType: rt, Tags: append([]ec2types.Tag{
			{Key: aws.String(DiscoveryTag), Value: aws.String(name)},
			{Key: aws.String("kubernetes.io/cluster/" + name), Value: aws.String("owned")},
		}, extra...)}}
	}
	// moto hands out private IPs in order from the subnet's start, and Nodes
	// are named after them: a second octet of its own keeps this run's Node
	// names apart from a previous run's (or another endpoint's) in a cluster
	// that outlives them.
	octet := 1 + rand.IntN(254)
	vpc, err := s.motoEC2.CreateVpc(ctx, &ec2.CreateVpcInput{
		CidrBlock:         aws.String(fmt.Sprintf("10.%d.0.0/16", octet)),
		TagSpecifications: tags(ec2types.ResourceTypeVpc, ec2types.Tag{Key: aws.String("Name"), Value: aws.String(name)}),
	})
	if err != nil {
		return seed, fmt.Errorf("CreateVpc: %w", err)
	}
	seed.VPCID = aws.ToString(vpc.Vpc.VpcId)
	zones, err := s.zoneNames(ctx, s.region)
	if err != nil {
		return seed, err
	}
	for i, suffix := range []string{"a", "b", "c"} {
		zone := s.region + suffix
		found := false
		for _, z := range zones {
			found = found || z == zone
		}
		if !found {
			return seed, fmt.Errorf("region %s has no zone %s (moto knows %v)", s.region, zone, zones)
		}
		sub, err := s.motoEC2.CreateSubnet(ctx, &ec2.CreateSubnetInput{
			VpcId: vpc.Vpc.VpcId, AvailabilityZone: aws.String(zone), CidrBlock: aws.String(fmt.Sprintf("10.%d.%d.0/19", octet, i*32)),
			TagSpecifications: tags(ec2types.ResourceTypeSubnet,
				ec2types.Tag{Key: aws.String("Name"), Value: aws.String(name + "-private-" + zone)},
				ec2types.Tag{Key: aws.String("kubernetes.io/role/internal-elb"), Value: aws.String("1")}),
		})
		if err != nil {
			return seed, fmt.Errorf("CreateSubnet %s: %w", zone, err)
		}
		seed.SubnetIDs = append(seed.SubnetIDs, aws.ToString(sub.Subnet.SubnetId))
		seed.Zones = append(seed.Zones, zone)
	}
	sg, err := s.motoEC2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{
		GroupName: aws.String(name + "-node"), Description: aws.String("Nodes of cluster " + name), VpcId: vpc.Vpc.VpcId,
		TagSpecifications: tags(ec2types.ResourceTypeSecurityGroup, ec2types.Tag{Key: aws.String("Name"), Value: aws.String(name + "-node")}),
	})
	if err != nil {
		return seed, fmt.Errorf("CreateSecurityGroup: %w", err)
	}
	seed.SecurityGroupID = aws.ToString(sg.GroupId)

	seed.NodeRoleName = "KarpenterNodeRole-" + name
	if !s.opts.IAMEnforce { // under IAMEnforce the guide's stack makes it
		trust := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`
		role, err := s.motoIAM.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(seed.NodeRoleName), AssumeRolePolicyDocument: aws.String(trust)})
		if err != nil {
			return seed, fmt.Errorf("CreateRole %s: %w", seed.NodeRoleName, err)
		}
		seed.NodeRoleARN = aws.ToString(role.Role.Arn)
	}

	version := "1.33"
	if s.cluster != nil {
		version = s.cluster.version
	}
	cl, err := s.motoEKS.CreateCluster(ctx, &eks.CreateClusterInput{
		Name: aws.String(name), Version: aws.String(version),
		RoleArn:                 aws.String(fmt.Sprintf("arn:aws:iam::%s:role/%s-cluster", accountID, name)),
		ResourcesVpcConfig:      &ekstypes.VpcConfigRequest{SubnetIds: seed.SubnetIDs, SecurityGroupIds: []string{seed.SecurityGroupID}},
		KubernetesNetworkConfig: &ekstypes.KubernetesNetworkConfigRequest{ServiceIpv4Cidr: aws.String(s.opts.ServiceCIDR)},
	})
	if err != nil {
		return seed, fmt.Errorf("eks CreateCluster: %w", err)
	}
	seed.ClusterARN = aws.ToString(cl.Cluster.Arn)

	if s.opts.IAMEnforce {
		return seed, nil // the guide's stack makes the queue
	}
	q, err := s.motoSQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		return seed, fmt.Errorf("sqs CreateQueue %s: %w", name, err)
	}
	seed.QueueURL = aws.ToString(q.QueueUrl)
	return seed, nil
}

// describeCluster fills in what moto's EKS makes up: the endpoint, CA and
// version of the real cluster, so a bootstrap that asks EKS joins it.
func (s *Server) describeCluster(ctx context.Context, c *call, r *http.Request) *answer {
	a := s.forward(ctx, r, c.Body)
	if a.status != http.StatusOK || s.cluster == nil {
		return a
	}
	var doc map[string]any
	if err := json.Unmarshal(a.body, &doc); err != nil {
		return a
	}
	cl, ok := doc["cluster"].(map[string]any)
	if !ok || cl["name"] != s.opts.ClusterName {
		return a
	}
	cl["endpoint"] = s.cluster.endpoint
	cl["certificateAuthority"] = map[string]any{"data": base64.StdEncoding.EncodeToString(s.cluster.ca)}
	cl["version"] = s.cluster.version
	cl["status"] = "ACTIVE"
	knc, _ := cl["kubernetesNetworkConfig"].(map[string]any)
	if knc == nil {
		knc = map[string]any{}
	}
	knc["serviceIpv4Cidr"] = s.opts.ServiceCIDR
	knc["ipFamily"] = "ipv4"
	cl["kubernetesNetworkConfig"] = knc
	b, err := json.Marshal(doc)
	if err != nil {
		return a
	}
	a.body = b
	return a
}

type zoneInfo struct{ name, id string }

// zoneNames lists a region's zones as moto knows them.
func (s *Server) zoneNames(ctx context.Context, region string) ([]string, error) {
	zs, err := s.zoneInfos(ctx, region)
	names := make([]string, len(zs))
	for i, z := range zs {
		names[i] = z.name
	}
	return names, err
}

func (s *Server) zoneInfos(ctx context.Context, region string) ([]zoneInfo, error) {
	s.mu.Lock()
	zs, ok := s.zones[region]
	s.mu.Unlock()
	if ok {
		return zs, nil
	}
	out, err := s.motoEC2.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{}, func(o *ec2.Options) { o.Region = region })
	if err != nil {
		return nil, fmt.Errorf("DescribeAvailabilityZones in %s: %w", region, err)
	}
	for _, z := range out.AvailabilityZones {
		zs = append(zs, zoneInfo{aws.ToString(z.ZoneName), aws.ToString(z.ZoneId)})
	}
	s.mu.Lock()
	s.zones[region] = zs
	s.mu.Unlock()
	return zs, nil
}

// subnetZone finds a subnet's zone in moto; "" when unknown.
func (s *Server) subnetZone(ctx context.Context, region, id string) string {
	s.mu.Lock()
	z, ok := s.subnets[id]
	s.mu.Unlock()
	if ok {
		return z
	}
	out, err := s.motoEC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{id}}, func(o *ec2.Options) { o.Region = region })
	if err != nil || len(out.Subnets) == 0 {
		return ""
	}
	z = aws.ToString(out.Subnets[0].AvailabilityZone)
	s.mu.Lock()
	s.subnets[id] = z
	s.mu.Unlock()
	return z
}
