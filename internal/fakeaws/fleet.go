package fakeaws

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/google/uuid"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
)

var (
	ltConfigKey = regexp.MustCompile(`^LaunchTemplateConfigs\.(\d+)\.(.+)$`)
	overrideKey = regexp.MustCompile(`^Overrides\.(\d+)\.(.+)$`)
)

type fleetOverride struct {
	fields url.Values // keys relative to the override, e.g. InstanceType
	zone   string
	price  float64
}

type fleetConfig struct {
	fields    url.Values // keys relative to the config, overrides excluded
	overrides []*fleetOverride
}

// parseFleetConfigs splits CreateFleet's form into its launch template
// configs (in request order) and the remaining parameters.
func parseFleetConfigs(form url.Values) ([]*fleetConfig, url.Values) {
	rest := url.Values{}
	byIndex := map[int]*fleetConfig{}
	overrides := map[int]map[int]*fleetOverride{}
	for k, v := range form {
		m := ltConfigKey.FindStringSubmatch(k)
		if m == nil {
			rest[k] = v
			continue
		}
		i, _ := strconv.Atoi(m[1])
		cfg := byIndex[i]
		if cfg == nil {
			cfg = &fleetConfig{fields: url.Values{}}
			byIndex[i] = cfg
			overrides[i] = map[int]*fleetOverride{}
		}
		if om := overrideKey.FindStringSubmatch(m[2]); om != nil {
			j, _ := strconv.Atoi(om[1])
			o := overrides[i][j]
			if o == nil {
				o = &fleetOverride{fields: url.Values{}}
				overrides[i][j] = o
			}
			o.fields[om[2]] = v
			continue
		}
		cfg.fields[m[2]] = v
	}
	var out []*fleetConfig
	for _, i := range sortedKeys(byIndex) {
		cfg := byIndex[i]
		for _, j := range sortedKeys(overrides[i]) {
			cfg.overrides = append(cfg.overrides, overrides[i][j])
		}
		out = append(out, cfg)
	}
	return out, rest
}

func sortedKeys[V any](m map[int]V) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	return keys
}

