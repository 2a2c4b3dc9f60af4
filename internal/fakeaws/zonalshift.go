package fakeaws

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/google/uuid"
)

// zonalShifts are ARC zonal shifts, which moto does not have: kept in
// memory, on the EKS clusters moto knows (every one is a managed resource,
// as a cluster created with zonalShiftConfig.enabled is). Times follow the
// server's clock, so a test can let a shift expire.
type zonalShifts struct {
	mu     sync.Mutex
	shifts []*zonalShift
}

type zonalShift struct {
	ID, Resource, AwayFrom, Comment string
	Start, Expiry                   time.Time
	Canceled                        bool
}

func (z *zonalShift) status(now time.Time) string {
	switch {
	case z.Canceled:
		return "CANCELED"
	case !now.Before(z.Expiry):
		return "EXPIRED"
	}
	return "ACTIVE"
}

// doc is the shift as the API writes it; timestamps are epoch seconds, as
// REST-JSON writes them.
func (z *zonalShift) doc(now time.Time) map[string]any {
	return map[string]any{
		"zonalShiftId": z.ID, "resourceIdentifier": z.Resource, "awayFrom": z.AwayFrom, "comment": z.Comment,
		"startTime": float64(z.Start.Unix()), "expiryTime": float64(z.Expiry.Unix()), "status": z.status(now),
	}
}

// expiresIn parses ARC's duration: 1 to 1440 minutes ("30m") or 1 to 72
// hours ("2h").
var expiresIn = regexp.MustCompile(`^([1-9][0-9]*)([mh])$`)

func parseExpiresIn(s string) (time.Duration, error) {
	m := expiresIn.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("expiresIn %q must be minutes (1m to 1440m) or hours (1h to 72h)", s)
	}
	n, _ := strconv.Atoi(m[1])
	if (m[2] == "m" && n > 1440) || (m[2] == "h" && n > 72) {
		return 0, fmt.Errorf("expiresIn %q is longer than 72 hours", s)
	}
	if m[2] == "h" {
		return time.Duration(n) * time.Hour, nil
	}
	return time.Duration(n) * time.Minute, nil
}

// arcZonalShift answers the ARC zonal shift calls: start, update, cancel,
// list, and the managed resource (the cluster) with its shifts.
func (s *Server) arcZonalShift(ctx context.Context, c *call, r *http.Request) *answer {
	now := s.clock.Now()
	var in map[string]any
	_ = json.Unmarshal(c.Body, &in)
	str := func(k string) string { v, _ := in[k].(string); return v }
	switch c.Action {
	case "StartZonalShift":
		resource, err := s.managedResource(ctx, c.Region, str("resourceIdentifier"))
		if err != nil {
			return restError(c, *err)
		}
		if bad := s.zoneIDProblem(ctx, c.Region, str("awayFrom")); bad != "" {
			return restError(c, awsError{http.StatusBadRequest, "ValidationException", bad, true})
		}
		d, perr := parseExpiresIn(str("expiresIn"))
		if perr != nil {
			return restError(c, awsError{http.StatusBadRequest, "ValidationException", perr.Error(), true})
		}
		if str("comment") == "" {
			return restError(c, awsError{http.StatusBadRequest, "ValidationException", "comment is required", true})
		}
		s.shifts.mu.Lock()
		defer s.shifts.mu.Unlock()
		for _, z := range s.shifts.shifts {
			if z.Resource == resource && z.status(now) == "ACTIVE" {
				return restError(c, awsError{http.StatusConflict, "ConflictException",
					fmt.Sprintf("zonal shift %s is already active on resource %s; update or cancel it", z.ID, resource), true})
			}
		}
		z := &zonalShift{ID: uuid.NewString(), Resource: resource, AwayFrom: str("awayFrom"), Comment: str("comment"), Start: now, Expiry: now.Add(d)}
		s.shifts.shifts = append(s.shifts.shifts, z)
		return jsonREST(http.StatusCreated, z.doc(now))
	case "ListZonalShifts":
		q := r.URL.Query()
		s.shifts.mu.Lock()
		defer s.shifts.mu.Unlock()
		items := []any{}
		for _, z := range s.shifts.shifts {
			if st := q.Get("status"); st != "" && z.status(now) != st {
				continue
			}
			if res := q.Get("resourceIdentifier"); res != "" && z.Resource != s.resourceARN(c.Region, res) {
				continue
			}
			d := z.doc(now)
			d["shiftType"] = "ZONAL_SHIFT"
			items = append(items, d)
		}
		return jsonREST(http.StatusOK, map[string]any{"items": items})
	case "UpdateZonalShift", "CancelZonalShift":
		id := lastSegment(r.URL.EscapedPath())
		s.shifts.mu.Lock()
		defer s.shifts.mu.Unlock()
		for _, z := range s.shifts.shifts {
			if z.ID != id {
				continue
			}
			if z.status(now) != "ACTIVE" {
				return restError(c, awsError{http.StatusConflict, "ConflictException", fmt.Sprintf("zonal shift %s is %s", id, z.status(now)), true})
			}
			if c.Action == "CancelZonalShift" {
				z.Canceled = true
				return jsonREST(http.StatusOK, z.doc(now))
			}
			if v := str("expiresIn"); v != "" {
				d, perr := parseExpiresIn(v)
				if perr != nil {
					return restError(c, awsError{http.StatusBadRequest, "ValidationException", perr.Error(), true})
				}
				z.Expiry = now.Add(d)
			}
			if v := str("comment"); v != "" {
				z.Comment = v
			}
			return jsonREST(http.StatusOK, z.doc(now))
		}
		return restError(c, awsError{http.StatusNotFound, "ResourceNotFoundException", fmt.Sprintf("zonal shift %s not found", id), true})
	case "GetManagedResource":
		resource, err := s.managedResource(ctx, c.Region, lastSegment(r.URL.EscapedPath()))
		if err != nil {
			return restError(c, *err)
		}
		zones, _ := s.zoneInfos(ctx, c.Region)
		weights := map[string]any{}
		for _, z := range zones {
			weights[z.id] = 1.0
		}
		shifts := []any{}
		s.shifts.mu.Lock()
		for _, z := range s.shifts.shifts {
			if z.Resource == resource && z.status(now) == "ACTIVE" {
				d := z.doc(now)
				delete(d, "status")
				d["appliedStatus"], d["shiftType"] = "APPLIED", "ZONAL_SHIFT"
				shifts = append(shifts, d)
				weights[z.AwayFrom] = 0.0
			}
		}
		s.shifts.mu.Unlock()
		return jsonREST(http.StatusOK, map[string]any{"arn": resource, "name": resource[strings.LastIndex(resource, "/")+1:],
			"appliedWeights": weights, "zonalShifts": shifts, "autoshifts": []any{}, "zonalAutoshiftStatus": "DISABLED"})
	}
	return restError(c, awsError{http.StatusNotFound, "UnknownOperationException", "fake-aws serves StartZonalShift, UpdateZonalShift, CancelZonalShift, ListZonalShifts and GetManagedResource of ARC zonal shift", true})
}

