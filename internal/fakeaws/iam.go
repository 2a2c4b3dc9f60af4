package fakeaws

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
)

// faultIAMDenied marks, in the call log, a call the identity's policies
// refused; faultIAMError one the endpoint could not authorize (a gap in
// its model of the call, or the evaluator failing), answered with a 500.
const (
	faultIAMDenied = "iamDenied"
	faultIAMError  = "iamError"
)

// Credentials are an access key pair.
type Credentials struct {
	AccessKeyID     string `json:"accessKeyId"`
	SecretAccessKey string `json:"secretAccessKey"`
}

// iamEnforcer authorizes each call as AWS does, which moto does not: for
// the identity that signed it (its access key), with its role's attached
// and inline policies, and with the resource ARNs and condition keys of
// each authorization the call makes (a CreateFleet is authorized on the
// fleet, instances, volumes and interfaces it creates, with their request
// tags, on the launch template, image, subnets and groups it uses, with
// their resource tags, for the implicit CreateTags, and for iam:PassRole).
// The decision is the independent evaluator's (evaluator).
type iamEnforcer struct {
	s     *Server
	eval  *evaluator
	admin Credentials

	mu sync.Mutex
	// sessions maps the access keys STS handed out to the assumed role's
	// session ARN.
	sessions map[string]string
	// policies caches each role's policies until an IAM or CloudFormation
	// write passes through the endpoint.
	policies map[string][]PolicyDocument
	// allowed are the authorizations of the sessions' calls that were
	// allowed, each once, for a test that asks which statements a run
	// needed.
	allowed []Authorization
	seen    map[string]bool
}

// Authorization is one authorization a session's call needed and got.
type Authorization struct {
	// Call is the call it was for, service:Action.
	Call      string              `json:"call"`
	Principal string              `json:"principal"`
	Action    string              `json:"action"`
	Resource  string              `json:"resource"`
	Context   map[string][]string `json:"context"`
}

var (
	accessKeyRE       = regexp.MustCompile(`Credential=([^/,\s]+)/`)
	stsAccessKeyRE    = regexp.MustCompile(`<AccessKeyId>([^<]+)</AccessKeyId>`)
	stsAssumedRoleARN = regexp.MustCompile(`<AssumedRoleUser>\s*(?:<AssumedRoleId>[^<]*</AssumedRoleId>\s*)?<Arn>([^<]+)</Arn>`)
	stsAssumedRoleAlt = regexp.MustCompile(`<Arn>(arn:aws:sts::[0-9]+:assumed-role/[^<]+)</Arn>`)
)

func accessKeyOf(r *http.Request) string {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		auth = "Credential=" + r.URL.Query().Get("X-Amz-Credential")
	}
	if m := accessKeyRE.FindStringSubmatch(auth); m != nil {
		return m[1]
	}
	return ""
}

