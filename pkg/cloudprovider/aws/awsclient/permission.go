package awsclient

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/aws/smithy-go"
)

// deniedCodes are the error codes AWS answers a call with when the
// caller's IAM policy does not allow it: EC2's, the query services' (IAM,
// STS) and the JSON and REST services' (SSM, Pricing, SQS, EKS).
var deniedCodes = map[string]bool{"UnauthorizedOperation": true, "AccessDenied": true, "AccessDeniedException": true}

// PermissionError is a call AWS refused because the role Joiner runs as
// may not make it. AWS's own message does not always name the action (EC2
// often sends only an encoded authorization message) and comes after the
// SDK's request details, where a condition message that is cut short loses
// it; this error names the action and the fix first.
type PermissionError struct {
	// Action is the IAM action of the call, such as "ec2:CreateFleet";
	// empty when the error does not say which call it came from.
	Action string
	// Missing is the permission AWS says is missing, when its message
	// names one ("not authorized to perform: iam:PassRole"): a call is
	// authorized for more than its own action (a CreateFleet needs
	// iam:PassRole for the instance profile's role and ec2:CreateTags for
	// the tags it creates), and the policy needs the one AWS names.
	// Otherwise Action.
	Missing string
	// Code is AWS's error code, such as "UnauthorizedOperation".
	Code string
	Err  error
}

func (e *PermissionError) Error() string {
	if e.Action == "" {
		return fmt.Sprintf("an AWS call was refused (%s): allow its action in the IAM policy of the role Joiner runs as; %v", e.Code, e.Err)
	}
	return fmt.Sprintf("not authorized to call %s (%s): allow %s in the IAM policy of the role Joiner runs as; %v", e.Action, e.Code, e.Missing, e.Err)
}

func (e *PermissionError) Unwrap() error { return e.Err }

// ExplainPermission returns err as a *PermissionError when it holds an
// AWS answer that the caller lacks a permission, and err unchanged
// otherwise (nil included). Wrapping keeps the AWS error reachable with
// errors.As, so its code still decides retries and condition reasons.
func ExplainPermission(err error) error {
	var already *PermissionError
	if err == nil || errors.As(err, &already) {
		return err
	}
	if !IsAccessDenied(err) {
		return err
	}
	var apiErr smithy.APIError
	errors.As(err, &apiErr)
	out := &PermissionError{Code: apiErr.ErrorCode(), Err: err}
	var op *smithy.OperationError
	if errors.As(err, &op) && op.Service() != "" && op.Operation() != "" {
		// IAM's action prefixes are the SDK's service IDs in lower case
		// for every service Joiner calls (ec2, ssm, iam, pricing, eks, sqs, sts).
		out.Action = strings.ToLower(strings.ReplaceAll(op.Service(), " ", "")) + ":" + op.Operation()
	}
	out.Missing = out.Action
	if m := namedAction.FindStringSubmatch(apiErr.ErrorMessage()); m != nil {
		out.Missing = m[1]
	}
	return out
}

// namedAction finds the action in AWS's refusal message: "User: arn:... is
// not authorized to perform: iam:PassRole on resource: ...".
var namedAction = regexp.MustCompile(`not authorized to perform: ([a-z0-9-]+:[A-Za-z0-9]+)`)

// IsAccessDenied reports whether err holds an AWS answer that the caller
// lacks a permission.
func IsAccessDenied(err error) bool {
	var apiErr smithy.APIError
	return errors.As(err, &apiErr) && deniedCodes[apiErr.ErrorCode()]
}
