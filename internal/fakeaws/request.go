package fakeaws

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// protocol is the wire protocol of a call, which decides how errors are
// written back.
type protocol int

const (
	// protoEC2 is EC2's query protocol: form-encoded requests, XML answers
	// with errors under Response/Errors/Error.
	protoEC2 protocol = iota
	// protoQuery is the query protocol of IAM, STS and friends: errors under
	// ErrorResponse/Error.
	protoQuery
	// protoJSON is JSON 1.0/1.1 with the action in X-Amz-Target (SSM,
	// Pricing, SQS).
	protoJSON
	// protoREST is REST-JSON, the action given by method and path (EKS).
	protoREST
)

// call is one request as the endpoint understands it.
type call struct {
	Service  string
	Action   string
	Region   string
	Protocol protocol
	// JSONType is the request's Content-Type for JSON protocols, echoed in
	// answers.
	JSONType string
	Form     url.Values
	JSON     map[string]any
	Body     []byte
	// Principal is who signed it, under IAMEnforce.
	Principal string
}

var credentialScope = regexp.MustCompile(`Credential=[^/,]*/[0-9]{8}/([^/,]+)/([^/,]+)/aws4_request`)

// identify reads the service and region from the SigV4 credential scope (as
// AWS itself routes a request), and the action from X-Amz-Target, the Action
// parameter or the REST route.
func identify(r *http.Request, body []byte) *call {
	c := &call{Body: body}
	auth := r.Header.Get("Authorization")
	if auth == "" {
		auth = "Credential=" + r.URL.Query().Get("X-Amz-Credential")
	}
	if m := credentialScope.FindStringSubmatch(auth); m != nil {
		c.Region, c.Service = m[1], m[2]
	}
	if target := r.Header.Get("X-Amz-Target"); target != "" {
		c.Protocol = protoJSON
		c.JSONType = r.Header.Get("Content-Type")
		prefix, action, _ := strings.Cut(target, ".")
		c.Action = action
		if c.Service == "" {
			c.Service = strings.ToLower(prefix)
		}
		_ = json.Unmarshal(body, &c.JSON)
		return c
	}
	form := url.Values{}
	for k, v := range r.URL.Query() {
		form[k] = v
	}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		if body, err := url.ParseQuery(string(body)); err == nil {
			for k, v := range body {
				form[k] = v
			}
		}
	}
	if action := form.Get("Action"); action != "" {
		c.Form, c.Action, c.Protocol = form, action, protoQuery
		if c.Service == "" && strings.HasPrefix(action, "AssumeRoleWith") {
			// Unsigned (the web identity token is the credential), so
			// no scope names the service.
			c.Service = "sts"
		}
		if c.Service == "ec2" {
			c.Protocol = protoEC2
		}
		return c
	}
	c.Protocol = protoREST
	c.Action = restAction(c.Service, r.Method, r.URL.EscapedPath())
	_ = json.Unmarshal(body, &c.JSON)
	return c
}

// restAction names the REST-JSON operations the endpoint's users call; any
// other route is named by its method and path.
func restAction(service, method, path string) string {
	if service == "eks" {
		parts := strings.Split(strings.Trim(path, "/"), "/")
		switch {
		case len(parts) == 3 && parts[0] == "clusters" && parts[2] == "pod-identity-associations" && method == http.MethodPost:
			return "CreatePodIdentityAssociation"
		case len(parts) == 3 && parts[0] == "clusters" && parts[2] == "pod-identity-associations" && method == http.MethodGet:
			return "ListPodIdentityAssociations"
		case len(parts) == 4 && parts[0] == "clusters" && parts[2] == "pod-identity-associations" && method == http.MethodGet:
			return "DescribePodIdentityAssociation"
		case len(parts) == 4 && parts[0] == "clusters" && parts[2] == "pod-identity-associations" && method == http.MethodDelete:
			return "DeletePodIdentityAssociation"
		case len(parts) == 1 && parts[0] == "clusters" && method == http.MethodGet:
			return "ListClusters"
		case len(parts) == 1 && parts[0] == "clusters" && method == http.MethodPost:
			return "CreateCluster"
		case len(parts) == 2 && parts[0] == "clusters" && method == http.MethodGet:
			return "DescribeCluster"
		case len(parts) == 2 && parts[0] == "clusters" && method == http.MethodDelete:
			return "DeleteCluster"
		}
	}
	if service == "savingsplans" && method == http.MethodPost {
		// Each operation is POSTed to its own name.
		return strings.Trim(path, "/")
	}
	if service == "arc-zonal-shift" {
		parts := strings.Split(strings.Trim(path, "/"), "/")
		switch {
		case len(parts) == 1 && parts[0] == "zonalshifts" && method == http.MethodPost:
			return "StartZonalShift"
		case len(parts) == 1 && parts[0] == "zonalshifts" && method == http.MethodGet:
			return "ListZonalShifts"
		case len(parts) == 2 && parts[0] == "zonalshifts" && method == http.MethodPatch:
			return "UpdateZonalShift"
		case len(parts) == 2 && parts[0] == "zonalshifts" && method == http.MethodDelete:
			return "CancelZonalShift"
		case len(parts) == 2 && parts[0] == "managedresources" && method == http.MethodGet:
			return "GetManagedResource"
		}
	}
	return method + " " + path
}