// principal names who signed r: "admin", a role's session ARN, or "" for
// an unsigned or unknown key.
func (e *iamEnforcer) principal(r *http.Request) string {
	key := accessKeyOf(r)
	if key != "" && key == e.admin.AccessKeyID {
		return "admin"
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sessions[key]
}

// observe learns the sessions STS hands out, and forgets cached policies
// when IAM or CloudFormation may have changed them.
func (e *iamEnforcer) observe(c *call, a *answer) {
	if a.status != http.StatusOK {
		return
	}
	switch {
	case c.Service == "sts" && strings.HasPrefix(c.Action, "AssumeRole"):
		key := stsAccessKeyRE.FindSubmatch(a.body)
		arn := stsAssumedRoleARN.FindSubmatch(a.body)
		if arn == nil {
			arn = stsAssumedRoleAlt.FindSubmatch(a.body)
		}
		if key != nil && arn != nil {
			e.mu.Lock()
			e.sessions[string(key[1])] = string(arn[1])
			e.mu.Unlock()
		}
	case (c.Service == "iam" || c.Service == "cloudformation") && !strings.HasPrefix(c.Action, "Get") && !strings.HasPrefix(c.Action, "List"):
		e.mu.Lock()
		e.policies = map[string][]PolicyDocument{}
		e.mu.Unlock()
	}
}

// authorize returns the refusal for c, or nil when its identity may make
// every authorization it needs.
func (e *iamEnforcer) authorize(ctx context.Context, c *call, r *http.Request) *awsError {
	key := accessKeyOf(r)
	if key == "" && c.Service == "sts" && c.Action == "AssumeRoleWithWebIdentity" {
		// Unsigned: the role's trust policy decides.
		if why := e.s.trustsWebIdentity(ctx, c.Form.Get("RoleArn"), c.Form.Get("WebIdentityToken")); why != "" {
			e.s.log.Info("web identity refused", "role", c.Form.Get("RoleArn"), "reason", why)
			return &awsError{http.StatusForbidden, "AccessDenied", "Not authorized to perform sts:AssumeRoleWithWebIdentity: " + why, true}
		}
		return nil
	}
	if key == e.admin.AccessKeyID {
		return nil
	}
	e.mu.Lock()
	session, ok := e.sessions[key]
	e.mu.Unlock()
	if !ok {
		if c.Protocol == protoEC2 {
			return &awsError{http.StatusUnauthorized, "AuthFailure", "AWS was not able to validate the provided access credentials", true}
		}
		return &awsError{http.StatusForbidden, "InvalidClientTokenId", "The security token included in the request is invalid.", true}
	}
	if c.key() == "sts:GetCallerIdentity" {
		return nil // needs no permission
	}
	role := roleOfSession(session)
	policies, err := e.rolePolicies(ctx, role)
	if err != nil {
		return &awsError{http.StatusInternalServerError, "InternalFailure", "fake-aws: reading the policies of role " + role + ": " + err.Error(), false}
	}
	checks, err := e.checks(ctx, c, r)
	if err != nil {
		return &awsError{http.StatusInternalServerError, "InternalFailure", "fake-aws: modelling the authorization of " + c.key() + ": " + err.Error(), false}
	}
	for _, check := range checks {
		if check.Context == nil {
			check.Context = map[string][]string{}
		}
		check.Context["aws:RequestedRegion"] = []string{c.Region}
		result, err := e.eval.allowed(ctx, session, policies, check)
		if err != nil {
			e.s.log.Error(err, "IAM evaluation failed", "call", c.key(), "action", check.Action, "resource", check.Resource)
			return &awsError{http.StatusInternalServerError, "InternalFailure", err.Error(), false}
		}
		if result == "NotApplicable" {
			continue
		}
		if result == "Allowed" {
			e.record(Authorization{Call: c.key(), Principal: session, Action: check.Action, Resource: check.Resource, Context: check.Context})
			continue
		}
		why := "because no identity-based policy allows the " + check.Action + " action"
		if result == "ExplicitlyDenied" {
			why = "with an explicit deny in an identity-based policy"
		}
		msg := fmt.Sprintf("User: %s is not authorized to perform: %s on resource: %s %s", session, check.Action, check.Resource, why)
		e.s.log.Info("IAM denied", "call", c.key(), "action", check.Action, "resource", check.Resource, "context", check.Context, "principal", session)
		denied := accessDenied(c, msg)
		return &denied
	}
	return nil
}

// record keeps a once; the session's name is left out of the key, so a
// restarted controller's calls count as the same.
func (e *iamEnforcer) record(a Authorization) {
	key, _ := json.Marshal([]any{a.Call, roleOfSession(a.Principal), a.Action, a.Resource, a.Context})
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.seen == nil {
		e.seen = map[string]bool{}
	}
	if !e.seen[string(key)] {
		e.seen[string(key)] = true
		e.allowed = append(e.allowed, a)
	}
}

// roleOfSession is the role name in arn:aws:sts::<account>:assumed-role/<role>/<session>.
func roleOfSession(arn string) string {
	_, rest, _ := strings.Cut(arn, ":assumed-role/")
	role, _, _ := strings.Cut(rest, "/")
	return role
}

// rolePolicies reads the role's attached managed policies' default versions
// and its inline policies from moto.
func (e *iamEnforcer) rolePolicies(ctx context.Context, role string) ([]PolicyDocument, error) {
	e.mu.Lock()
	cached, ok := e.policies[role]
	e.mu.Unlock()
	if ok {
		return cached, nil
	}
	api := e.s.motoIAM
	var out []PolicyDocument
	attached, err := api.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: aws.String(role)})
	if err != nil {
		return nil, err
	}
	for _, p := range attached.AttachedPolicies {
		pol, err := api.GetPolicy(ctx, &iam.GetPolicyInput{PolicyArn: p.PolicyArn})
		if err != nil {
			return nil, err
		}
		v, err := api.GetPolicyVersion(ctx, &iam.GetPolicyVersionInput{PolicyArn: p.PolicyArn, VersionId: pol.Policy.DefaultVersionId})
		if err != nil {
			return nil, err
		}
		doc, err := policyJSON(aws.ToString(v.PolicyVersion.Document))
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", aws.ToString(p.PolicyArn), err)
		}
		out = append(out, PolicyDocument{Name: aws.ToString(p.PolicyName), Policy: doc})
	}
	inline, err := api.ListRolePolicies(ctx, &iam.ListRolePoliciesInput{RoleName: aws.String(role)})
	if err != nil {
		return nil, err
	}
	for _, name := range inline.PolicyNames {
		p, err := api.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(role), PolicyName: aws.String(name)})
		if err != nil {
			return nil, err
		}
		doc, err := policyJSON(aws.ToString(p.PolicyDocument))
		if err != nil {
			return nil, fmt.Errorf("inline policy %s: %w", name, err)
		}
		out = append(out, PolicyDocument{Name: name, Policy: doc})
	}
	e.mu.Lock()
	e.policies[role] = out
	e.mu.Unlock()
	return out, nil
}

