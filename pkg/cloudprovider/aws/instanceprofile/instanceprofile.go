// Package instanceprofile gives an EC2NodeClass the IAM instance profile
// its nodes launch with: one Joiner creates and owns for spec.role, or the
// one named in spec.instanceProfile, used as given and never changed.
package instanceprofile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/tags"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/smithy-go"
	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/awsclient"
	"k8s.io/utils/clock"
)

// IAMAPI is the part of the IAM client the provider calls. GetRole is used
// only to check a new role before the old one is removed from a profile;
// without iam:GetRole that check is skipped.
type IAMAPI interface {
	GetInstanceProfile(ctx context.Context, in *iam.GetInstanceProfileInput, optFns ...func(*iam.Options)) (*iam.GetInstanceProfileOutput, error)
	CreateInstanceProfile(ctx context.Context, in *iam.CreateInstanceProfileInput, optFns ...func(*iam.Options)) (*iam.CreateInstanceProfileOutput, error)
	TagInstanceProfile(ctx context.Context, in *iam.TagInstanceProfileInput, optFns ...func(*iam.Options)) (*iam.TagInstanceProfileOutput, error)
	AddRoleToInstanceProfile(ctx context.Context, in *iam.AddRoleToInstanceProfileInput, optFns ...func(*iam.Options)) (*iam.AddRoleToInstanceProfileOutput, error)
	RemoveRoleFromInstanceProfile(ctx context.Context, in *iam.RemoveRoleFromInstanceProfileInput, optFns ...func(*iam.Options)) (*iam.RemoveRoleFromInstanceProfileOutput, error)
	DeleteInstanceProfile(ctx context.Context, in *iam.DeleteInstanceProfileInput, optFns ...func(*iam.Options)) (*iam.DeleteInstanceProfileOutput, error)
	GetRole(ctx context.Context, in *iam.GetRoleInput, optFns ...func(*iam.Options)) (*iam.GetRoleOutput, error)
	ListInstanceProfiles(ctx context.Context, in *iam.ListInstanceProfilesInput, optFns ...func(*iam.Options)) (*iam.ListInstanceProfilesOutput, error)
}

// Provider manages instance profiles for one cluster in one region.
type Provider struct {
	IAM         IAMAPI
	ClusterName string
	Region      string
	// Clock times how long a profile stays protected from garbage
	// collection; the real clock when nil.
	Clock clock.Clock
	// ProtectFor is how long Protect keeps a profile; ProtectedFor when
	// zero.
	ProtectFor time.Duration

	mu sync.Mutex
	// protected are profiles garbage collection must not delete yet, and
	// until when (see Protect).
	protected map[string]time.Time
}

// NotFoundError is a spec field naming an IAM entity that does not exist.
type NotFoundError struct {
	// Field is "spec.role" or "spec.instanceProfile".
	Field string
	// Name is the field's value.
	Name string
	// Fix says what to do.
	Fix string
	// Err is IAM's answer.
	Err error
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("%s: %q does not exist in IAM; %s", e.Field, e.Name, e.Fix)
}

func (e *NotFoundError) Unwrap() error { return e.Err }

// Reason is the InstanceProfileReady condition reason.
func (e *NotFoundError) Reason() string {
	if e.Field == "spec.role" {
		return "RoleNotFound"
	}
	return "InstanceProfileNotFound"
}

// maxNameLength is IAM's limit on an instance profile name.
const maxNameLength = 128

// hashLength is the hex digits of the name's hash suffix (64 bits).
const hashLength = 16

var unsafeNameChars = regexp.MustCompile(`[^\w+=,.@-]`)

