package fakeaws

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// moto has no capacity reservations: CreateCapacityReservation,
// DescribeCapacityReservations and CancelCapacityReservation are answered
// here, a fleet whose launch template targets a reservation launches into
// it while it has room (EC2's ReservationCapacityExceeded when it has
// none), and DescribeInstances names each instance's reservation.

type capacityReservation struct {
	id, instanceType, zone, platform, matchCriteria, state, kind string
	total                                                        int
	created                                                      time.Time
	end                                                          *time.Time
	tags                                                         map[string]string
	// members are the instances launched into it.
	members map[string]bool
}

type capacityReservations struct {
	mu   sync.Mutex
	byID map[string]*capacityReservation
}

const fakeAccount = "123456789012"

func (s *Server) createCapacityReservation(c *call) *answer {
	f := c.Form
	count, err := strconv.Atoi(f.Get("InstanceCount"))
	if err != nil || count < 1 {
		return errorAnswer(c, awsError{http.StatusBadRequest, "InvalidParameterValue", "InstanceCount must be a positive integer", true})
	}
	for _, k := range []string{"InstanceType", "InstancePlatform"} {
		if f.Get(k) == "" {
			return errorAnswer(c, awsError{http.StatusBadRequest, "MissingParameter", "The request must contain the parameter " + k, true})
		}
	}
	zone := f.Get("AvailabilityZone")
	if zone == "" {
		return errorAnswer(c, awsError{http.StatusBadRequest, "MissingParameter", "The request must contain the parameter AvailabilityZone or AvailabilityZoneId", true})
	}
	raw := make([]byte, 9)
	_, _ = rand.Read(raw)
	r := &capacityReservation{
		id: "cr-" + hex.EncodeToString(raw)[:17], instanceType: f.Get("InstanceType"), zone: zone, platform: f.Get("InstancePlatform"),
		matchCriteria: strings.ToLower(f.Get("InstanceMatchCriteria")), state: "active", kind: "default", total: count,
		created: s.clock.Now(), tags: reservationTags(f), members: map[string]bool{},
	}
	if r.matchCriteria == "" {
		r.matchCriteria = "open"
	}
	if v := f.Get("EndDate"); v != "" {
		end, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return errorAnswer(c, awsError{http.StatusBadRequest, "InvalidParameterValue", "EndDate is not a date: " + v, true})
		}
		r.end = &end
	}
	s.crs.mu.Lock()
	if s.crs.byID == nil {
		s.crs.byID = map[string]*capacityReservation{}
	}
	s.crs.byID[r.id] = r
	s.crs.mu.Unlock()
	item := s.reservationXML(context.Background(), r)
	return xmlAnswer(fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>
<CreateCapacityReservationResponse xmlns="%s"><requestId>%s</requestId><capacityReservation>%s</capacityReservation></CreateCapacityReservationResponse>`, ec2Namespace, newRequestID(), item))
}

func (s *Server) describeCapacityReservations(ctx context.Context, c *call) *answer {
	var ids []string
	filters := formFilters(c.Form)
	for k, v := range c.Form {
		if strings.HasPrefix(k, "CapacityReservationId.") {
			ids = append(ids, v[0])
		}
	}
	s.crs.mu.Lock()
	var out []*capacityReservation
	for _, id := range ids {
		if s.crs.byID[id] == nil {
			s.crs.mu.Unlock()
			return errorAnswer(c, awsError{http.StatusBadRequest, "InvalidCapacityReservationId.NotFound", fmt.Sprintf("The capacity reservation ID '%s' does not exist", id), true})
		}
	}
	for _, r := range s.crs.byID {
		if len(ids) > 0 && !slices.Contains(ids, r.id) {
			continue
		}
		if r.matches(filters) {
			out = append(out, r)
		}
	}
	s.crs.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	var b strings.Builder
	for _, r := range out {
		b.WriteString("<item>" + s.reservationXML(ctx, r) + "</item>")
	}
	return xmlAnswer(fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>
<DescribeCapacityReservationsResponse xmlns="%s"><requestId>%s</requestId><capacityReservationSet>%s</capacityReservationSet></DescribeCapacityReservationsResponse>`, ec2Namespace, newRequestID(), b.String()))
}

