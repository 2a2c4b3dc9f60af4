package fakeaws

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// publicPrefixes are the public parameter trees the endpoint answers for;
// moto has none of them and refuses writes under /aws/service/.
var publicPrefixes = []string{"/aws/service/eks/optimized-ami/", "/aws/service/bottlerocket/"}

func ownsParameter(name string) bool {
	for _, p := range publicPrefixes {
		if strings.HasPrefix(name, p) || name == strings.TrimSuffix(p, "/") {
			return true
		}
	}
	return strings.HasPrefix(name, "/aws/service/ami-windows-latest/") && strings.Contains(name, "EKS_Optimized")
}

type ssmParameter struct {
	ARN              string  `json:"ARN"`
	DataType         string  `json:"DataType"`
	LastModifiedDate float64 `json:"LastModifiedDate"`
	Name             string  `json:"Name"`
	Type             string  `json:"Type"`
	Value            string  `json:"Value"`
	Version          int64   `json:"Version"`
}

func (p parameter) wire(region string) ssmParameter {
	return ssmParameter{
		ARN:      fmt.Sprintf("arn:aws:ssm:%s::parameter%s", region, p.Name),
		DataType: "text", Name: p.Name, Type: "String", Value: p.Value, Version: p.Version,
		LastModifiedDate: float64(p.Modified.UnixMilli()) / 1000,
	}
}

func jsonAnswer(c *call, v any) *answer {
	b, err := json.Marshal(v)
	if err != nil {
		return errorAnswer(c, awsError{http.StatusInternalServerError, "InternalFailure", err.Error(), false})
	}
	ct := c.JSONType
	if ct == "" {
		ct = "application/x-amz-json-1.1"
	}
	return &answer{status: http.StatusOK, header: http.Header{"Content-Type": {ct}}, body: b}
}

// ssm answers the public parameters and forwards every other parameter to
// moto; a GetParameters call that names both is split and merged.
func (s *Server) ssm(ctx context.Context, c *call, r *http.Request) *answer {
	str := func(k string) string { v, _ := c.JSON[k].(string); return v }
	switch c.Action {
	case "GetParameter":
		name := str("Name")
		if !ownsParameter(name) {
			return s.forward(ctx, r, c.Body)
		}
		p, ok := s.images.parameter(name)
		if !ok {
			return errorAnswer(c, awsError{http.StatusBadRequest, "ParameterNotFound", "", true})
		}
		return jsonAnswer(c, map[string]any{"Parameter": p.wire(c.Region)})
	case "GetParameters":
		names, _ := c.JSON["Names"].([]any)
		var ours, theirs []string
		for _, n := range names {
			ns, _ := n.(string)
			if ownsParameter(ns) {
				ours = append(ours, ns)
			} else {
				theirs = append(theirs, ns)
			}
		}
		if len(ours) == 0 {
			return s.forward(ctx, r, c.Body)
		}
		out := struct {
			Parameters        []any    `json:"Parameters"`
			InvalidParameters []string `json:"InvalidParameters"`
		}{Parameters: []any{}, InvalidParameters: []string{}}
		if len(theirs) > 0 {
			req := map[string]any{}
			for k, v := range c.JSON {
				req[k] = v
			}
			req["Names"] = theirs
			body, _ := json.Marshal(req)
			a := s.forward(ctx, r, body)
			if a.status != http.StatusOK {
				return a
			}
			if err := json.Unmarshal(a.body, &out); err != nil {
				return errorAnswer(c, awsError{http.StatusInternalServerError, "InternalFailure", "moto answered GetParameters with " + err.Error(), false})
			}
		}
		for _, n := range ours {
			if p, ok := s.images.parameter(n); ok {
				out.Parameters = append(out.Parameters, p.wire(c.Region))
			} else {
				out.InvalidParameters = append(out.InvalidParameters, n)
			}
		}
		return jsonAnswer(c, out)
	case "GetParametersByPath":
		path := str("Path")
		if !ownsParameter(path) && path != "/aws/service/eks" {
			return s.forward(ctx, r, c.Body)
		}
		recursive, _ := c.JSON["Recursive"].(bool)
		params := s.images.parametersUnder(path, recursive)
		max := 10
		if m, ok := c.JSON["MaxResults"].(float64); ok {
			if m < 1 || m > 10 {
				return errorAnswer(c, awsError{http.StatusBadRequest, "ValidationException", "1 validation error detected: Value at 'maxResults' failed to satisfy constraint: Member must have value less than or equal to 10", true})
			}
			max = int(m)
		}
		start, err := decodeToken(str("NextToken"))
		if err != nil || start > len(params) {
			return errorAnswer(c, awsError{http.StatusBadRequest, "InvalidNextToken", "The specified token isn't valid.", true})
		}
		end := min(start+max, len(params))
		out := map[string]any{"Parameters": []ssmParameter{}}
		page := make([]ssmParameter, 0, end-start)
		for _, p := range params[start:end] {
			page = append(page, p.wire(c.Region))
		}
		out["Parameters"] = page
		if end < len(params) {
			out["NextToken"] = encodeToken(end)
		}
		return jsonAnswer(c, out)
	}
	return s.forward(ctx, r, c.Body)
}