// Name is the instance profile Joiner creates for role in class, cluster
// and region:
//
//	<cluster>_<class>_<hash>
//
// where hash is the first 16 hex digits of SHA-256 over the cluster name,
// region, class name and role, and "<cluster>_<class>" (characters IAM does
// not allow in a name replaced by "-") is cut to 111 characters, so the
// whole name fits IAM's 128. The readable part is for people listing
// profiles; the hash makes the name unique per cluster, region, class and
// role even when the readable part is cut. A role of its own gives each
// role change a new profile, so running nodes keep the role they launched
// with. An empty role names the profile Joiner made for every role of a
// class before it did so.
func Name(clusterName, region, class, role string) string {
	in := clusterName + "\x00" + region + "\x00" + class
	if role != "" {
		in += "\x00" + role
	}
	sum := sha256.Sum256([]byte(in))
	suffix := hex.EncodeToString(sum[:])[:hashLength]
	readable := unsafeNameChars.ReplaceAllString(clusterName+"_"+class, "-")
	if max := maxNameLength - 1 - hashLength; len(readable) > max {
		readable = readable[:max]
	}
	return readable + "_" + suffix
}

// Tags are the tags of the profile Joiner creates for nc. Karpenter's
// published controller policy lets iam:CreateInstanceProfile and
// iam:TagInstanceProfile through only when the request carries the cluster,
// eks:eks-cluster-name, region and class tags, and the later role and
// delete calls only when the profile has them.
func (p *Provider) Tags(nc *awsv1.EC2NodeClass) map[string]string {
	return map[string]string{
		tags.NodeClass:                     nc.Name,
		tags.ClusterPrefix + p.ClusterName: "owned",
		tags.EKSClusterName:                p.ClusterName,
		tags.ManagedBy:                     p.ClusterName,
		tags.Region:                        p.Region,
	}
}

// RoleName is the role name in spec.role, which may also be given as a
// role ARN (arn:aws:iam::111122223333:role/path/name): IAM's profile calls
// take the bare name.
func RoleName(role string) string {
	if strings.HasPrefix(role, "arn:") {
		return role[strings.LastIndex(role, "/")+1:]
	}
	return role
}

// Ensure returns the name of the instance profile nc's nodes launch with.
// For spec.role it keeps the profile in status.instanceProfile while that
// holds the role (so a class Karpenter managed keeps Karpenter's profile,
// and a restart changes nothing); otherwise it creates the role's profile
// (see Name) if missing, tags it, and puts the role in it. The profile of
// a previous role is left as it is: nodes launched with it keep their
// credentials. For spec.instanceProfile it checks the profile exists and
// returns it unchanged.
func (p *Provider) Ensure(ctx context.Context, nc *awsv1.EC2NodeClass) (string, error) {
	if nc.Spec.Role == "" {
		if nc.Spec.InstanceProfile == nil || *nc.Spec.InstanceProfile == "" {
			return "", errors.New("spec: set role (Joiner manages an instance profile for it) or instanceProfile (an existing profile)")
		}
		name := *nc.Spec.InstanceProfile
		if _, err := p.IAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)}); err != nil {
			if isNoSuchEntity(err) {
				return "", &NotFoundError{Field: "spec.instanceProfile", Name: name, Err: err,
					Fix: "create it, or set spec.role instead and Joiner creates one"}
			}
			return "", fmt.Errorf("getting instance profile %q: %w", name, err)
		}
		// From spec.role to spec.instanceProfile: the role's profile stays
		// while NodeClaims launched with it may not be seen yet.
		if name != nc.Status.InstanceProfile {
			p.Protect(nc.Status.InstanceProfile)
		}
		return name, nil
	}
	name, err := p.ensureRole(ctx, nc)
	if err == nil && name != nc.Status.InstanceProfile {
		// The new profile until the class's status names it, the old one
		// while NodeClaims launched with it may not be seen yet.
		p.Protect(name)
		p.Protect(nc.Status.InstanceProfile)
	}
	return name, err
}

