package fakeaws_test

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/arczonalshift"
	arctypes "github.com/aws/aws-sdk-go-v2/service/arczonalshift/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/smithy-go"
)

// ARC zonal shift, which moto lacks: awscli starts, lists, updates and
// cancels a shift on the guide's cluster, and the SDK reads the cluster's
// managed resource in between, as Joiner does.
func TestZonalShift(t *testing.T) {
	ctx := context.Background()
	c := clients(t)
	cl := must(c.EKS.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(clusterName)}))(t)
	arn := aws.ToString(cl.Cluster.Arn)
	subnets := must(c.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: fake.Seed().SubnetIDs[:1]}))(t)
	zoneID := aws.ToString(subnets.Subnets[0].AvailabilityZoneId)

	managed := func() *arczonalshift.GetManagedResourceOutput {
		t.Helper()
		return must(c.ARCZonalShift.GetManagedResource(ctx, &arczonalshift.GetManagedResourceInput{ResourceIdentifier: aws.String(arn)}))(t)
	}
	if got := managed(); len(got.ZonalShifts) != 0 || aws.ToString(got.Arn) != arn || got.AppliedWeights[zoneID] != 1 {
		t.Fatalf("before any shift: %s", describe(got))
	}
	started := awsCLI(t, "arc-zonal-shift", "start-zonal-shift", "--resource-identifier", arn, "--away-from", zoneID, "--expires-in", "1h", "--comment", "joiner test")
	id, _ := started["zonalShiftId"].(string)
	if started["status"] != "ACTIVE" || started["awayFrom"] != zoneID || id == "" {
		t.Fatalf("start-zonal-shift: %s", describe(started))
	}
	got := managed()
	if len(got.ZonalShifts) != 1 || aws.ToString(got.ZonalShifts[0].AwayFrom) != zoneID || got.ZonalShifts[0].AppliedStatus != arctypes.AppliedStatusApplied ||
		got.AppliedWeights[zoneID] != 0 || got.ZonalShifts[0].ExpiryTime.Sub(*got.ZonalShifts[0].StartTime).Hours() != 1 {
		t.Fatalf("managed resource during the shift: %s", describe(got))
	}
	listed := awsCLI(t, "arc-zonal-shift", "list-zonal-shifts", "--status", "ACTIVE", "--resource-identifier", arn)
	if items, _ := listed["items"].([]any); len(items) != 1 {
		t.Fatalf("list-zonal-shifts: %s", describe(listed))
	}
	// One active shift per resource, as ARC allows.
	_, err := c.ARCZonalShift.StartZonalShift(ctx, &arczonalshift.StartZonalShiftInput{ResourceIdentifier: aws.String(arn), AwayFrom: aws.String(zoneID), ExpiresIn: aws.String("1h"), Comment: aws.String("again")})
	var conflict *arctypes.ConflictException
	if !errors.As(err, &conflict) {
		t.Errorf("a second shift: %v, want ConflictException", err)
	}
	updated := awsCLI(t, "arc-zonal-shift", "update-zonal-shift", "--zonal-shift-id", id, "--expires-in", "2h")
	if updated["status"] != "ACTIVE" {
		t.Errorf("update-zonal-shift: %s", describe(updated))
	}
	canceled := awsCLI(t, "arc-zonal-shift", "cancel-zonal-shift", "--zonal-shift-id", id)
	if canceled["status"] != "CANCELED" {
		t.Errorf("cancel-zonal-shift: %s", describe(canceled))
	}
	if got := managed(); len(got.ZonalShifts) != 0 {
		t.Errorf("after the cancel: %s", describe(got))
	}

	// Refusals, with ARC's error codes.
	for _, tc := range []struct {
		name, resource, zone, code string
	}{
		{"a zone name, not an ID", arn, "us-east-1a", "ValidationException"},
		{"a cluster ARC does not manage", strings.Replace(arn, clusterName, "other", 1), zoneID, "ResourceNotFoundException"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.ARCZonalShift.StartZonalShift(ctx, &arczonalshift.StartZonalShiftInput{ResourceIdentifier: aws.String(tc.resource), AwayFrom: aws.String(tc.zone), ExpiresIn: aws.String("1h"), Comment: aws.String("x")})
			var api smithy.APIError
			if !errors.As(err, &api) || api.ErrorCode() != tc.code {
				t.Fatalf("%v, want %s", err, tc.code)
			}
		})
	}
	var stderr bytes.Buffer
	cmd := exec.Command("aws", "arc-zonal-shift", "start-zonal-shift", "--resource-identifier", arn, "--away-from", zoneID, "--expires-in", "100h", "--comment", "x")
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), "ValidationException") {
		t.Errorf("a shift of 100h: %v %s, want ValidationException", err, stderr.String())
	}
}
