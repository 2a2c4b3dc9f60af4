package awsclient

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/smithy-go"
)

func TestExplainPermission(t *testing.T) {
	denied := func(service, op, code string) error {
		return fmt.Errorf("launching nodeclaim x: %w", &smithy.OperationError{ServiceID: service, OperationName: op,
			Err: &smithy.GenericAPIError{Code: code, Message: "You are not authorized to perform this operation. Encoded authorization failure message: abc"}})
	}
	cases := []struct {
		name string
		err  error
		// want are fragments of the message; nil means err comes back unchanged.
		want []string
	}{
		{"nil", nil, nil},
		{"not an AWS error", errors.New("boom"), nil},
		{"another AWS error", denied("EC2", "CreateFleet", "RequestLimitExceeded"), nil},
		{"EC2", denied("EC2", "CreateFleet", "UnauthorizedOperation"),
			[]string{"not authorized to call ec2:CreateFleet (UnauthorizedOperation): allow ec2:CreateFleet in the IAM policy", "Encoded authorization failure message"}},
		{"IAM", denied("IAM", "CreateInstanceProfile", "AccessDenied"), []string{"iam:CreateInstanceProfile (AccessDenied)"}},
		{"SSM", denied("SSM", "GetParameter", "AccessDeniedException"), []string{"allow ssm:GetParameter in the IAM policy"}},
		{"no operation", &smithy.GenericAPIError{Code: "AccessDenied"}, []string{"an AWS call was refused (AccessDenied): allow its action in the IAM policy"}},
		// AWS names the missing permission, which may be another action
		// than the call's own.
		{"a CreateFleet without iam:PassRole", fmt.Errorf("launching: %w", &smithy.OperationError{ServiceID: "EC2", OperationName: "CreateFleet",
			Err: &smithy.GenericAPIError{Code: "UnauthorizedOperation", Message: "You are not authorized to perform this operation. User: arn:aws:sts::123456789012:assumed-role/demo-karpenter/s is not authorized to perform: iam:PassRole on resource: arn:aws:iam::123456789012:role/KarpenterNodeRole-demo because no identity-based policy allows the iam:PassRole action"}}),
			[]string{"not authorized to call ec2:CreateFleet (UnauthorizedOperation): allow iam:PassRole in the IAM policy"}},
		{"a CreateFleet without its tags' ec2:CreateTags", fmt.Errorf("launching: %w", &smithy.OperationError{ServiceID: "EC2", OperationName: "CreateFleet",
			Err: &smithy.GenericAPIError{Code: "UnauthorizedOperation", Message: "You are not authorized to perform this operation. User: arn:aws:sts::123456789012:assumed-role/r/s is not authorized to perform: ec2:CreateTags on resource: arn:aws:ec2:us-east-1:123456789012:instance/* because no identity-based policy allows the ec2:CreateTags action"}}),
			[]string{"allow ec2:CreateTags in the IAM policy"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ExplainPermission(tc.err)
			if tc.want == nil {
				if got != tc.err {
					t.Fatalf("got %v, want the error unchanged", got)
				}
				return
			}
			msg := got.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q does not say %q", msg, w)
				}
			}
			if !strings.HasPrefix(msg, "not authorized") && !strings.HasPrefix(msg, "an AWS call") {
				t.Errorf("the fix must come first, where a cut message keeps it: %q", msg)
			}
			var apiErr smithy.APIError
			if !errors.As(got, &apiErr) || !errors.Is(got, tc.err) {
				t.Errorf("the AWS error must stay reachable: %v", got)
			}
			if again := ExplainPermission(got); again != got {
				t.Errorf("explained twice: %v", again)
			}
		})
	}
}