// ensureRole is Ensure for spec.role.
func (p *Provider) ensureRole(ctx context.Context, nc *awsv1.EC2NodeClass) (string, error) {
	role := RoleName(nc.Spec.Role)
	if cur := nc.Status.InstanceProfile; cur != "" {
		out, err := p.IAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(cur)})
		switch {
		case err == nil && len(out.InstanceProfile.Roles) == 1 && aws.ToString(out.InstanceProfile.Roles[0].RoleName) == role:
			return cur, nil
		case err != nil && !isNoSuchEntity(err):
			return "", fmt.Errorf("getting instance profile %q: %w", cur, err)
		}
	}
	name := Name(p.ClusterName, p.Region, nc.Name, role)
	profile, err := p.getOrCreate(ctx, nc, name)
	if err != nil {
		return "", err
	}
	if err := p.tagIfMissing(ctx, nc, profile); err != nil {
		return "", err
	}
	var others []string
	has := false
	for _, r := range profile.Roles {
		if aws.ToString(r.RoleName) == role {
			has = true
		} else {
			others = append(others, aws.ToString(r.RoleName))
		}
	}
	if has && len(others) == 0 {
		return name, nil
	}
	if len(others) > 0 {
		// Removing the old role first is forced (a profile holds one role),
		// so check the new one exists before nodes lose the old one.
		if _, err := p.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(role)}); err != nil {
			if isNoSuchEntity(err) {
				return "", roleNotFound(nc.Spec.Role, err)
			}
			if !awsclient.IsAccessDenied(err) {
				return "", fmt.Errorf("getting role %q: %w", role, err)
			}
		}
		for _, old := range others {
			if _, err := p.IAM.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{
				InstanceProfileName: aws.String(name), RoleName: aws.String(old)}); err != nil && !isNoSuchEntity(err) {
				return "", fmt.Errorf("removing role %q from instance profile %q: %w", old, name, err)
			}
		}
	}
	if !has {
		if _, err := p.IAM.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{
			InstanceProfileName: aws.String(name), RoleName: aws.String(role)}); err != nil {
			if isNoSuchEntity(err) {
				if len(others) == 0 {
					// The role's own profile, empty: not left behind for a
					// role that does not exist.
					_, _ = p.IAM.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(name)})
				}
				return "", roleNotFound(nc.Spec.Role, err)
			}
			if !isCode(err, "LimitExceeded") {
				return "", fmt.Errorf("adding role %q to instance profile %q: %w", role, name, err)
			}
			// LimitExceeded: another writer put a role in meanwhile; the
			// next reconcile sees and replaces it.
			return "", fmt.Errorf("adding role %q to instance profile %q: another role was added concurrently: %w", role, name, err)
		}
	}
	return name, nil
}

func roleNotFound(role string, err error) error {
	return &NotFoundError{Field: "spec.role", Name: role, Err: err,
		Fix: "create the role (with the AmazonEKSWorkerNodePolicy, AmazonEKS_CNI_Policy and AmazonEC2ContainerRegistryReadOnly policies) or fix spec.role"}
}

func (p *Provider) getOrCreate(ctx context.Context, nc *awsv1.EC2NodeClass, name string) (*iamtypes.InstanceProfile, error) {
	out, err := p.IAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if err == nil {
		return out.InstanceProfile, nil
	}
	if !isNoSuchEntity(err) {
		return nil, fmt.Errorf("getting instance profile %q: %w", name, err)
	}
	in := &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(name), Tags: iamTags(p.Tags(nc))}
	if nc.UID != "" {
		in.Path = aws.String(Path(p.Region, p.ClusterName, string(nc.UID)))
	}
	created, err := p.IAM.CreateInstanceProfile(ctx, in)
	if err == nil {
		return created.InstanceProfile, nil
	}
	if !isCode(err, "EntityAlreadyExists") {
		return nil, fmt.Errorf("creating instance profile %q: %w", name, err)
	}
	// Created by a retry whose answer was lost, or another replica.
	out, err = p.IAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if err != nil {
		return nil, fmt.Errorf("getting instance profile %q: %w", name, err)
	}
	return out.InstanceProfile, nil
}

