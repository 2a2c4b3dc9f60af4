package fakeaws_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/joiner-autoscaler/joiner/internal/fakeaws"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
)

func TestSeeding(t *testing.T) {
	ctx := context.Background()
	c := clients(t)
	discovery := []ec2types.Filter{{Name: aws.String("tag:" + fakeaws.DiscoveryTag), Values: []string{clusterName}}}

	subnets := must(c.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: discovery}))(t)
	zones := map[string]bool{}
	for _, s := range subnets.Subnets {
		zones[aws.ToString(s.AvailabilityZone)] = true
	}
	if len(subnets.Subnets) != 3 || !zones["us-east-1a"] || !zones["us-east-1b"] || !zones["us-east-1c"] {
		t.Errorf("discovery subnets = %s, want one in each of us-east-1a, b and c", describe(subnets.Subnets))
	}
	sgs := must(c.EC2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: discovery}))(t)
	if len(sgs.SecurityGroups) != 1 || aws.ToString(sgs.SecurityGroups[0].GroupId) != fake.Seed().SecurityGroupID {
		t.Errorf("discovery security groups = %s, want the seeded one", describe(sgs.SecurityGroups))
	}
	role := must(c.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("KarpenterNodeRole-" + clusterName)}))(t)
	if !strings.Contains(aws.ToString(role.Role.AssumeRolePolicyDocument), "ec2.amazonaws.com") {
		t.Errorf("node role trust policy = %s, want ec2.amazonaws.com allowed", aws.ToString(role.Role.AssumeRolePolicyDocument))
	}
	q := must(c.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(clusterName)}))(t)
	if aws.ToString(q.QueueUrl) == "" {
		t.Error("no interruption queue")
	}

	cl := must(c.EKS.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(clusterName)}))(t)
	if got := aws.ToString(cl.Cluster.Endpoint); got != cluster.Config.Host {
		t.Errorf("DescribeCluster endpoint = %q, want the cluster's %q", got, cluster.Config.Host)
	}
	ca, err := base64.StdEncoding.DecodeString(aws.ToString(cl.Cluster.CertificateAuthority.Data))
	if err != nil || !bytes.Equal(ca, cluster.Config.CAData) {
		t.Errorf("DescribeCluster certificateAuthority.data is not the cluster's CA (%v)", err)
	}
	if cl.Cluster.KubernetesNetworkConfig == nil || aws.ToString(cl.Cluster.KubernetesNetworkConfig.ServiceIpv4Cidr) != "10.96.0.0/16" {
		t.Errorf("DescribeCluster service CIDR = %s", describe(cl.Cluster.KubernetesNetworkConfig))
	}
}

// product is the part of a Price List document the provider reads.
type product struct {
	Product struct {
		Attributes map[string]string `json:"attributes"`
	} `json:"product"`
	Terms struct {
		OnDemand map[string]struct {
			PriceDimensions map[string]struct {
				Unit         string            `json:"unit"`
				PricePerUnit map[string]string `json:"pricePerUnit"`
			} `json:"priceDimensions"`
		} `json:"OnDemand"`
	} `json:"terms"`
}

func (p product) usd(t *testing.T) float64 {
	t.Helper()
	for _, term := range p.Terms.OnDemand {
		for _, d := range term.PriceDimensions {
			f, err := strconv.ParseFloat(d.PricePerUnit["USD"], 64)
			if err != nil || d.Unit != "Hrs" {
				t.Fatalf("price dimension %+v: %v", d, err)
			}
			return f
		}
	}
	t.Fatalf("no on-demand price in %+v", p)
	return 0
}

func catalogPrice(t *testing.T, region, name string) float64 {
	its, err := catalog.InstanceTypes(catalog.Options{Region: region})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range its {
		if it.Name == name {
			for _, o := range it.Offerings {
				if o.CapacityType == "on-demand" {
					return o.Price
				}
			}
		}
	}
	t.Fatalf("%s not in the catalog", name)
	return 0
}

