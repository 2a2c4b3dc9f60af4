package fakeaws

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// fixPolicyDocuments fills a gap of moto's CloudFormation: a policy
// document written as a JSON string (PolicyDocument: !Sub | {...}, which
// Karpenter's stacks use so that a condition key can hold the cluster's
// name) reaches moto's IAM encoded twice, and every such policy fails with
// MalformedPolicyDocument. The front substitutes the string itself (the
// stack's parameters, the pseudo parameters, and the Arn of a role or queue
// the template names) and gives moto the document as structured YAML, as
// CloudFormation gives it to IAM. Anything it cannot resolve is left as it
// was, for moto to judge. It returns the request's new body.
func fixPolicyDocuments(c *call) []byte {
	body := c.Form.Get("TemplateBody")
	if body == "" {
		return c.Body
	}
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(body), &root); err != nil || len(root.Content) == 0 {
		return c.Body
	}
	doc := root.Content[0]
	vars := map[string]string{
		"AWS::Partition": "aws", "AWS::Region": c.Region, "AWS::AccountId": accountID,
		"AWS::URLSuffix": "amazonaws.com", "AWS::StackName": c.Form.Get("StackName"),
	}
	for name, p := range mapping(lookup(doc, "Parameters")) {
		if d := lookup(p, "Default"); d != nil && d.Kind == yaml.ScalarNode {
			vars[name] = d.Value
		}
	}
	for i := 1; ; i++ {
		k := c.Form.Get(fmt.Sprintf("Parameters.member.%d.ParameterKey", i))
		if k == "" {
			break
		}
		vars[k] = c.Form.Get(fmt.Sprintf("Parameters.member.%d.ParameterValue", i))
	}
	resources := mapping(lookup(doc, "Resources"))
	// The Arn of the roles and queues the template makes, which policies
	// name through ${Resource.Arn}.
	for id, r := range resources {
		props := lookup(r, "Properties")
		switch scalar(lookup(r, "Type")) {
		case "AWS::IAM::Role":
			path := scalar(lookup(props, "Path"))
			if path == "" {
				path = "/"
			}
			vars[id+".Arn"] = fmt.Sprintf("arn:aws:iam::%s:role%s%s", accountID, path, substitute(subString(lookup(props, "RoleName")), vars))
		case "AWS::SQS::Queue":
			vars[id+".Arn"] = fmt.Sprintf("arn:aws:sqs:%s:%s:%s", c.Region, accountID, substitute(subString(lookup(props, "QueueName")), vars))
		}
	}
	changed := false
	for _, r := range resources {
		n := lookup(lookup(r, "Properties"), "PolicyDocument")
		s := subString(n)
		if s == "" || !strings.HasPrefix(strings.TrimSpace(s), "{") {
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(substitute(s, vars)), &v); err != nil {
			continue
		}
		var structured yaml.Node
		if err := structured.Encode(v); err != nil {
			continue
		}
		*n = structured
		changed = true
	}
	if !changed {
		return c.Body
	}
	out, err := yaml.Marshal(&root)
	if err != nil {
		return c.Body
	}
	form := url.Values{}
	for k, v := range c.Form {
		form[k] = v
	}
	form.Set("TemplateBody", string(out))
	return []byte(form.Encode())
}

var subVar = regexp.MustCompile(`\$\{([^}!][^}]*)\}`)

// substitute replaces ${Name} with vars[Name], leaving unknown names.
func substitute(s string, vars map[string]string) string {
	return subVar.ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := vars[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

// subString is the string of a !Sub (or Fn::Sub) node, or of a plain
// scalar.
func subString(n *yaml.Node) string {
	if n == nil {
		return ""
	}
	if n.Kind == yaml.ScalarNode {
		return n.Value
	}
	if s := lookup(n, "Fn::Sub"); s != nil && s.Kind == yaml.ScalarNode {
		return s.Value
	}
	return ""
}

func lookup(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func mapping(n *yaml.Node) map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	if n == nil || n.Kind != yaml.MappingNode {
		return out
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		out[n.Content[i].Value] = n.Content[i+1]
	}
	return out
}

func scalar(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}