// createFleet adds to moto's CreateFleet what moto lacks:
//   - insufficient capacity: overrides of an offering configured out of
//     capacity are taken out of the request and reported in the answer's
//     Errors, as EC2 reports them for an instant fleet;
//   - the allocation strategy: moto launches the first override, EC2 the
//     cheapest (lowest-price, price-capacity-optimized) or the first by
//     priority (prioritized), so the overrides are put in that order first.
func (s *Server) createFleet(ctx context.Context, c *call, r *http.Request) *answer {
	if c.Form.Get("Type") != "instant" {
		return s.forward(ctx, r, c.Body)
	}
	capacityType := c.Form.Get("TargetCapacitySpecification.DefaultTargetCapacityType")
	if capacityType == "" {
		capacityType = "on-demand"
	}
	strategy := c.Form.Get("OnDemandOptions.AllocationStrategy")
	if capacityType == "spot" {
		strategy = c.Form.Get("SpotOptions.AllocationStrategy")
	}
	configs, rest := parseFleetConfigs(c.Form)
	faults := s.faults.get()
	region := c.Region
	if region == "" {
		region = s.region
	}
	its, _ := s.catalog.get(region)
	odPrice := map[string]float64{}
	for _, it := range its {
		odPrice[it.Name] = onDemandPrice(it)
	}

	type iceError struct {
		cfg *fleetConfig
		o   *fleetOverride
		// code is the error when it is not capacity's.
		code, msg string
	}
	var errs []iceError
	var kept []*fleetConfig
	reservations := map[*fleetConfig]*capacityReservation{}
	for _, cfg := range configs {
		res := s.templateReservation(ctx, cfg.fields.Get("LaunchTemplateSpecification.LaunchTemplateId"),
			cfg.fields.Get("LaunchTemplateSpecification.LaunchTemplateName"), cfg.fields.Get("LaunchTemplateSpecification.Version"))
		reservations[cfg] = res
		var ok []*fleetOverride
		for _, o := range cfg.overrides {
			typ := o.fields.Get("InstanceType")
			o.zone = o.fields.Get("AvailabilityZone")
			if o.zone == "" && o.fields.Get("SubnetId") != "" {
				o.zone = s.subnetZone(ctx, region, o.fields.Get("SubnetId"))
			}
			out := false
			if res != nil && !s.reservationRoom(ctx, res, typ, o.zone) {
				errs = append(errs, iceError{cfg, o, "ReservationCapacityExceeded", fmt.Sprintf("Insufficient capacity in capacity reservation %s.", res.id)})
				continue
			}
			if faults.SpotRoleMissing && capacityType == "spot" {
				errs = append(errs, iceError{cfg, o, "", ""})
				continue
			}
			for _, cap := range faults.InsufficientCapacity {
				if cap.matches(typ, o.zone, capacityType) {
					out = true
				}
			}
			if out {
				errs = append(errs, iceError{cfg, o, "", ""})
				continue
			}
			o.price = math.Inf(1)
			if p, found := odPrice[typ]; found && p > 0 {
				o.price = p
				if capacityType == "spot" {
					o.price = catalog.SpotPrice(typ, o.zone, p)
				}
			}
			if strategy == "prioritized" {
				o.price = math.Inf(1)
				if p, err := strconv.ParseFloat(o.fields.Get("Priority"), 64); err == nil {
					o.price = p
				}
			}
			ok = append(ok, o)
		}
		if len(cfg.overrides) > 0 && len(ok) == 0 {
			continue // every override of this template is out of capacity
		}
		sort.SliceStable(ok, func(i, j int) bool { return ok[i].price < ok[j].price })
		cfg.overrides = ok
		kept = append(kept, cfg)
	}
	sort.SliceStable(kept, func(i, j int) bool { return firstPrice(kept[i]) < firstPrice(kept[j]) })

	var errXML bytes.Buffer
	if len(errs) > 0 {
		errXML.WriteString("<errorSet>")
		for _, e := range errs {
			typ := e.o.fields.Get("InstanceType")
			code, msg := "InsufficientInstanceCapacity", "There is no Spot capacity available that matches your request."
			if faults.SpotRoleMissing && capacityType == "spot" {
				code, msg = "AuthFailure.ServiceLinkedRoleCreationNotPermitted", "The provided credentials do not have permission to create the service-linked role for EC2 Spot Instances."
			} else if e.code != "" {
				code, msg = e.code, e.msg
			} else if capacityType != "spot" {
				msg = fmt.Sprintf("We currently do not have sufficient %s capacity in the Availability Zone you requested (%s). Our system will be working on provisioning additional capacity. You can currently get %s capacity by not specifying an Availability Zone in your request or choosing %s.",
					typ, e.o.zone, typ, strings.Join(s.otherZones(ctx, region, typ, e.o.zone, capacityType, faults), ", "))
			}
			errXML.WriteString("<item><launchTemplateAndOverrides><launchTemplateSpecification>")
			ltID := e.cfg.fields.Get("LaunchTemplateSpecification.LaunchTemplateId")
			if ltID == "" {
				ltID = s.launchTemplateID(ctx, e.cfg.fields.Get("LaunchTemplateSpecification.LaunchTemplateName"))
			}
			fmt.Fprintf(&errXML, "<launchTemplateId>%s</launchTemplateId><version>%s</version></launchTemplateSpecification><overrides>",
				xmlEscape(ltID), xmlEscape(e.cfg.fields.Get("LaunchTemplateSpecification.Version")))
			for _, k := range sortedStrings(e.o.fields) {
				if !strings.Contains(k, ".") {
					fmt.Fprintf(&errXML, "<%s>%s</%s>", lowerFirst(k), xmlEscape(e.o.fields.Get(k)), lowerFirst(k))
				}
			}
			fmt.Fprintf(&errXML, "</overrides></launchTemplateAndOverrides><lifecycle>%s</lifecycle><errorCode>%s</errorCode><errorMessage>%s</errorMessage></item>",
				capacityType, code, xmlEscape(msg))
		}
		errXML.WriteString("</errorSet>")
	}

	if len(kept) == 0 {
		body := `<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<CreateFleetResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>` + newRequestID() +
			`</requestId><fleetId>fleet-` + uuid.NewString() + `</fleetId>` + errXML.String() + `<fleetInstanceSet/></CreateFleetResponse>`
		a := xmlAnswer(body)
		a.fault = faultCapacity
		return a
	}
	// The template's placement group must exist; the instances join it,
	// and the reservation it targets.
	type placed struct {
		g         *placementGroup
		partition int32
	}
	groups := map[string]placed{}
	targets := map[string]*capacityReservation{}
	for _, cfg := range kept {
		if r := reservations[cfg]; r != nil {
			id := cfg.fields.Get("LaunchTemplateSpecification.LaunchTemplateId")
			if id == "" {
				id = s.launchTemplateID(ctx, cfg.fields.Get("LaunchTemplateSpecification.LaunchTemplateName"))
			}
			targets[id] = r
		}
		id, name, version := cfg.fields.Get("LaunchTemplateSpecification.LaunchTemplateId"), cfg.fields.Get("LaunchTemplateSpecification.LaunchTemplateName"), cfg.fields.Get("LaunchTemplateSpecification.Version")
		g, partition, err := s.templatePlacementGroup(ctx, id, name, version)
		if err != nil {
			return errorAnswer(c, awsError{http.StatusBadRequest, "InvalidPlacementGroup.Unknown", err.Error(), true})
		}
		if g != nil {
			if id == "" {
				id = s.launchTemplateID(ctx, name)
			}
			groups[id] = placed{g, partition}
		}
	}
	form := rest
	for i, cfg := range kept {
		prefix := fmt.Sprintf("LaunchTemplateConfigs.%d.", i+1)
		for k, v := range cfg.fields {
			form[prefix+k] = v
		}
		for j, o := range cfg.overrides {
			for k, v := range o.fields {
				form[fmt.Sprintf("%sOverrides.%d.%s", prefix, j+1, k)] = v
			}
		}
	}
	a := s.forward(ctx, r, []byte(form.Encode()))
	if a.status != http.StatusOK {
		return a
	}
	var resp struct {
		Instances []struct {
			Template struct {
				ID      string `xml:"launchTemplateSpecification>launchTemplateId"`
				Version string `xml:"launchTemplateSpecification>version"`
				Zone    string `xml:"overrides>availabilityZone"`
				Subnet  string `xml:"overrides>subnetId"`
			} `xml:"launchTemplateAndOverrides"`
			Type string   `xml:"instanceType"`
			IDs  []string `xml:"instanceIds>item"`
		} `xml:"fleetInstanceSet>item"`
	}
	if err := xml.Unmarshal(a.body, &resp); err == nil {
		for _, in := range resp.Instances {
			for _, id := range in.IDs {
				s.recordLaunch(id, in.Template.ID, in.Template.Version)
				if pl := groups[in.Template.ID]; pl.g != nil {
					s.joinPlacementGroup(pl.g, id, pl.partition)
				}
				if r := targets[in.Template.ID]; r != nil {
					s.joinReservation(r, id)
				} else if capacityType == "on-demand" && s.templateOpensReservations(ctx, in.Template.ID, in.Template.Version) {
					zone := in.Template.Zone
					if zone == "" {
						zone = s.subnetZone(ctx, region, in.Template.Subnet)
					}
					if r := s.openReservation(ctx, in.Type, zone); r != nil {
						s.joinReservation(r, id)
					}
				}
				if err := s.applyTemplate(ctx, id, in.Template.ID, in.Template.Version); err != nil {
					s.log.Error(err, "applying a launch template", "instance", id)
				}
				a.instances = append(a.instances, id)
			}
		}
	}
	if errXML.Len() > 0 {
		a.body = bytes.Replace(a.body, []byte("</CreateFleetResponse>"), append(errXML.Bytes(), "</CreateFleetResponse>"...), 1)
		a.fault = faultCapacity
	}
	return a
}