func encodeToken(offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("offset:" + strconv.Itoa(offset)))
}

func decodeToken(tok string) (int, error) {
	if tok == "" {
		return 0, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return 0, err
	}
	n, ok := strings.CutPrefix(string(b), "offset:")
	if !ok {
		return 0, fmt.Errorf("bad token")
	}
	return strconv.Atoi(n)
}

// PublishedImage is the outcome of PublishImage.
type PublishedImage struct {
	Parameter string `json:"parameter"`
	ImageID   string `json:"imageId"`
	ImageName string `json:"imageName,omitempty"`
	Version   int64  `json:"version"`
}

// PublishImage releases a new image under a mutable public parameter (a
// ".../recommended/image_id" or ".../latest/image_id" path), as AWS does
// when a new EKS AMI ships: with imageID empty, a new AMI copied from the
// current one (same architecture, next release's name) is created in moto
// and the parameter points at it; otherwise the parameter points at imageID.
func (s *Server) PublishImage(ctx context.Context, parameterName, imageID string) (PublishedImage, error) {
	s.images.mu.Lock()
	a, ok := s.images.aliases[parameterName]
	var current *image
	var release string
	if ok {
		current, release = a.image, nextRelease(a.family, a.release)
	}
	s.images.mu.Unlock()
	if !ok {
		return PublishedImage{}, fmt.Errorf("parameter %q is not a mutable image parameter the endpoint publishes (a .../recommended/image_id, bottlerocket .../latest/image_id or ami-windows-latest .../image_id path)", parameterName)
	}
	var img *image
	if imageID == "" {
		name := a.name(release)
		out, err := s.motoEC2.CopyImage(ctx, &ec2.CopyImageInput{
			SourceImageId: aws.String(current.ID), SourceRegion: aws.String(s.region),
			Name: aws.String(name), Description: aws.String(current.Description),
		})
		if err != nil {
			return PublishedImage{}, fmt.Errorf("creating the new image in moto: %w", err)
		}
		cp := *current
		cp.ID, cp.Name = aws.ToString(out.ImageId), name
		img = &cp
	} else {
		out, err := s.motoEC2.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{imageID}})
		if err != nil || len(out.Images) == 0 {
			return PublishedImage{}, fmt.Errorf("image %q: not found in moto: %v", imageID, err)
		}
		mi := out.Images[0]
		cp := *current
		cp.ID, cp.Name, cp.Arch = imageID, aws.ToString(mi.Name), string(mi.Architecture)
		if cp.Arch == "" {
			cp.Arch = current.Arch
		}
		img, release = &cp, ""
	}
	s.images.mu.Lock()
	defer s.images.mu.Unlock()
	now := s.clock.Now()
	s.images.images[img.ID] = img
	if release != "" && a.versioned != nil {
		s.images.params[a.versioned(release)] = &parameter{Name: a.versioned(release), Value: img.ID, Version: 1, Modified: now}
		a.release = release
	}
	a.image = img
	p := s.images.params[parameterName]
	p.Value, p.Version, p.Modified = img.ID, p.Version+1, now
	return PublishedImage{Parameter: parameterName, ImageID: img.ID, ImageName: img.Name, Version: p.Version}, nil
}
