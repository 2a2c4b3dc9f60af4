package fakeaws

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// moto has no Savings Plans. The front sells and describes them
// (REST-JSON, signing name savingsplans): DescribeSavingsPlansOfferings,
// CreateSavingsPlan, DescribeSavingsPlans and DescribeSavingsPlanRates,
// with rates from the catalog's on-demand prices at commitmentDiscounts.

type spOffering struct {
	id, planType, family, region, payment string
	years                                 int
}

func (o spOffering) description() string {
	kind := "Compute"
	if o.planType == "EC2Instance" {
		kind = "EC2 Instance"
	}
	return fmt.Sprintf("%d year %s %s Savings Plan", o.years, o.payment, kind)
}

type savingsPlan struct {
	id         string
	offer      spOffering
	commitment float64
	start      time.Time
	tags       map[string]string
}

func (p *savingsPlan) end() time.Time {
	return p.start.Add(time.Duration(p.offer.years*yearSeconds) * time.Second)
}

type savingsPlans struct {
	mu        sync.Mutex
	offerings map[string]spOffering
	plans     []*savingsPlan
}

type spFilter struct {
	Name   string   `json:"name"`
	Values []string `json:"values"`
}

// spRequest holds the fields of the four calls' inputs that are read.
type spRequest struct {
	OfferingIDs    []string          `json:"offeringIds"`
	PlanTypes      []string          `json:"planTypes"`
	PaymentOptions []string          `json:"paymentOptions"`
	Durations      []int             `json:"durations"`
	Filters        []spFilter        `json:"filters"`
	OfferingID     string            `json:"savingsPlanOfferingId"`
	Commitment     string            `json:"commitment"`
	Tags           map[string]string `json:"tags"`
	PlanIDs        []string          `json:"savingsPlanIds"`
	PlanID         string            `json:"savingsPlanId"`
	States         []string          `json:"states"`
	NextToken      string            `json:"nextToken"`
	MaxResults     int               `json:"maxResults"`
}

func (r spRequest) filter(name string) []string {
	for _, f := range r.Filters {
		if f.Name == name {
			return f.Values
		}
	}
	return nil
}

func (s *Server) savingsPlansCall(c *call) *answer {
	var in spRequest
	if len(c.Body) > 0 {
		if err := json.Unmarshal(c.Body, &in); err != nil {
			return errorAnswer(c, awsError{http.StatusBadRequest, "ValidationException", err.Error(), true})
		}
	}
	switch c.Action {
	case "DescribeSavingsPlansOfferings":
		return s.describeSavingsPlansOfferings(c, in)
	case "CreateSavingsPlan":
		return s.createSavingsPlan(c, in)
	case "DescribeSavingsPlans":
		return s.describeSavingsPlans(c, in)
	case "DescribeSavingsPlanRates":
		return s.describeSavingsPlanRates(c, in)
	}
	return errorAnswer(c, awsError{http.StatusNotFound, "UnknownOperationException", "the local endpoint does not serve savingsplans " + c.Action, true})
}

