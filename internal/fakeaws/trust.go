package fakeaws

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// trustsWebIdentity says why role's trust policy refuses the web identity
// token (IRSA's AssumeRoleWithWebIdentity), or "", as STS decides: the
// token's issuer must be an OIDC provider registered in IAM, the token
// must be the issuer's (fake-aws can check only the local cluster's
// tokens, with a TokenReview for the token's audience), and a statement
// must allow that provider sts:AssumeRoleWithWebIdentity with its
// conditions on the issuer's sub and aud claims met.
func (s *Server) trustsWebIdentity(ctx context.Context, role, token string) string {
	claims, err := jwtClaims(token)
	if err != nil {
		return "the web identity token is not a JWT: " + err.Error()
	}
	issuer := strings.TrimPrefix(claims.Issuer, "https://")
	provider := fmt.Sprintf("arn:aws:iam::%s:oidc-provider/%s", accountID, issuer)
	if _, err := s.motoIAM.GetOpenIDConnectProvider(ctx, &iam.GetOpenIDConnectProviderInput{OpenIDConnectProviderArn: aws.String(provider)}); err != nil {
		return fmt.Sprintf("no OpenIDConnect provider %s is registered in IAM for the token's issuer %q", provider, claims.Issuer)
	}
	if s.cluster == nil {
		return "fake-aws has no cluster (--kubeconfig) to check the token's signature with"
	}
	review, err := s.cluster.kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: claims.Audience}}, metav1.CreateOptions{})
	if err != nil || !review.Status.Authenticated {
		return "the web identity token is not valid for its issuer"
	}
	doc, err := s.trustPolicy(ctx, role)
	if err != nil {
		return err.Error()
	}
	values := map[string][]string{issuer + ":sub": {claims.Subject}, issuer + ":aud": claims.Audience}
	for _, st := range doc.Statement {
		if st.Effect == "Allow" && st.Principal.has("Federated", provider) && st.Action.covers("sts:AssumeRoleWithWebIdentity") && conditionsMet(st.Condition, values) {
			return ""
		}
	}
	return fmt.Sprintf("role %s's trust policy allows no sts:AssumeRoleWithWebIdentity for provider %s, subject %q and audience %v", role, provider, claims.Subject, claims.Audience)
}

// conditionsMet checks StringEquals and StringLike conditions against the
// request's values; a condition on a key the request lacks, or with
// another operator, is not met.
func conditionsMet(conditions map[string]map[string]stringList, values map[string][]string) bool {
	for op, keys := range conditions {
		for key, want := range keys {
			have, ok := values[key]
			if !ok {
				return false
			}
			met := false
			for _, h := range have {
				for _, w := range want {
					switch op {
					case "StringEquals":
						met = met || h == w
					case "StringLike":
						met = met || globMatch(w, h)
					default:
						return false
					}
				}
			}
			if !met {
				return false
			}
		}
	}
	return true
}

// globMatch is IAM's StringLike: * any run of characters, ? any one.
func globMatch(pattern, s string) bool {
	re := "^" + strings.NewReplacer(`\*`, ".*", `\?`, ".").Replace(regexp.QuoteMeta(pattern)) + "$"
	ok, _ := regexp.MatchString(re, s)
	return ok
}

type tokenClaims struct {
	Issuer   string `json:"iss"`
	Subject  string `json:"sub"`
	Audience stringList
}

// jwtClaims reads a JWT's claims, unverified: the signature is the
// issuer's to check.
func jwtClaims(token string) (tokenClaims, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return tokenClaims{}, fmt.Errorf("%d parts, want 3", len(parts))
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return tokenClaims{}, err
	}
	var c struct {
		tokenClaims
		Aud stringList `json:"aud"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return tokenClaims{}, err
	}
	c.tokenClaims.Audience = c.Aud
	return c.tokenClaims, nil
}

// trustDocument is an assume-role policy, as far as the checks read it.
type trustDocument struct {
	Statement []struct {
		Effect    string
		Principal principals
		Action    stringList
		Condition map[string]map[string]stringList
	}
}

// stringList is a policy field of one string or a list of them.
type stringList []string

func (l *stringList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*l = []string{one}
		return nil
	}
	var many []string
	err := json.Unmarshal(b, &many)
	*l = many
	return err
}

// covers says whether the actions (wildcards allowed) include action.
func (l stringList) covers(action string) bool {
	for _, a := range l {
		if a == "*" || strings.EqualFold(a, action) || (strings.HasSuffix(a, "*") && strings.HasPrefix(strings.ToLower(action), strings.ToLower(strings.TrimSuffix(a, "*")))) {
			return true
		}
	}
	return false
}

// principals is a policy's Principal: "*" or a map of kind to values.
type principals map[string]stringList

func (p *principals) UnmarshalJSON(b []byte) error {
	var star string
	if err := json.Unmarshal(b, &star); err == nil {
		*p = principals{"*": {star}}
		return nil
	}
	m := map[string]stringList{}
	err := json.Unmarshal(b, &m)
	*p = m
	return err
}

func (p principals) has(kind, value string) bool {
	if _, ok := p["*"]; ok {
		return true
	}
	for _, v := range p[kind] {
		if v == value {
			return true
		}
	}
	return false
}

// trustPolicy reads a role's assume-role policy from moto.
func (s *Server) trustPolicy(ctx context.Context, roleARN string) (*trustDocument, error) {
	name := roleARN[strings.LastIndex(roleARN, "/")+1:]
	out, err := s.motoIAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(name)})
	if err != nil || out.Role == nil {
		return nil, fmt.Errorf("role %s not found", roleARN)
	}
	raw, err := url.QueryUnescape(aws.ToString(out.Role.AssumeRolePolicyDocument))
	if err != nil {
		raw = aws.ToString(out.Role.AssumeRolePolicyDocument)
	}
	doc := &trustDocument{}
	if err := json.Unmarshal([]byte(raw), doc); err != nil {
		return nil, fmt.Errorf("role %s's trust policy: %v", roleARN, err)
	}
	return doc, nil
}
