package fakeaws

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/google/uuid"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodIdentityPath is where the endpoint plays the EKS Pod Identity agent:
// a pod's SDK, given AWS_CONTAINER_CREDENTIALS_FULL_URI=<endpoint>/v1/credentials
// and AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE, gets its role's credentials
// here, as it does from the agent at 169.254.170.23.
const PodIdentityPath = "/v1/credentials"

// podIdentityAudience is the audience of the service account tokens the
// agent takes, as EKS projects them.
const podIdentityAudience = "pods.eks.amazonaws.com"

// podIdentities are EKS Pod Identity associations, which moto does not
// have: which role a cluster's service account gets.
type podIdentities struct {
	mu    sync.Mutex
	items []*podIdentity
}

type podIdentity struct {
	ID, ARN, Cluster, Namespace, ServiceAccount, Role string
	Tags                                              map[string]any
	Created                                           time.Time
}

func (p *podIdentity) doc() map[string]any {
	return map[string]any{"clusterName": p.Cluster, "namespace": p.Namespace, "serviceAccount": p.ServiceAccount, "roleArn": p.Role,
		"associationArn": p.ARN, "associationId": p.ID, "tags": p.Tags, "createdAt": float64(p.Created.Unix()), "modifiedAt": float64(p.Created.Unix()),
		"disableSessionTags": false}
}

// podIdentityAssociations answers EKS's association calls: create, list,
// describe, delete.
func (s *Server) podIdentityAssociations(ctx context.Context, c *call, r *http.Request) *answer {
	parts := strings.Split(strings.Trim(r.URL.EscapedPath(), "/"), "/")
	cluster, _ := url.PathUnescape(parts[1])
	if _, err := s.managedResource(ctx, c.Region, cluster); err != nil {
		return restError(c, awsError{http.StatusNotFound, "ResourceNotFoundException", fmt.Sprintf("No cluster found for name: %s.", cluster), true})
	}
	p := &s.podIDs
	p.mu.Lock()
	defer p.mu.Unlock()
	switch c.Action {
	case "CreatePodIdentityAssociation":
		ns, sa, role := jsonString(c.JSON, "namespace"), jsonString(c.JSON, "serviceAccount"), jsonString(c.JSON, "roleArn")
		if ns == "" || sa == "" || role == "" {
			return restError(c, awsError{http.StatusBadRequest, "InvalidParameterException", "namespace, serviceAccount and roleArn are required", true})
		}
		for _, a := range p.items {
			if a.Cluster == cluster && a.Namespace == ns && a.ServiceAccount == sa {
				return restError(c, awsError{http.StatusConflict, "ResourceInUseException", fmt.Sprintf("Association already exists: %s", a.ID), true})
			}
		}
		id := "a-" + strings.ReplaceAll(uuid.NewString(), "-", "")[:17]
		tags, _ := c.JSON["tags"].(map[string]any)
		a := &podIdentity{ID: id, ARN: fmt.Sprintf("arn:aws:eks:%s:%s:podidentityassociation/%s/%s", c.Region, accountID, cluster, id),
			Cluster: cluster, Namespace: ns, ServiceAccount: sa, Role: role, Tags: tags, Created: s.clock.Now()}
		p.items = append(p.items, a)
		return jsonREST(http.StatusOK, map[string]any{"association": a.doc()})
	case "ListPodIdentityAssociations":
		q := r.URL.Query()
		out := []any{}
		for _, a := range p.items {
			if a.Cluster != cluster || (q.Get("namespace") != "" && q.Get("namespace") != a.Namespace) || (q.Get("serviceAccount") != "" && q.Get("serviceAccount") != a.ServiceAccount) {
				continue
			}
			out = append(out, map[string]any{"clusterName": a.Cluster, "namespace": a.Namespace, "serviceAccount": a.ServiceAccount, "associationArn": a.ARN, "associationId": a.ID})
		}
		return jsonREST(http.StatusOK, map[string]any{"associations": out})
	case "DescribePodIdentityAssociation", "DeletePodIdentityAssociation":
		id := lastSegment(r.URL.EscapedPath())
		for i, a := range p.items {
			if a.Cluster == cluster && a.ID == id {
				if c.Action == "DeletePodIdentityAssociation" {
					p.items = append(p.items[:i], p.items[i+1:]...)
				}
				return jsonREST(http.StatusOK, map[string]any{"association": a.doc()})
			}
		}
		return restError(c, awsError{http.StatusNotFound, "ResourceNotFoundException", fmt.Sprintf("Association %s not found.", id), true})
	}
	return restError(c, awsError{http.StatusNotFound, "UnknownOperationException", "unknown pod identity call", true})
}