// key is the name faults and the access-denied list use: service:Action.
func (c *call) key() string { return c.Service + ":" + c.Action }

// params picks the parameters worth logging: what was asked for, not the
// whole request.
func (c *call) params() map[string]any {
	out := map[string]any{}
	switch c.Protocol {
	case protoEC2, protoQuery:
		var ids, types []string
		overrides := 0
		seenType := map[string]bool{}
		keys := make([]string, 0, len(c.Form))
		for k := range c.Form {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := c.Form.Get(k)
			switch {
			case k == "ClientToken", k == "InstanceType", k == "ImageId", k == "LaunchTemplateName", k == "LaunchTemplateId",
				k == "Type", k == "TargetCapacitySpecification.DefaultTargetCapacityType", k == "TargetCapacitySpecification.TotalTargetCapacity",
				k == "RoleName", k == "InstanceProfileName", k == "QueueName", k == "MinCount", k == "MaxCount":
				out[strings.TrimPrefix(k, "TargetCapacitySpecification.")] = v
			case strings.HasPrefix(k, "InstanceId."), strings.HasPrefix(k, "ResourceId."):
				ids = append(ids, v)
			case strings.HasPrefix(k, "LaunchTemplateConfigs.") && strings.HasSuffix(k, ".InstanceType"):
				overrides++
				if !seenType[v] {
					seenType[v] = true
					types = append(types, v)
				}
			}
		}
		if len(ids) > 0 {
			out["ids"] = ids
		}
		if overrides > 0 {
			out["overrides"] = overrides
			out["instanceTypes"] = types
		}
	case protoJSON:
		for _, k := range []string{"Name", "Names", "Path", "ServiceCode", "QueueName", "QueueUrl", "NextToken"} {
			if v, ok := c.JSON[k]; ok {
				out[k] = v
			}
		}
		if f, ok := c.JSON["Filters"].([]any); ok {
			out["filters"] = len(f)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// formFilters reads an EC2 query's Filter.N.Name and Filter.N.Value.M
// parameters: values by filter name. strip names the filters to take out
// of form as well (those the front answers and moto would refuse).
func formFilters(form url.Values, strip ...string) map[string][]string {
	out := map[string][]string{}
	for k, v := range form {
		if !strings.HasPrefix(k, "Filter.") || !strings.HasSuffix(k, ".Name") || len(v) == 0 {
			continue
		}
		prefix := strings.TrimSuffix(k, "Name")
		for vk, vv := range form {
			if strings.HasPrefix(vk, prefix+"Value.") {
				out[v[0]] = append(out[v[0]], vv...)
			}
		}
	}
	for _, name := range strip {
		for k, v := range form {
			if strings.HasPrefix(k, "Filter.") && strings.HasSuffix(k, ".Name") && len(v) > 0 && v[0] == name {
				prefix := strings.TrimSuffix(k, "Name")
				for vk := range form {
					if strings.HasPrefix(vk, prefix) {
						form.Del(vk)
					}
				}
			}
		}
	}
	return out
}