// resourceARN is a resource identifier as an ARN: ARC takes a cluster's
// ARN; a bare name is read as an EKS cluster of the region.
func (s *Server) resourceARN(region, id string) string {
	if strings.HasPrefix(id, "arn:") {
		return id
	}
	return fmt.Sprintf("arn:aws:eks:%s:%s:cluster/%s", region, accountID, id)
}

// managedResource checks that id names an EKS cluster moto has, and returns
// its ARN.
func (s *Server) managedResource(ctx context.Context, region, id string) (string, *awsError) {
	arn := s.resourceARN(region, id)
	name := arn[strings.LastIndex(arn, "/")+1:]
	out, err := s.motoEKS.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(name)}, func(o *eks.Options) { o.Region = region })
	if err != nil || out.Cluster == nil || !strings.Contains(arn, ":eks:") {
		return "", &awsError{http.StatusNotFound, "ResourceNotFoundException", fmt.Sprintf("resource %s is not registered with zonal shift", id), true}
	}
	return aws.ToString(out.Cluster.Arn), nil
}

// zoneIDProblem says why zoneID is not a zone ID of the region, or "".
func (s *Server) zoneIDProblem(ctx context.Context, region, zoneID string) string {
	zones, err := s.zoneInfos(ctx, region)
	if err != nil {
		return err.Error()
	}
	var ids []string
	for _, z := range zones {
		if z.id == zoneID {
			return ""
		}
		ids = append(ids, z.id)
	}
	sort.Strings(ids)
	return fmt.Sprintf("awayFrom %q is not an Availability Zone ID of %s (%s); ARC names zones by ID, not by name", zoneID, region, strings.Join(ids, ", "))
}

func lastSegment(path string) string {
	seg := path[strings.LastIndex(path, "/")+1:]
	if u, err := url.PathUnescape(seg); err == nil {
		return u
	}
	return seg
}

func jsonREST(status int, v any) *answer {
	b, _ := json.Marshal(v)
	return &answer{status: status, header: http.Header{"Content-Type": {"application/json"}}, body: b}
}

func restError(c *call, e awsError) *answer {
	a := errorAnswer(c, e)
	a.message = e.Message
	return a
}
