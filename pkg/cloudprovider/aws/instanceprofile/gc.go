package instanceprofile

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"k8s.io/utils/clock"
)

// ProtectedFor is how long, by default, a profile Ensure just moved a class
// to or from is kept from garbage collection: long enough for the class's
// new status, and the NodeClaims launched with the old profile, to reach
// the cache the collection reads (Karpenter's hour, two of its 30-minute
// collections).
const ProtectedFor = time.Hour

// Path is the IAM path of the profiles Joiner creates for the class of
// that UID: Karpenter's, /karpenter/<region>/<cluster>/<class UID>/, so the
// profiles either created are collected by either, and no other cluster's
// or region's profile is listed with them.
func Path(region, clusterName, classUID string) string {
	return clusterPath(region, clusterName) + classUID + "/"
}

func clusterPath(region, clusterName string) string {
	return "/karpenter/" + region + "/" + clusterName + "/"
}

// Protect keeps the profile from garbage collection for ProtectFor.
func (p *Provider) Protect(name string) {
	if name == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.protected == nil {
		p.protected = map[string]time.Time{}
	}
	ttl := p.ProtectFor
	if ttl <= 0 {
		ttl = ProtectedFor
	}
	p.protected[name] = p.clock().Now().Add(ttl)
}

// isProtected reports a profile Protect still covers, forgetting those
// whose time is up.
func (p *Provider) isProtected(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock().Now()
	for n, until := range p.protected {
		if !now.Before(until) {
			delete(p.protected, n)
		}
	}
	_, ok := p.protected[name]
	return ok
}

func (p *Provider) clock() clock.Clock {
	if p.Clock == nil {
		return clock.RealClock{}
	}
	return p.Clock
}

// GarbageCollect deletes the profiles created for this cluster in this
// region (those under its path) that no class uses now, no NodeClaim names
// (keep), and Protect does not cover: a role change leaves the old role's
// profile for the nodes launched with it, and nothing else removes it once
// they are gone. IAM limits an account to 1,000 profiles. A profile's roles
// are removed first, as IAM requires. It returns the profiles deleted; one
// that fails does not stop the others.
func (p *Provider) GarbageCollect(ctx context.Context, keep map[string]bool) ([]string, error) {
	profiles, err := p.list(ctx, clusterPath(p.Region, p.ClusterName))
	if err != nil {
		return nil, err
	}
	var deleted []string
	var errs []error
	for _, profile := range profiles {
		name := aws.ToString(profile.InstanceProfileName)
		if keep[name] || p.isProtected(name) {
			continue
		}
		if err := p.deleteProfile(ctx, name, profile.Roles); err != nil {
			errs = append(errs, err)
			continue
		}
		deleted = append(deleted, name)
	}
	return deleted, errors.Join(errs...)
}

// list returns the profiles under the IAM path prefix. The path is checked
// here too (moto, for one, ignores PathPrefix): what IAM answers is the
// only guard against deleting another cluster's profile.
func (p *Provider) list(ctx context.Context, prefix string) ([]iamtypes.InstanceProfile, error) {
	var out []iamtypes.InstanceProfile
	pages := iam.NewListInstanceProfilesPaginator(p.IAM, &iam.ListInstanceProfilesInput{PathPrefix: aws.String(prefix)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing instance profiles under %s: %w", prefix, err)
		}
		for _, profile := range page.InstanceProfiles {
			if strings.HasPrefix(aws.ToString(profile.Path), prefix) {
				out = append(out, profile)
			}
		}
	}
	return out, nil
}

// under are the names of the profiles under the IAM path prefix.
func (p *Provider) under(ctx context.Context, prefix string) ([]string, error) {
	profiles, err := p.list(ctx, prefix)
	names := make([]string, len(profiles))
	for i, profile := range profiles {
		names[i] = aws.ToString(profile.InstanceProfileName)
	}
	return names, err
}
