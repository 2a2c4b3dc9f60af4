// Package selector turns EC2NodeClass selector terms into EC2 Describe
// filters and holds what the subnet and security-group providers share: the
// error that names terms matching nothing, and a short-lived cache of
// resolved terms.
//
// Terms are ORed and the fields inside a term ANDed, so each term is one
// Describe call whose filters EC2 ANDs, and the union of the answers is the
// selection.
package selector

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/utils/clock"
)

// AnyValue as a tag value selects every resource that has the key, whatever
// its value, as Karpenter reads it.
const AnyValue = "*"

// TagFilters are the filters that select resources carrying every tag in
// tags: "tag:<key>" for a value, "tag-key" for AnyValue. Keys are sorted so
// that equal terms make equal requests.
func TagFilters(tags map[string]string) []ec2types.Filter {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]ec2types.Filter, 0, len(keys))
	for _, k := range keys {
		if tags[k] == AnyValue {
			out = append(out, ec2types.Filter{Name: aws.String("tag-key"), Values: []string{k}})
			continue
		}
		out = append(out, ec2types.Filter{Name: aws.String("tag:" + k), Values: []string{tags[k]}})
	}
	return out
}

// Filter is one EC2 filter with one value.
func Filter(name, value string) ec2types.Filter {
	return ec2types.Filter{Name: aws.String(name), Values: []string{value}}
}

// DescribeTerm renders a term for a message, as a user would recognise it in
// the manifest: `subnetSelectorTerms[0] {tags: karpenter.sh/discovery=demo}`.
func DescribeTerm(field string, index int, id, name string, tags map[string]string) string {
	var parts []string
	if id != "" {
		parts = append(parts, "id: "+id)
	}
	if name != "" {
		parts = append(parts, "name: "+name)
	}
	if len(tags) > 0 {
		keys := make([]string, 0, len(tags))
		for k := range tags {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		kv := make([]string, 0, len(keys))
		for _, k := range keys {
			kv = append(kv, k+"="+tags[k])
		}
		parts = append(parts, "tags: "+strings.Join(kv, ","))
	}
	return fmt.Sprintf("%s[%d] {%s}", field, index, strings.Join(parts, "; "))
}

// NoMatchError says that a selector matched nothing. Its message starts
// with Karpenter's condition message and goes on to name every term, so the
// user sees which one to fix.
type NoMatchError struct {
	// ReasonCode is the condition reason, e.g. "SubnetsNotFound".
	ReasonCode string
	// Summary is Karpenter's message, e.g. "SubnetSelector did not match any Subnets".
	Summary string
	// Terms are the terms, described by DescribeTerm.
	Terms []string
}

func (e *NoMatchError) Error() string {
	return fmt.Sprintf("%s: %s matched nothing; check the ids, names and tags in the AWS account and region, or fix the terms",
		e.Summary, strings.Join(e.Terms, ", "))
}

// Reason is the condition reason for the error.
func (e *NoMatchError) Reason() string { return e.ReasonCode }

// Hash keys the cache: equal terms (in any map order) hash equal.
func Hash(v any) string {
	// json.Marshal sorts map keys, so it is a canonical encoding here.
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("selector terms do not encode: %v", err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// Cache holds what a selector resolved to, by Hash, for a TTL, so that a
// burst of launches does not describe the same subnets for each one.
type Cache[T any] struct {
	Clock clock.PassiveClock
	TTL   time.Duration

	mu      sync.Mutex
	entries map[string]cacheEntry[T]
}

type cacheEntry[T any] struct {
	value T
	at    time.Time
}

// Get returns the value stored under key and when it was stored, if that
// was less than TTL ago.
func (c *Cache[T]) Get(key string) (T, time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || c.Clock.Since(e.at) >= c.TTL {
		var zero T
		return zero, time.Time{}, false
	}
	return e.value, e.at, true
}

// Set stores value under key and returns the time it was stored at.
func (c *Cache[T]) Set(key string, value T) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]cacheEntry[T]{}
	}
	now := c.Clock.Now()
	for k, e := range c.entries {
		if now.Sub(e.at) >= c.TTL {
			delete(c.entries, k)
		}
	}
	c.entries[key] = cacheEntry[T]{value: value, at: now}
	return now
}
