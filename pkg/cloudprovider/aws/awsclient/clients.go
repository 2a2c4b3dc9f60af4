// Package awsclient builds the AWS SDK clients the aws provider uses, in one
// place, so that every service shares the credential chain, the region and
// the retry policy, and tests reach the same code a production binary runs.
//
// Endpoints are never configured here: the SDK reads AWS_ENDPOINT_URL and
// AWS_ENDPOINT_URL_<SERVICE> itself, which is how tests point it at the
// local fake and how users point it at VPC endpoints.
package awsclient

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/arczonalshift"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/aws-sdk-go-v2/service/savingsplans"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go/logging"
)

// MaxAttempts is how many times one call is tried (the first try included)
// before its error reaches the caller.
//
// The SDK's standard retryer is used with its backoff and its list of
// retryable errors (throttling, 5xx, connection resets), but without its
// client-side retry budget: that token bucket is shared by every call of a
// client, and under a burst of throttling (real or injected by the fake) it
// runs dry and turns later, healthy retries into "retry quota exceeded",
// hiding the real error. Joiner's callers are already rate-limited by their
// controllers' work queues, which back off per object, so the budget adds
// nothing but that failure mode. Tests use exactly these settings.
const MaxAttempts = 5

// Clients are the service clients of one region.
type Clients struct {
	Region  string
	EC2     *ec2.Client
	SSM     *ssm.Client
	Pricing *pricing.Client
	IAM     *iam.Client
	STS     *sts.Client
	EKS     *eks.Client
	SQS     *sqs.Client
	// ARCZonalShift reads the cluster's zonal shifts (ENABLE_ZONAL_SHIFT).
	ARCZonalShift *arczonalshift.Client
	// SavingsPlans reads the account's Savings Plans and their rates.
	SavingsPlans *savingsplans.Client
	// Config is the shared configuration, for callers that need another
	// service or the resolved credentials.
	Config aws.Config
}

// Options choose the region; everything else comes from the standard chain
// (environment, shared config, web identity for IRSA, IMDS).
type Options struct {
	// Region overrides AWS_REGION and the shared config; when both are empty
	// the region comes from IMDS, as on an EC2 instance.
	Region string
	// Logger, when set, takes the SDK's own warnings in place of standard
	// error: the viewer, which owns the terminal, discards them.
	Logger logging.Logger
}

// New loads the default configuration and builds every client.
func New(ctx context.Context, opts Options) (*Clients, error) {
	loaders := []func(*config.LoadOptions) error{
		config.WithRetryer(NewRetryer),
	}
	if opts.Region != "" {
		loaders = append(loaders, config.WithRegion(opts.Region))
	}
	if opts.Logger != nil {
		loaders = append(loaders, config.WithLogger(opts.Logger))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loaders...)
	if err != nil {
		return nil, fmt.Errorf("loading AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		region, rerr := regionFromIMDS(ctx, cfg)
		if rerr != nil {
			return nil, fmt.Errorf("no AWS region: set AWS_REGION (or --region) when not running on EC2: %w", rerr)
		}
		cfg.Region = region
	}
	return FromConfig(cfg), nil
}

// FromConfig builds the clients from an already loaded configuration.
func FromConfig(cfg aws.Config) *Clients {
	return &Clients{
		Region: cfg.Region,
		EC2:    ec2.NewFromConfig(cfg),
		SSM:    ssm.NewFromConfig(cfg),
		// The Price List API answers only in a few regions; the
		// commercial partition's prices are served from us-east-1.
		Pricing:       pricing.NewFromConfig(cfg, func(o *pricing.Options) { o.Region = PricingRegion(cfg.Region) }),
		IAM:           iam.NewFromConfig(cfg),
		STS:           sts.NewFromConfig(cfg),
		EKS:           eks.NewFromConfig(cfg),
		SQS:           sqs.NewFromConfig(cfg),
		ARCZonalShift: arczonalshift.NewFromConfig(cfg),
		SavingsPlans:  savingsplans.NewFromConfig(cfg),
		Config:        cfg,
	}
}

// NewRetryer is the retry policy of every client; see MaxAttempts.
func NewRetryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = MaxAttempts
		o.RateLimiter = ratelimit.None
	})
}

// HasPriceListAPI reports whether a region's partition has the Price List
// API at all: GovCloud and the isolated partitions do not, and their
// credentials cannot call the commercial endpoint, so their on-demand
// prices come from the embedded catalog, as with ISOLATED_VPC.
func HasPriceListAPI(region string) bool {
	return !strings.HasPrefix(region, "us-gov-") && !strings.Contains(region, "-iso")
}

// PricingRegion is the region whose Price List endpoint serves region's prices.
func PricingRegion(region string) string {
	switch {
	case strings.HasPrefix(region, "cn-"):
		return "cn-northwest-1"
	case strings.HasPrefix(region, "ap-"), strings.HasPrefix(region, "me-"), strings.HasPrefix(region, "af-"):
		return "ap-south-1"
	case strings.HasPrefix(region, "eu-"), strings.HasPrefix(region, "il-"):
		return "eu-central-1"
	default:
		return "us-east-1"
	}
}