func firstPrice(cfg *fleetConfig) float64 {
	if len(cfg.overrides) == 0 {
		return math.Inf(1)
	}
	return cfg.overrides[0].price
}

func sortedStrings(v url.Values) []string {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// otherZones are the zones EC2's message suggests instead: the region's
// zones where the type is not out of capacity.
func (s *Server) otherZones(ctx context.Context, region, typ, zone, capacityType string, f Faults) []string {
	zones, _ := s.zoneNames(ctx, region)
	var out []string
	for _, z := range zones {
		if z == zone {
			continue
		}
		unavailable := false
		for _, c := range f.InsufficientCapacity {
			if c.matches(typ, z, capacityType) {
				unavailable = true
			}
		}
		if !unavailable {
			out = append(out, z)
		}
	}
	return out
}

// launchTemplateID resolves a template name, as EC2 reports templates by ID.
func (s *Server) launchTemplateID(ctx context.Context, name string) string {
	if name == "" {
		return ""
	}
	out, err := s.motoEC2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{name}})
	if err != nil || len(out.LaunchTemplates) == 0 {
		return ""
	}
	return *out.LaunchTemplates[0].LaunchTemplateId
}

// runInstances forwards RunInstances and notes the launches.
func (s *Server) runInstances(ctx context.Context, c *call, r *http.Request) *answer {
	a := s.forward(ctx, r, c.Body)
	if a.status != http.StatusOK {
		return a
	}
	var resp struct {
		IDs []string `xml:"instancesSet>item>instanceId"`
	}
	if err := xml.Unmarshal(a.body, &resp); err == nil {
		for _, id := range resp.IDs {
			s.recordLaunch(id, "", "")
			a.instances = append(a.instances, id)
		}
	}
	return a
}