// policyJSON decodes a policy document as IAM returns it: URL-encoded JSON
// (moto sometimes answers it decoded).
func policyJSON(doc string) (any, error) {
	if strings.HasPrefix(doc, "%") {
		d, err := url.QueryUnescape(doc)
		if err != nil {
			return nil, err
		}
		doc = d
	}
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		return nil, err
	}
	return v, nil
}

// checks are the authorizations AWS makes for c. Actions Joiner does not
// call with resource-level permissions are authorized on "*"; a policy
// that scopes such an action to ARNs then refuses it, which the tests see.
func (e *iamEnforcer) checks(ctx context.Context, c *call, r *http.Request) ([]authCheck, error) {
	service := strings.TrimPrefix(c.Service, "api.")
	action := service + ":" + c.Action
	switch c.key() {
	case "ec2:CreateFleet":
		return e.createFleetChecks(ctx, c)
	case "ec2:CreateLaunchTemplate":
		tags := formTagSpecs(c.Form)["launch-template"]
		arn := ec2ARN(c.Region, "launch-template", "*")
		out := []authCheck{{Action: action, Resource: arn, Context: requestTags(tags)}}
		if len(tags) > 0 {
			out = append(out, createTagsAtCreation(arn, tags, "CreateLaunchTemplate"))
		}
		return out, nil
	case "ec2:CreateTags":
		add := formTags(c.Form, "Tag")
		var out []authCheck
		for _, id := range formList(c.Form, "ResourceId") {
			have, err := e.ec2Tags(ctx, id)
			if err != nil {
				return nil, err
			}
			vars := requestTags(add)
			for k, v := range resourceTags(have) {
				vars[k] = v
			}
			out = append(out, authCheck{Action: action, Resource: ec2ARN(c.Region, ec2Type(id), id), Context: vars})
		}
		return out, nil
	case "ec2:TerminateInstances":
		var out []authCheck
		for _, id := range formList(c.Form, "InstanceId") {
			have, err := e.ec2Tags(ctx, id)
			if err != nil {
				return nil, err
			}
			out = append(out, authCheck{Action: action, Resource: ec2ARN(c.Region, "instance", id), Context: resourceTags(have)})
		}
		return out, nil
	case "ec2:DeleteLaunchTemplate":
		id, tags, err := e.launchTemplate(ctx, c.Form.Get("LaunchTemplateId"), c.Form.Get("LaunchTemplateName"))
		if err != nil {
			return nil, err
		}
		return []authCheck{{Action: action, Resource: ec2ARN(c.Region, "launch-template", id), Context: resourceTags(tags)}}, nil
	case "iam:CreateInstanceProfile":
		return []authCheck{{Action: action, Resource: profileARN(c.Form.Get("InstanceProfileName")), Context: requestTags(formTags(c.Form, "Tags.member"))}}, nil
	case "iam:TagInstanceProfile", "iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile", "iam:GetInstanceProfile":
		name := c.Form.Get("InstanceProfileName")
		have, err := e.profileTags(ctx, name)
		if err != nil {
			return nil, err
		}
		vars := resourceTags(have)
		if c.Action == "TagInstanceProfile" {
			for k, v := range requestTags(formTags(c.Form, "Tags.member")) {
				vars[k] = v
			}
		}
		out := []authCheck{{Action: action, Resource: profileARN(name), Context: vars}}
		if c.Action == "AddRoleToInstanceProfile" {
			// Putting a role in a profile passes it to EC2.
			out = append(out, passRole(roleARN(c.Form.Get("RoleName"))))
		}
		return out, nil
	case "iam:GetRole":
		return []authCheck{{Action: action, Resource: roleARN(c.Form.Get("RoleName"))}}, nil
	case "ssm:GetParameter", "ssm:GetParameters", "ssm:GetParametersByPath":
		names := jsonList(c.JSON, "Names")
		if c.Action == "GetParameter" {
			names = []string{jsonString(c.JSON, "Name")}
		} else if c.Action == "GetParametersByPath" {
			names = []string{jsonString(c.JSON, "Path")}
		}
		var out []authCheck
		for _, n := range names {
			out = append(out, authCheck{Action: action, Resource: parameterARN(c.Region, n)})
		}
		return out, nil
	case "sqs:GetQueueUrl":
		return []authCheck{{Action: action, Resource: queueARN(c.Region, jsonString(c.JSON, "QueueName"))}}, nil
	case "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:DeleteMessageBatch", "sqs:ChangeMessageVisibility", "sqs:GetQueueAttributes", "sqs:SendMessage":
		u := jsonString(c.JSON, "QueueUrl")
		return []authCheck{{Action: action, Resource: queueARN(c.Region, u[strings.LastIndex(u, "/")+1:])}}, nil
	case "arc-zonal-shift:GetManagedResource", "arc-zonal-shift:StartZonalShift":
		// ARC authorizes on the resource's identifier, a condition key, as
		// the guides' policy scopes it to the cluster's ARN.
		id := lastSegment(r.URL.EscapedPath())
		if c.Action == "StartZonalShift" {
			id = jsonString(c.JSON, "resourceIdentifier")
		}
		return []authCheck{{Action: action, Resource: "*", Context: map[string][]string{"arc-zonal-shift:ResourceIdentifier": {id}}}}, nil
	case "eks:DescribeCluster":
		name := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		return []authCheck{{Action: action, Resource: fmt.Sprintf("arn:aws:eks:%s:%s:cluster/%s", c.Region, accountID, name)}}, nil
	}
	return []authCheck{{Action: action, Resource: "*"}}, nil
}