func TestPricingGetProducts(t *testing.T) {
	ctx := context.Background()
	c := clients(t)
	term := func(field, value string) pricingtypes.Filter {
		return pricingtypes.Filter{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String(field), Value: aws.String(value)}
	}
	// The filters an on-demand price refresh sends, less the instance type.
	linux := func(region string) []pricingtypes.Filter {
		return []pricingtypes.Filter{
			term("tenancy", "Shared"), term("productFamily", "Compute Instance"), term("serviceCode", "AmazonEC2"),
			term("preInstalledSw", "NA"), term("operatingSystem", "Linux"), term("capacitystatus", "Used"),
			term("marketoption", "OnDemand"), term("regionCode", region),
		}
	}
	allTypes, err := catalog.InstanceTypes(catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	metal := 0
	for _, it := range allTypes {
		if strings.Contains(it.Name, ".metal") {
			metal++
		}
	}
	tests := []struct {
		name    string
		filters []pricingtypes.Filter
		// want maps instance types to their price; wantCount checks the size
		// of the whole (paginated) answer when set.
		want      map[string]float64
		wantCount int
	}{
		{name: "one type in us-east-1", filters: append(linux("us-east-1"), term("instanceType", "m5.large")),
			want: map[string]float64{"m5.large": catalogPrice(t, "us-east-1", "m5.large")}},
		{name: "by location name, another region", filters: []pricingtypes.Filter{term("location", "EU (Ireland)"), term("instanceType", "c6a.large")},
			want: map[string]float64{"c6a.large": catalogPrice(t, "eu-west-1", "c6a.large")}},
		{name: "every virtualized type, over many pages", filters: linux("us-east-1"), wantCount: len(allTypes) - metal},
		// As in the Price List, bare metal is filed under Dedicated tenancy.
		{name: "bare metal", filters: append(linux("us-east-1")[2:], term("tenancy", "Dedicated"), term("productFamily", "Compute Instance (bare metal)")), wantCount: metal},
		{name: "windows is not served", filters: append(linux("us-east-1")[:4], term("operatingSystem", "Windows")), wantCount: 0},
		{name: "dedicated virtualized types are not served", filters: []pricingtypes.Filter{term("tenancy", "Dedicated"), term("productFamily", "Compute Instance")}, wantCount: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]float64{}
			pages := 0
			p := pricing.NewGetProductsPaginator(c.Pricing, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), Filters: tt.filters, FormatVersion: aws.String("aws_v1")})
			for p.HasMorePages() {
				out, err := p.NextPage(ctx)
				if err != nil {
					t.Fatal(err)
				}
				pages++
				for _, doc := range out.PriceList {
					var pr product
					if err := json.Unmarshal([]byte(doc), &pr); err != nil {
						t.Fatalf("PriceList entry is not a JSON document: %v", err)
					}
					got[pr.Product.Attributes["instanceType"]] = pr.usd(t)
				}
			}
			for typ, price := range tt.want {
				if got[typ] != price {
					t.Errorf("%s = $%v/h, want $%v/h (the catalog's)", typ, got[typ], price)
				}
			}
			if tt.want == nil && len(got) != tt.wantCount {
				t.Errorf("%d products over %d pages, want %d", len(got), pages, tt.wantCount)
			}
			if tt.wantCount > 100 && pages < 2 {
				t.Errorf("%d products in %d page(s): pages hold at most 100", len(got), pages)
			}
		})
	}
}