func (p *Provider) tagIfMissing(ctx context.Context, nc *awsv1.EC2NodeClass, profile *iamtypes.InstanceProfile) error {
	have := map[string]string{}
	for _, t := range profile.Tags {
		have[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	want := p.Tags(nc)
	missing := false
	for k, v := range want {
		missing = missing || have[k] != v
	}
	if !missing {
		return nil
	}
	// All of them, not only the missing ones: the published policy's
	// condition on iam:TagInstanceProfile asks for every one of them in
	// the request (aws:RequestTag), so a request with one would be refused.
	if _, err := p.IAM.TagInstanceProfile(ctx, &iam.TagInstanceProfileInput{
		InstanceProfileName: profile.InstanceProfileName, Tags: iamTags(want)}); err != nil {
		return fmt.Errorf("tagging instance profile %q: %w", aws.ToString(profile.InstanceProfileName), err)
	}
	return nil
}

// Delete removes the profiles Joiner created for nc: for its role, the
// one in its status, the one it made before profiles were per role, and
// every profile under the class's IAM path (those of earlier roles, made by
// Joiner or Karpenter); their roles first, as IAM requires. A profile named
// in spec.instanceProfile is never touched, nor one without this cluster's
// and this class's tags. A missing profile is not an error, nor a refused
// listing (Karpenter's v1.1.3 stack grants no iam:ListInstanceProfiles):
// then the profiles of earlier roles stay.
func (p *Provider) Delete(ctx context.Context, nc *awsv1.EC2NodeClass) error {
	names := []string{Name(p.ClusterName, p.Region, nc.Name, "")}
	if nc.Spec.Role != "" {
		names = append(names, Name(p.ClusterName, p.Region, nc.Name, RoleName(nc.Spec.Role)))
	}
	if s := nc.Status.InstanceProfile; s != "" && !slices.Contains(names, s) {
		names = append(names, s)
	}
	if nc.UID != "" {
		under, err := p.under(ctx, Path(p.Region, p.ClusterName, string(nc.UID)))
		if err != nil && !awsclient.IsAccessDenied(err) {
			return err
		}
		for _, name := range under {
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	for _, name := range names {
		if nc.Spec.InstanceProfile != nil && *nc.Spec.InstanceProfile == name {
			continue
		}
		if err := p.deleteOwned(ctx, nc, name); err != nil {
			return err
		}
	}
	return nil
}

func (p *Provider) deleteOwned(ctx context.Context, nc *awsv1.EC2NodeClass, name string) error {
	out, err := p.IAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if err != nil {
		if isNoSuchEntity(err) {
			return nil
		}
		return fmt.Errorf("getting instance profile %q: %w", name, err)
	}
	has := map[string]string{}
	for _, t := range out.InstanceProfile.Tags {
		has[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	if has[tags.NodeClass] != nc.Name || has[tags.Cluster(p.ClusterName)] != "owned" {
		return nil
	}
	return p.deleteProfile(ctx, name, out.InstanceProfile.Roles)
}

// deleteProfile removes the profile's roles, then the profile; one already
// gone is no error.
func (p *Provider) deleteProfile(ctx context.Context, name string, roles []iamtypes.Role) error {
	for _, r := range roles {
		if _, err := p.IAM.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{
			InstanceProfileName: aws.String(name), RoleName: r.RoleName}); err != nil && !isNoSuchEntity(err) {
			return fmt.Errorf("removing role %q from instance profile %q: %w", aws.ToString(r.RoleName), name, err)
		}
	}
	if _, err := p.IAM.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(name)}); err != nil && !isNoSuchEntity(err) {
		return fmt.Errorf("deleting instance profile %q: %w", name, err)
	}
	return nil
}

// iamTags orders the tags by key, so that equal calls are equal requests.
func iamTags(m map[string]string) []iamtypes.Tag {
	out := make([]iamtypes.Tag, 0, len(m))
	for _, k := range tags.SortedKeys(m) {
		out = append(out, iamtypes.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return out
}

func isNoSuchEntity(err error) bool { return isCode(err, "NoSuchEntity") }

func isCode(err error, code string) bool {
	var apiErr smithy.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode() == code
}