// startIAM starts the evaluator and makes the administrator: a moto user
// with an access key, whose calls are all allowed (the account's root, in
// effect), for the tests' own setup and the guide's CloudFormation deploy.
func (s *Server) startIAM(ctx context.Context) (*iamEnforcer, error) {
	eval, err := startEvaluator(s.opts.IAMSimulateModules)
	if err != nil {
		return nil, err
	}
	if _, err := s.motoIAM.CreateUser(ctx, &iam.CreateUserInput{UserName: aws.String("fake-aws-admin")}); err != nil {
		eval.stop()
		return nil, fmt.Errorf("fake-aws: creating the administrator: %w", err)
	}
	key, err := s.motoIAM.CreateAccessKey(ctx, &iam.CreateAccessKeyInput{UserName: aws.String("fake-aws-admin")})
	if err != nil {
		eval.stop()
		return nil, fmt.Errorf("fake-aws: creating the administrator's access key: %w", err)
	}
	return &iamEnforcer{s: s, eval: eval, sessions: map[string]string{}, policies: map[string][]PolicyDocument{},
		admin: Credentials{AccessKeyID: aws.ToString(key.AccessKey.AccessKeyId), SecretAccessKey: aws.ToString(key.AccessKey.SecretAccessKey)}}, nil
}

// AdminCredentials are the administrator's keys under IAMEnforce; empty
// otherwise (every call is allowed).
func (s *Server) AdminCredentials() Credentials {
	if s.iam == nil {
		return Credentials{}
	}
	return s.iam.admin
}

// Authorizations are the authorizations the sessions' calls needed and got
// so far, oldest first (IAMEnforce).
func (s *Server) Authorizations() []Authorization {
	if s.iam == nil {
		return nil
	}
	s.iam.mu.Lock()
	defer s.iam.mu.Unlock()
	return slices.Clone(s.iam.allowed)
}

// RolePolicies are the policies a role's sessions are decided by: its
// attached managed policies' default versions and its inline policies.
func (s *Server) RolePolicies(ctx context.Context, role string) ([]PolicyDocument, error) {
	if s.iam == nil {
		return nil, fmt.Errorf("fake-aws: IAM is not enforced")
	}
	return s.iam.rolePolicies(ctx, role)
}

// Evaluate asks the evaluator whether policies allow a: Allowed,
// ImplicitlyDenied, ExplicitlyDenied or NotApplicable.
func (s *Server) Evaluate(ctx context.Context, policies []PolicyDocument, a Authorization) (string, error) {
	if s.iam == nil {
		return "", fmt.Errorf("fake-aws: IAM is not enforced")
	}
	return s.iam.eval.allowed(ctx, a.Principal, policies, authCheck{Action: a.Action, Resource: a.Resource, Context: a.Context})
}