func (r *capacityReservation) matches(filters map[string][]string) bool {
	for name, values := range filters {
		var have string
		switch {
		case strings.HasPrefix(name, "tag:"):
			v, ok := r.tags[strings.TrimPrefix(name, "tag:")]
			if !ok {
				return false
			}
			have = v
		case name == "owner-id":
			have = fakeAccount
		case name == "state":
			have = r.state
		case name == "instance-match-criteria":
			have = r.matchCriteria
		case name == "instance-type":
			have = r.instanceType
		case name == "availability-zone":
			have = r.zone
		default:
			continue
		}
		if !slices.Contains(values, have) && !slices.Contains(values, "*") {
			return false
		}
	}
	return true
}

func (s *Server) cancelCapacityReservation(c *call) *answer {
	id := c.Form.Get("CapacityReservationId")
	s.crs.mu.Lock()
	r := s.crs.byID[id]
	if r != nil {
		r.state = "cancelled"
	}
	s.crs.mu.Unlock()
	if r == nil {
		return errorAnswer(c, awsError{http.StatusBadRequest, "InvalidCapacityReservationId.NotFound", fmt.Sprintf("The capacity reservation ID '%s' does not exist", id), true})
	}
	return xmlAnswer(fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>
<CancelCapacityReservationResponse xmlns="%s"><requestId>%s</requestId><return>true</return></CancelCapacityReservationResponse>`, ec2Namespace, newRequestID()))
}

// used counts the reservation's members that still run: a terminated
// instance gives its room back, as in EC2.
func (s *Server) used(ctx context.Context, r *capacityReservation) int {
	s.crs.mu.Lock()
	ids := make([]string, 0, len(r.members))
	for id := range r.members {
		ids = append(ids, id)
	}
	s.crs.mu.Unlock()
	if len(ids) == 0 {
		return 0
	}
	out, err := s.motoEC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids})
	if err != nil {
		return len(ids)
	}
	n := 0
	for _, res := range out.Reservations {
		for _, i := range res.Instances {
			if i.State != nil && i.State.Name != "terminated" && i.State.Name != "shutting-down" {
				n++
			}
		}
	}
	return n
}

func (s *Server) reservationXML(ctx context.Context, r *capacityReservation) string {
	available := r.total - s.used(ctx, r)
	if available < 0 || r.state != "active" {
		available = 0
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<capacityReservationId>%s</capacityReservationId><ownerId>%s</ownerId><capacityReservationArn>arn:aws:ec2:%s:%s:capacity-reservation/%s</capacityReservationArn>",
		r.id, fakeAccount, s.region, fakeAccount, r.id)
	fmt.Fprintf(&b, "<instanceType>%s</instanceType><instancePlatform>%s</instancePlatform><availabilityZone>%s</availabilityZone><tenancy>default</tenancy>",
		xmlEscape(r.instanceType), xmlEscape(r.platform), xmlEscape(r.zone))
	fmt.Fprintf(&b, "<totalInstanceCount>%d</totalInstanceCount><availableInstanceCount>%d</availableInstanceCount><state>%s</state><instanceMatchCriteria>%s</instanceMatchCriteria>",
		r.total, available, r.state, r.matchCriteria)
	fmt.Fprintf(&b, "<startDate>%s</startDate><createDate>%s</createDate><reservationType>%s</reservationType>", r.created.UTC().Format(time.RFC3339), r.created.UTC().Format(time.RFC3339), r.kind)
	if r.end != nil {
		fmt.Fprintf(&b, "<endDate>%s</endDate><endDateType>limited</endDateType>", r.end.UTC().Format(time.RFC3339))
	} else {
		b.WriteString("<endDateType>unlimited</endDateType>")
	}
	b.WriteString("<tagSet>")
	keys := make([]string, 0, len(r.tags))
	for k := range r.tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "<item><key>%s</key><value>%s</value></item>", xmlEscape(k), xmlEscape(r.tags[k]))
	}
	b.WriteString("</tagSet>")
	return b.String()
}

// templateReservation is the reservation a launch template version
// targets, or nil.
func (s *Server) templateReservation(ctx context.Context, template, name, version string) *capacityReservation {
	data := s.templateData(ctx, template, name, version)
	if data == nil {
		return nil
	}
	spec := data.CapacityReservationSpecification
	if spec == nil || spec.CapacityReservationTarget == nil {
		return nil
	}
	s.crs.mu.Lock()
	defer s.crs.mu.Unlock()
	return s.crs.byID[aws.ToString(spec.CapacityReservationTarget.CapacityReservationId)]
}

// templateOpensReservations reports a template that lets EC2 put an
// on-demand instance into an open reservation: it names no reservation and
// does not opt out (CapacityReservationPreference "none" or
// "capacity-reservations-only"), as EC2 decides.
func (s *Server) templateOpensReservations(ctx context.Context, template, version string) bool {
	data := s.templateData(ctx, template, "", version)
	if data == nil || data.CapacityReservationSpecification == nil {
		return true
	}
	spec := data.CapacityReservationSpecification
	return spec.CapacityReservationTarget == nil && (spec.CapacityReservationPreference == "" || spec.CapacityReservationPreference == ec2types.CapacityReservationPreferenceOpen)
}

// openReservation is an active open reservation with room for one more
// instance of the type in the zone, which EC2 fills with an untargeted
// on-demand launch; nil when there is none.
func (s *Server) openReservation(ctx context.Context, typ, zone string) *capacityReservation {
	s.crs.mu.Lock()
	var open []*capacityReservation
	for _, r := range s.crs.byID {
		if r.matchCriteria == "open" {
			open = append(open, r)
		}
	}
	s.crs.mu.Unlock()
	sort.Slice(open, func(i, j int) bool { return open[i].id < open[j].id })
	for _, r := range open {
		if s.reservationRoom(ctx, r, typ, zone) {
			return r
		}
	}
	return nil
}

// reservationRoom says whether the reservation can take one more instance
// of the type in the zone.
func (s *Server) reservationRoom(ctx context.Context, r *capacityReservation, typ, zone string) bool {
	return r.state == "active" && r.instanceType == typ && r.zone == zone && s.used(ctx, r) < r.total
}

func (s *Server) joinReservation(r *capacityReservation, instance string) {
	s.crs.mu.Lock()
	defer s.crs.mu.Unlock()
	r.members[instance] = true
}

// withReservations names each member's reservation in a DescribeInstances
// answer. A reservation cancelled or past its end lets its instances go,
// as EC2 does: they run on, on demand, in no reservation.
func (s *Server) withReservations(body []byte) []byte {
	now := s.clock.Now()
	s.crs.mu.Lock()
	defer s.crs.mu.Unlock()
	for _, r := range s.crs.byID {
		if r.state != "active" || (r.end != nil && !now.Before(*r.end)) {
			continue
		}
		for id := range r.members {
			tag := []byte("<instanceId>" + id + "</instanceId>")
			fill := append(append([]byte{}, tag...), "<capacityReservationId>"+r.id+"</capacityReservationId>"...)
			body = []byte(strings.Replace(string(body), string(tag), string(fill), 1))
		}
	}
	return body
}

// reservationTags are CreateCapacityReservation's tags; the SDKs name the
// list TagSpecifications or TagSpecification.
func reservationTags(f url.Values) map[string]string {
	out := formTagSpecs(f)["capacity-reservation"]
	if out == nil {
		out = map[string]string{}
	}
	for k, v := range formTags(f, "TagSpecifications.1.Tag") {
		out[k] = v
	}
	return out
}
