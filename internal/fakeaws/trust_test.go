package fakeaws

import (
	"encoding/base64"
	"testing"
)

// The IRSA trust conditions as STS reads them: StringEquals and
// StringLike on the issuer's sub and aud, all of them met; any other
// operator, or a key the request lacks, fails closed.
func TestConditionsMet(t *testing.T) {
	values := map[string][]string{"oidc.example/id/X:sub": {"system:serviceaccount:kube-system:karpenter"}, "oidc.example/id/X:aud": {"sts.amazonaws.com"}}
	cases := []struct {
		name string
		cond map[string]map[string]stringList
		want bool
	}{
		{"none", nil, true},
		{"sub and aud equal", map[string]map[string]stringList{"StringEquals": {"oidc.example/id/X:sub": {"system:serviceaccount:kube-system:karpenter"}, "oidc.example/id/X:aud": {"sts.amazonaws.com"}}}, true},
		{"another subject", map[string]map[string]stringList{"StringEquals": {"oidc.example/id/X:sub": {"system:serviceaccount:default:default"}}}, false},
		{"one of two subjects", map[string]map[string]stringList{"StringEquals": {"oidc.example/id/X:sub": {"system:serviceaccount:a:b", "system:serviceaccount:kube-system:karpenter"}}}, true},
		{"a wildcard subject", map[string]map[string]stringList{"StringLike": {"oidc.example/id/X:sub": {"system:serviceaccount:kube-system:*"}}}, true},
		{"a wildcard of another namespace", map[string]map[string]stringList{"StringLike": {"oidc.example/id/X:sub": {"system:serviceaccount:default:*"}}}, false},
		{"another issuer's key", map[string]map[string]stringList{"StringEquals": {"oidc.other/id/Y:sub": {"system:serviceaccount:kube-system:karpenter"}}}, false},
		{"an operator not modelled", map[string]map[string]stringList{"StringNotEquals": {"oidc.example/id/X:sub": {"x"}}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := conditionsMet(tc.cond, values); got != tc.want {
				t.Fatalf("conditionsMet %v, want %v", got, tc.want)
			}
		})
	}
}

func TestJWTClaims(t *testing.T) {
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, tc := range []struct {
		payload string
		aud     []string
	}{
		{`{"iss":"https://oidc.example/id/X","sub":"system:serviceaccount:kube-system:karpenter","aud":"sts.amazonaws.com"}`, []string{"sts.amazonaws.com"}},
		{`{"iss":"https://oidc.example/id/X","sub":"system:serviceaccount:kube-system:karpenter","aud":["a","b"]}`, []string{"a", "b"}},
	} {
		c, err := jwtClaims(enc(`{"alg":"RS256"}`) + "." + enc(tc.payload) + ".sig")
		if err != nil || c.Issuer != "https://oidc.example/id/X" || c.Subject != "system:serviceaccount:kube-system:karpenter" || len(c.Audience) != len(tc.aud) || c.Audience[0] != tc.aud[0] {
			t.Errorf("%s: %+v, %v", tc.payload, c, err)
		}
	}
	if _, err := jwtClaims("not-a-jwt"); err == nil {
		t.Error("a token that is not a JWT was read")
	}
}
