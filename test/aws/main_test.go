// Package aws runs Joiner with --cloud-provider=aws against the local AWS
// endpoint (cmd/fake-aws: moto plus our front), whose instances boot as
// Nodes from the user data Joiner wrote, on the package's control plane.
package aws

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/joiner-autoscaler/joiner/internal/fakeaws"
	"github.com/joiner-autoscaler/joiner/internal/localcluster"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/awsclient"
	"github.com/joiner-autoscaler/joiner/test/framework"
)

const (
	clusterName = "demo"
	region      = "us-east-1"
)

// fake is the package's local AWS endpoint.
var fake *fakeaws.Server

func TestMain(m *testing.M) {
	// Audited: TestGuideUnderPublishedPolicies reads which RBAC rules the
	// chart's service account used.
	os.Exit(framework.MainAudited(m, func(c *localcluster.Cluster) error {
		logFile, err := os.Create(filepath.Join(c.Dir, "aws-calls.jsonl"))
		if err != nil {
			return err
		}
		fake, err = fakeaws.Start(context.Background(), fakeaws.Options{ClusterName: clusterName, Region: region, Kubeconfig: c.Kubeconfig, CallLog: logFile})
		return err
	}))
}

// explainBoots prints, when the test fails, how each of f's instances
// booted: a node that never joined says why (its user data, as a node
// would read it).
func explainBoots(t testing.TB, f *fakeaws.Server) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, b := range f.Boots() {
			t.Logf("instance %s (%s, %s, %s): state %s, node %q, joined %v, reason %q", b.InstanceID, b.InstanceType, b.ImageID, b.Family, b.State, b.Node, b.Joined, b.Reason)
		}
	})
}

// awsEnv is the environment of a Joiner that runs on AWS through the fake:
// only the SDK's standard variables, as a user's would be.
func awsEnv(extra ...string) []string {
	return append([]string{
		"CLOUD_PROVIDER=aws", "CLUSTER_NAME=" + clusterName, "AWS_REGION=" + region,
		"AWS_ENDPOINT_URL=" + fake.URL(), "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		// The demo's consolidation pace, so scale-down shows within a test.
		"DISRUPTION_POLL=2s",
	}, extra...)
}

// clientConfig is the SDK configuration of the tests' own clients: the
// product's retry policy, static test credentials, one endpoint.
func clientConfig(t testing.TB, url, region string) aws.Config {
	t.Helper()
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion(region),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")),
		config.WithRetryer(awsclient.NewRetryer), config.WithBaseEndpoint(url))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// ec2Client is a second client of the fake, for the test's own checks.
func ec2Client(t testing.TB) *ec2.Client {
	cfg := clientConfig(t, fake.URL(), region)
	return ec2.NewFromConfig(cfg)
}

// instances lists the cluster's instances by state.
func instances(t testing.TB) map[string]string { return instanceStates(t, ec2Client(t)) }

// instanceStates lists the instances c sees, by state.
func instanceStates(t testing.TB, c *ec2.Client) map[string]string {
	out := map[string]string{}
	pager := ec2.NewDescribeInstancesPaginator(c, &ec2.DescribeInstancesInput{})
	for pager.HasMorePages() {
		page, err := pager.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				out[aws.ToString(i.InstanceId)] = string(i.State.Name)
			}
		}
	}
	return out
}

// securityGroups are the groups an instance runs with.
func securityGroups(t testing.TB, id string) []string {
	out, err := ec2Client(t).DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	var groups []string
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			for _, g := range i.SecurityGroups {
				groups = append(groups, aws.ToString(g.GroupId))
			}
		}
	}
	return groups
}

// guide03OnSmallTypes is guide 03's manifest with the NodePool held to
// types of at most 8 vCPUs, so that tens of pods of 1 CPU need several
// instances, and the given consolidateAfter and replicas.
func guide03OnSmallTypes(t testing.TB, consolidateAfter string, replicas int) string {
	t.Helper()
	manifest := framework.ReadSeed(t, "03-scale-up-down.yaml")
	for from, to := range map[string]string{
		"consolidateAfter: 1m": "consolidateAfter: " + consolidateAfter,
		"replicas: 5":          fmt.Sprintf("replicas: %d", replicas),
		"        - key: karpenter.k8s.aws/instance-generation": "        - key: karpenter.k8s.aws/instance-cpu\n          operator: Lt\n          values: [\"9\"]\n" +
			"        - key: karpenter.k8s.aws/instance-generation",
	} {
		if !strings.Contains(manifest, from) {
			t.Fatalf("guide 03's manifest has no %q", from)
		}
		manifest = strings.Replace(manifest, from, to, 1)
	}
	return manifest
}

// waitOneToOne waits until every NodeClaim has a running instance and every
// running instance a NodeClaim: what a run that kills and faults Joiner
// must settle to.
func waitOneToOne(t testing.TB) {
	t.Helper()
	framework.Eventually(t, 3*time.Minute, "instances and NodeClaims one to one", func() (bool, string) {
		states := instances(t)
		var problems []string
		for _, nc := range framework.NodeClaims(t) {
			if s := states[instanceID(nc.Status.ProviderID)]; nc.Status.ProviderID == "" || (s != "running" && s != "pending") {
				problems = append(problems, fmt.Sprintf("NodeClaim %s has instance %q (%s)", nc.Name, nc.Status.ProviderID, s))
			}
		}
		for _, stray := range strayInstances(t) {
			problems = append(problems, "instance "+stray+" has no NodeClaim")
		}
		return len(problems) == 0, strings.Join(problems, "; ")
	})
}

// strayInstances are the instances running (or about to) that no current
// NodeClaim records, as "id state".
func strayInstances(t testing.TB) []string {
	t.Helper()
	owned := map[string]bool{}
	for _, nc := range framework.NodeClaims(t) {
		owned[instanceID(nc.Status.ProviderID)] = true
	}
	var out []string
	for id, state := range instances(t) {
		if state != "terminated" && state != "shutting-down" && !owned[id] {
			out = append(out, id+" "+state)
		}
	}
	sort.Strings(out)
	return out
}

// launchCalls are the calls in the endpoint's log that can launch
// instances, oldest first.
func launchCalls() []fakeaws.Call {
	var out []fakeaws.Call
	for _, c := range fake.Calls("ec2", "") {
		if c.Action == "CreateFleet" || c.Action == "RunInstances" {
			out = append(out, c)
		}
	}
	return out
}

func instanceID(providerID string) string {
	return providerID[strings.LastIndex(providerID, "/")+1:]
}
