package amifamily

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"golang.org/x/sync/errgroup"
)

// SSMAPI is the part of SSM that reads image parameters. It is
// GetParameter, one name a call, and not the batched GetParameters: IAM
// authorizes the two as separate actions, and the controller policy that
// Karpenter's published CloudFormation creates (which a cluster migrated
// from Karpenter keeps) grants ssm:GetParameter alone on /aws/service/*.
type SSMAPI interface {
	GetParameter(ctx context.Context, in *ssm.GetParameterInput, opts ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

// parameterReads is how many GetParameter calls run at once: a class's
// alias reads up to five names, and a watch over several families a dozen,
// which this keeps to a few round trips without bursting into SSM's
// throttle.
const parameterReads = 5

// ReadParameters returns the values of the named parameters that exist.
// A name SSM does not know is left out, not failed: not every variant of a
// family is published in every region or for every Kubernetes version. Any
// other failure fails the read, naming the parameter.
func ReadParameters(ctx context.Context, api SSMAPI, names []string) (map[string]string, error) {
	var mu sync.Mutex
	out := make(map[string]string, len(names))
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(parameterReads)
	for _, name := range names {
		g.Go(func() error {
			res, err := api.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name)})
			var notFound *ssmtypes.ParameterNotFound
			switch {
			case errors.As(err, &notFound):
				return nil
			case err != nil:
				return fmt.Errorf("getting SSM parameter %s: %w", name, err)
			}
			mu.Lock()
			out[name] = strings.TrimSpace(aws.ToString(res.Parameter.Value))
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}