// podCredentials is the Pod Identity agent: the service account token in
// Authorization is checked by the cluster (a TokenReview for the agent's
// audience), its association found, the role's trust policy checked for
// EKS Pod Identity, and a session of the role returned. Under IAMEnforce
// the session's calls are authorized as that role's.
func (s *Server) podCredentials(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, code, msg string) {
		s.log.Info("pod identity refused", "reason", msg)
		writeJSON(w, status, map[string]string{"code": code, "message": msg})
	}
	token := strings.TrimSpace(r.Header.Get("Authorization"))
	if token == "" {
		fail(http.StatusBadRequest, "InvalidTokenException", "no service account token in the Authorization header")
		return
	}
	if s.cluster == nil {
		fail(http.StatusInternalServerError, "ServiceUnavailable", "fake-aws has no cluster (--kubeconfig) to check service account tokens with")
		return
	}
	ctx := r.Context()
	review, err := s.cluster.kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{podIdentityAudience}}}, metav1.CreateOptions{})
	if err != nil {
		fail(http.StatusInternalServerError, "ServiceUnavailable", "reviewing the token: "+err.Error())
		return
	}
	if !review.Status.Authenticated {
		fail(http.StatusUnauthorized, "InvalidTokenException", "the token is not a valid service account token for audience "+podIdentityAudience+": "+review.Status.Error)
		return
	}
	ns, sa, ok := serviceAccountOf(review.Status.User.Username)
	if !ok {
		fail(http.StatusUnauthorized, "InvalidTokenException", "the token is not a service account's: "+review.Status.User.Username)
		return
	}
	var assoc *podIdentity
	s.podIDs.mu.Lock()
	for _, a := range s.podIDs.items {
		if a.Cluster == s.opts.ClusterName && a.Namespace == ns && a.ServiceAccount == sa {
			assoc = a
		}
	}
	s.podIDs.mu.Unlock()
	if assoc == nil {
		fail(http.StatusBadRequest, "AccessDeniedException", fmt.Sprintf("no EKS Pod Identity association for service account %s/%s in cluster %s", ns, sa, s.opts.ClusterName))
		return
	}
	if why := s.trustsPodIdentity(ctx, assoc.Role); why != "" {
		fail(http.StatusForbidden, "AccessDeniedException", why)
		return
	}
	out, err := s.motoSTS().AssumeRole(ctx, &sts.AssumeRoleInput{RoleArn: aws.String(assoc.Role), RoleSessionName: aws.String("eks-" + s.opts.ClusterName + "-" + sa)})
	if err != nil || out.Credentials == nil {
		fail(http.StatusInternalServerError, "ServiceUnavailable", fmt.Sprintf("assuming %s: %v", assoc.Role, err))
		return
	}
	key := aws.ToString(out.Credentials.AccessKeyId)
	if s.iam != nil {
		s.iam.mu.Lock()
		s.iam.sessions[key] = aws.ToString(out.AssumedRoleUser.Arn)
		s.iam.mu.Unlock()
	}
	writeJSON(w, http.StatusOK, map[string]string{
		"AccessKeyId": key, "SecretAccessKey": aws.ToString(out.Credentials.SecretAccessKey), "Token": aws.ToString(out.Credentials.SessionToken),
		"AccountId": accountID, "Expiration": aws.ToTime(out.Credentials.Expiration).UTC().Format(time.RFC3339),
	})
}

func serviceAccountOf(username string) (ns, sa string, ok bool) {
	parts := strings.Split(username, ":")
	if len(parts) != 4 || parts[0] != "system" || parts[1] != "serviceaccount" {
		return "", "", false
	}
	return parts[2], parts[3], true
}

// trustsPodIdentity says why role does not let EKS Pod Identity assume it,
// or "": its trust policy must allow the service principal
// pods.eks.amazonaws.com both sts:AssumeRole and sts:TagSession.
func (s *Server) trustsPodIdentity(ctx context.Context, role string) string {
	doc, err := s.trustPolicy(ctx, role)
	if err != nil {
		return err.Error()
	}
	need := map[string]bool{"sts:AssumeRole": false, "sts:TagSession": false}
	for _, st := range doc.Statement {
		if st.Effect != "Allow" || !st.Principal.has("Service", podIdentityAudience) {
			continue
		}
		for a := range need {
			if st.Action.covers(a) {
				need[a] = true
			}
		}
	}
	for _, a := range []string{"sts:AssumeRole", "sts:TagSession"} {
		if !need[a] {
			return fmt.Sprintf("role %s does not trust EKS Pod Identity: its trust policy must allow the service principal %s the action %s", role, podIdentityAudience, a)
		}
	}
	return ""
}

func (s *Server) motoSTS() *sts.Client {
	return sts.NewFromConfig(aws.Config{Region: s.region, Credentials: s.motoEC2.Options().Credentials, BaseEndpoint: aws.String(s.moto.url), HTTPClient: s.client})
}