func (s *Server) describeSavingsPlansOfferings(c *call, in spRequest) *answer {
	regions := in.filter("region")
	if len(regions) == 0 {
		regions = []string{c.Region}
	}
	var all []spOffering
	for _, years := range []int{1, 3} {
		for _, pay := range paymentOptions {
			all = append(all, spOffering{planType: "Compute", payment: pay, years: years})
			for _, region := range regions {
				its, err := s.catalog.get(region)
				if err != nil {
					continue
				}
				seen := map[string]bool{}
				for _, it := range its {
					seen[family(it.Name)] = true
				}
				for _, fam := range slices.Sorted(maps.Keys(seen)) {
					all = append(all, spOffering{planType: "EC2Instance", family: fam, region: region, payment: pay, years: years})
				}
			}
		}
	}
	families := in.filter("instanceFamily")
	var out []spOffering
	for _, o := range all {
		o.id = offeringID("sp", o.planType, o.family, o.region, strconv.Itoa(o.years), o.payment)
		switch {
		case len(in.OfferingIDs) > 0 && !slices.Contains(in.OfferingIDs, o.id),
			len(in.PlanTypes) > 0 && !slices.Contains(in.PlanTypes, o.planType),
			len(in.PaymentOptions) > 0 && !slices.Contains(in.PaymentOptions, o.payment),
			len(in.Durations) > 0 && !slices.Contains(in.Durations, o.years*yearSeconds),
			len(families) > 0 && (o.planType != "EC2Instance" || !slices.Contains(families, o.family)):
			continue
		}
		out = append(out, o)
	}
	page, next := paginate(len(out), in.NextToken, strconv.Itoa(in.MaxResults), 1000)
	s.sps.mu.Lock()
	if s.sps.offerings == nil {
		s.sps.offerings = map[string]spOffering{}
	}
	results := []map[string]any{}
	for _, o := range out[page[0]:page[1]] {
		s.sps.offerings[o.id] = o
		products, props := []string{"EC2", "Fargate", "Lambda"}, []map[string]string{}
		if o.planType == "EC2Instance" {
			products = []string{"EC2"}
			props = []map[string]string{{"name": "region", "value": o.region}, {"name": "instanceFamily", "value": o.family}}
		}
		results = append(results, map[string]any{
			"offeringId": o.id, "productTypes": products, "planType": o.planType, "description": o.description(),
			"paymentOption": o.payment, "durationSeconds": o.years * yearSeconds, "currency": "USD",
			"serviceCode": o.planType + "SavingsPlans", "usageType": fmt.Sprintf("%sSP:%dyr%s", o.planType, o.years, strings.ReplaceAll(o.payment, " ", "")),
			"operation": "", "properties": props,
		})
	}
	s.sps.mu.Unlock()
	return restJSON(c, withNext(map[string]any{"searchResults": results}, next))
}

func (s *Server) createSavingsPlan(c *call, in spRequest) *answer {
	commitment, err := strconv.ParseFloat(in.Commitment, 64)
	if err != nil || commitment <= 0 {
		return errorAnswer(c, awsError{http.StatusBadRequest, "ValidationException", fmt.Sprintf("commitment %q must be a positive amount of dollars per hour, such as 1.00", in.Commitment), true})
	}
	s.sps.mu.Lock()
	defer s.sps.mu.Unlock()
	o, ok := s.sps.offerings[in.OfferingID]
	if !ok {
		return errorAnswer(c, awsError{http.StatusNotFound, "ResourceNotFoundException",
			fmt.Sprintf("Savings Plan offering %q not found; take one from describe-savings-plans-offerings", in.OfferingID), true})
	}
	p := &savingsPlan{id: uuid.NewString(), offer: o, commitment: commitment, start: s.clock.Now().UTC(), tags: in.Tags}
	s.sps.plans = append(s.sps.plans, p)
	return restJSON(c, map[string]any{"savingsPlanId": p.id})
}

func (s *Server) describeSavingsPlans(c *call, in spRequest) *answer {
	now := s.clock.Now()
	s.sps.mu.Lock()
	defer s.sps.mu.Unlock()
	var out []map[string]any
	for _, p := range s.sps.plans {
		o := p.offer
		state := "active"
		if !now.Before(p.end()) {
			state = "retired"
		}
		hours := float64(o.years*yearSeconds) / 3600
		upfront, recurring := 0.0, p.commitment
		switch o.payment {
		case "All Upfront":
			upfront, recurring = p.commitment*hours, 0
		case "Partial Upfront":
			upfront, recurring = p.commitment*hours/2, p.commitment/2
		}
		have := map[string]string{"region": o.region, "ec2-instance-family": o.family, "savings-plan-type": o.planType,
			"payment-option": o.payment, "term": strconv.Itoa(o.years * yearSeconds), "commitment": money(p.commitment)}
		keep := (len(in.PlanIDs) == 0 || slices.Contains(in.PlanIDs, p.id)) && (len(in.States) == 0 || slices.Contains(in.States, state))
		for _, f := range in.Filters {
			if v, ok := have[f.Name]; ok && !slices.Contains(f.Values, v) {
				keep = false
			}
		}
		if !keep {
			continue
		}
		tags := p.tags
		if tags == nil {
			tags = map[string]string{}
		}
		out = append(out, map[string]any{
			"offeringId": o.id, "savingsPlanId": p.id, "savingsPlanArn": "arn:aws:savingsplans::" + fakeAccount + ":savingsplan/" + p.id,
			"description": o.description(), "start": p.start.Format(time.RFC3339), "end": p.end().Format(time.RFC3339), "state": state,
			"region": o.region, "ec2InstanceFamily": o.family, "savingsPlanType": o.planType, "paymentOption": o.payment,
			"productTypes": []string{"EC2"}, "currency": "USD", "commitment": money(p.commitment),
			"upfrontPaymentAmount": money(upfront), "recurringPaymentAmount": money(recurring),
			"termDurationInSeconds": o.years * yearSeconds, "tags": tags,
		})
	}
	if out == nil {
		out = []map[string]any{}
	}
	return restJSON(c, map[string]any{"savingsPlans": out})
}