func TestSpotPriceHistory(t *testing.T) {
	c := clients(t)
	out, err := c.EC2.DescribeSpotPriceHistory(context.Background(), &ec2.DescribeSpotPriceHistoryInput{
		InstanceTypes:       []ec2types.InstanceType{"m5.large", "t3a.large"},
		ProductDescriptions: []string{"Linux/UNIX", "Linux/UNIX (Amazon VPC)"},
		Filters:             []ec2types.Filter{{Name: aws.String("availability-zone"), Values: []string{"us-east-1a", "us-east-1b"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.SpotPriceHistory) != 2*2*2 {
		t.Fatalf("%d prices, want one per type, zone and product: %s", len(out.SpotPriceHistory), describe(out.SpotPriceHistory))
	}
	for _, p := range out.SpotPriceHistory {
		typ, zone := string(p.InstanceType), aws.ToString(p.AvailabilityZone)
		od := catalogPrice(t, region, typ)
		want := catalog.SpotPrice(typ, zone, od)
		got, _ := strconv.ParseFloat(aws.ToString(p.SpotPrice), 64)
		if got != want || got >= od {
			t.Errorf("%s in %s: spot $%v, want the catalog's $%v (on-demand $%v)", typ, zone, got, want, od)
		}
	}
}

func TestPublicParameters(t *testing.T) {
	ctx := context.Background()
	c := clients(t)
	tests := []struct {
		path     string
		wantArch ec2types.ArchitectureValues
		wantName string // prefix
	}{
		{"/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id", "x86_64", "amazon-eks-node-al2023-x86_64-standard-1.33-"},
		{"/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/standard/recommended/image_id", "arm64", "amazon-eks-node-al2023-arm64-standard-1.33-"},
		{"/aws/service/eks/optimized-ami/1.29/amazon-linux-2023/x86_64/nvidia/recommended/image_id", "x86_64", "amazon-eks-node-al2023-x86_64-nvidia-1.29-"},
		{"/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/neuron/recommended/image_id", "x86_64", "amazon-eks-node-al2023-x86_64-neuron-1.35-"},
		{"/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/nvidia/amazon-eks-node-al2023-arm64-nvidia-1.33-v20250620/image_id", "arm64", "amazon-eks-node-al2023-arm64-nvidia-1.33-v20250620"},
		{"/aws/service/eks/optimized-ami/1.32/amazon-linux-2/recommended/image_id", "x86_64", "amazon-eks-node-1.32-"},
		{"/aws/service/eks/optimized-ami/1.32/amazon-linux-2-arm64/recommended/image_id", "arm64", "amazon-eks-arm64-node-1.32-"},
		{"/aws/service/eks/optimized-ami/1.32/amazon-linux-2-gpu/amazon-eks-gpu-node-1.32-v20250620/image_id", "x86_64", "amazon-eks-gpu-node-1.32-v20250620"},
		{"/aws/service/bottlerocket/aws-k8s-1.34/x86_64/latest/image_id", "x86_64", "bottlerocket-aws-k8s-1.34-x86_64-"},
		{"/aws/service/bottlerocket/aws-k8s-1.34-nvidia/arm64/latest/image_id", "arm64", "bottlerocket-aws-k8s-1.34-nvidia-arm64-"},
		{"/aws/service/bottlerocket/aws-k8s-1.30/arm64/1.41.0/image_id", "arm64", "bottlerocket-aws-k8s-1.30-arm64-v1.41.0-"},
		{"/aws/service/ami-windows-latest/Windows_Server-2019-English-Core-EKS_Optimized-1.33/image_id", "x86_64", "Windows_Server-2019-English-Core-EKS_Optimized-1.33-"},
		{"/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.31/image_id", "x86_64", "Windows_Server-2022-English-Core-EKS_Optimized-1.31-"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			p, err := c.SSM.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(tt.path)})
			if err != nil {
				t.Fatal(err)
			}
			id := aws.ToString(p.Parameter.Value)
			imgs, err := c.EC2.DescribeImages(ctx, &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("image-id"), Values: []string{id}}}})
			if err != nil || len(imgs.Images) != 1 {
				t.Fatalf("DescribeImages(%s) = %v, %v: want the image the parameter names", id, describe(imgs), err)
			}
			img := imgs.Images[0]
			if img.Architecture != tt.wantArch || !strings.HasPrefix(aws.ToString(img.Name), tt.wantName) || img.State != ec2types.ImageStateAvailable {
				t.Errorf("image %s: %s %s %s, want %s %s*", id, img.Architecture, aws.ToString(img.Name), img.State, tt.wantArch, tt.wantName)
			}
		})
	}

	t.Run("unknown version is ParameterNotFound", func(t *testing.T) {
		_, err := c.SSM.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/aws/service/eks/optimized-ami/1.19/amazon-linux-2023/x86_64/standard/recommended/image_id")})
		if errorCode(err) != "ParameterNotFound" {
			t.Errorf("error %v, want ParameterNotFound", err)
		}
	})
	t.Run("GetParameters mixes public and moto's own", func(t *testing.T) {
		if _, err := c.SSM.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String("/joiner/test"), Value: aws.String("hello"), Type: "String", Overwrite: aws.Bool(true)}); err != nil {
			t.Fatal(err)
		}
		al2023 := "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id"
		missing := "/aws/service/bottlerocket/aws-k8s-1.33/x86_64/9.9.9/image_id"
		out, err := c.SSM.GetParameters(ctx, &ssm.GetParametersInput{Names: []string{"/joiner/test", al2023, missing, "/joiner/none"}})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, p := range out.Parameters {
			got[aws.ToString(p.Name)] = aws.ToString(p.Value)
		}
		if got["/joiner/test"] != "hello" || !strings.HasPrefix(got[al2023], "ami-") || len(got) != 2 {
			t.Errorf("parameters = %v", got)
		}
		sort.Strings(out.InvalidParameters)
		if strings.Join(out.InvalidParameters, ",") != missing+",/joiner/none" {
			t.Errorf("invalid parameters = %v", out.InvalidParameters)
		}
	})
	t.Run("GetParametersByPath pages through a tree", func(t *testing.T) {
		var names []string
		p := ssm.NewGetParametersByPathPaginator(c.SSM, &ssm.GetParametersByPathInput{Path: aws.String("/aws/service/eks/optimized-ami/1.34/amazon-linux-2023"), Recursive: aws.Bool(true)})
		for p.HasMorePages() {
			out, err := p.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, prm := range out.Parameters {
				names = append(names, aws.ToString(prm.Name))
			}
		}
		// 5 variants, each with a recommended and two pinned releases.
		if len(names) != 15 {
			t.Errorf("%d parameters under the AL2023 1.34 tree, want 15: %v", len(names), names)
		}
	})
}