func (s *Server) describeSavingsPlanRates(c *call, in spRequest) *answer {
	s.sps.mu.Lock()
	var plan *savingsPlan
	for _, p := range s.sps.plans {
		if p.id == in.PlanID {
			plan = p
		}
	}
	s.sps.mu.Unlock()
	if plan == nil {
		return errorAnswer(c, awsError{http.StatusNotFound, "ResourceNotFoundException", fmt.Sprintf("Savings Plan %q not found", in.PlanID), true})
	}
	o := plan.offer
	regions := []string{o.region}
	if o.planType == "Compute" {
		regions = slices.Sorted(maps.Keys(regionNames))
	}
	if want := in.filter("region"); len(want) > 0 {
		regions = slices.DeleteFunc(regions, func(r string) bool { return !slices.Contains(want, r) })
	}
	types, tenancies, products := in.filter("instanceType"), in.filter("tenancy"), in.filter("productDescription")
	if (len(tenancies) > 0 && !slices.Contains(tenancies, "shared")) || (len(products) > 0 && !slices.Contains(products, linuxProduct)) {
		regions = nil // only Linux on shared tenancy is rated here
	}
	var all []map[string]any
	for _, region := range regions {
		its, err := s.catalog.get(region)
		if err != nil {
			continue
		}
		for _, it := range its {
			price := onDemandPrice(it)
			if price <= 0 || (o.family != "" && family(it.Name) != o.family) || (len(types) > 0 && !slices.Contains(types, it.Name)) {
				continue
			}
			all = append(all, map[string]any{
				"rate": money(discountedRate(o.planType, o.years, price)), "currency": "USD", "unit": "Hrs",
				"productType": "EC2", "serviceCode": "AmazonEC2", "usageType": usagePrefixes[region] + "BoxUsage:" + it.Name, "operation": "RunInstances",
				"properties": []map[string]string{{"name": "region", "value": region}, {"name": "instanceType", "value": it.Name},
					{"name": "instanceFamily", "value": family(it.Name)}, {"name": "productDescription", "value": linuxProduct}, {"name": "tenancy", "value": "shared"}},
			})
		}
	}
	page, next := paginate(len(all), in.NextToken, strconv.Itoa(in.MaxResults), 1000)
	results := all[page[0]:page[1]]
	if results == nil {
		results = []map[string]any{}
	}
	return restJSON(c, withNext(map[string]any{"savingsPlanId": plan.id, "searchResults": results}, next))
}

func withNext(m map[string]any, next string) map[string]any {
	if next != "" {
		m["nextToken"] = next
	}
	return m
}

// restJSON answers a REST-JSON call with v.
func restJSON(c *call, v any) *answer {
	b, err := json.Marshal(v)
	if err != nil {
		return errorAnswer(c, awsError{http.StatusInternalServerError, "InternalServerException", err.Error(), false})
	}
	return &answer{status: http.StatusOK, header: http.Header{"Content-Type": {"application/json"}}, body: b}
}