func TestPublishImage(t *testing.T) {
	ctx := context.Background()
	c := clients(t)
	path := "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/standard/recommended/image_id"
	before := must(c.SSM.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(path)}))(t)

	var pub fakeaws.PublishedImage
	if code := admin(t, "POST", "/_fake/images/publish", map[string]string{"parameter": path}, &pub); code != 200 {
		t.Fatalf("publish: HTTP %d %+v", code, pub)
	}
	after := must(c.SSM.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(path)}))(t)
	if aws.ToString(after.Parameter.Value) != pub.ImageID || pub.ImageID == aws.ToString(before.Parameter.Value) || after.Parameter.Version != before.Parameter.Version+1 {
		t.Fatalf("after publishing, %s = %s (version %d), was %s (version %d); published %+v",
			path, aws.ToString(after.Parameter.Value), after.Parameter.Version, aws.ToString(before.Parameter.Value), before.Parameter.Version, pub)
	}
	img := must(c.EC2.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{pub.ImageID}}))(t)
	if len(img.Images) != 1 || img.Images[0].Architecture != "arm64" || aws.ToString(img.Images[0].Name) != "amazon-eks-node-al2023-arm64-standard-1.33-v20250822" {
		t.Errorf("published image = %s, want arm64 amazon-eks-node-al2023-arm64-standard-1.33-v20250822", describe(img.Images))
	}
	pinned := "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/standard/amazon-eks-node-al2023-arm64-standard-1.33-v20250822/image_id"
	if p, err := c.SSM.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(pinned)}); err != nil || aws.ToString(p.Parameter.Value) != pub.ImageID {
		t.Errorf("pinned parameter of the new release: %v", err)
	}
	var bad map[string]string
	if code := admin(t, "POST", "/_fake/images/publish", map[string]string{"parameter": "/aws/service/nope"}, &bad); code != 400 || !strings.Contains(bad["error"], "not a mutable image parameter") {
		t.Errorf("publishing an unknown parameter: HTTP %d %v", code, bad)
	}
}
