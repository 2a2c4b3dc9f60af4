package fakeaws

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
)

var linuxProducts = []string{"Linux/UNIX", "Linux/UNIX (Amazon VPC)"}

// spotPriceHistory answers DescribeSpotPriceHistory with the catalog's
// modelled spot prices (a stable 30–65% of on-demand, differing by zone):
// moto reports the same price, 0.00001, for every type, which makes every
// spot offering look equally cheap.
func (s *Server) spotPriceHistory(ctx context.Context, c *call) *answer {
	f := c.Form
	var types, products, zones []string
	filters := formFilters(f)
	for k, vs := range f {
		switch {
		case strings.HasPrefix(k, "InstanceType."):
			types = append(types, vs...)
		case strings.HasPrefix(k, "ProductDescription."):
			products = append(products, vs...)
		case k == "AvailabilityZone":
			zones = append(zones, vs...)
		}
	}
	for name := range filters {
		switch name {
		case "instance-type", "availability-zone", "product-description":
		default:
			return errorAnswer(c, awsError{http.StatusBadRequest, "InvalidParameterValue", fmt.Sprintf("The filter '%s' is invalid", name), true})
		}
	}
	region := c.Region
	if region == "" {
		region = s.region
	}
	allZones, err := s.zoneNames(ctx, region)
	if err != nil {
		return errorAnswer(c, awsError{http.StatusServiceUnavailable, "Unavailable", err.Error(), false})
	}
	its, err := s.catalog.get(region)
	if err != nil {
		return errorAnswer(c, awsError{http.StatusInternalServerError, "InternalError", err.Error(), false})
	}
	in := func(v string, sets ...[]string) bool {
		for _, set := range sets {
			if len(set) == 0 {
				continue
			}
			found := false
			for _, x := range set {
				if x == v {
					found = true
				}
			}
			if !found {
				return false
			}
		}
		return true
	}
	type row struct{ typ, product, zone, price string }
	var rows []row
	for _, it := range its {
		if !in(it.Name, types, filters["instance-type"]) {
			continue
		}
		od := onDemandPrice(it)
		for _, z := range allZones {
			if !in(z, zones, filters["availability-zone"]) {
				continue
			}
			spot := catalog.SpotPrice(it.Name, z, od)
			if set, ok := s.spotPrice(it.Name); ok {
				spot = set
			}
			price := strconv.FormatFloat(spot, 'f', 6, 64)
			for _, p := range linuxProducts {
				if in(p, products, filters["product-description"]) {
					rows = append(rows, row{it.Name, p, z, price})
				}
			}
		}
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].typ < rows[j].typ })
	max := 1000
	if m := f.Get("MaxResults"); m != "" {
		n, err := strconv.Atoi(m)
		if err != nil || n < 1 || n > 1000 {
			return errorAnswer(c, awsError{http.StatusBadRequest, "InvalidParameterValue", "MaxResults must be between 1 and 1000", true})
		}
		max = n
	}
	start, err := decodeToken(f.Get("NextToken"))
	if err != nil || start > len(rows) {
		return errorAnswer(c, awsError{http.StatusBadRequest, "InvalidNextToken", "The specified token is invalid", true})
	}
	end := min(start+max, len(rows))
	ts := s.clock.Now().UTC().Truncate(3600e9).Format("2006-01-02T15:04:05.000Z")
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<DescribeSpotPriceHistoryResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>` + newRequestID() + `</requestId><spotPriceHistorySet>`)
	for _, r := range rows[start:end] {
		fmt.Fprintf(&b, "<item><instanceType>%s</instanceType><productDescription>%s</productDescription><spotPrice>%s</spotPrice><timestamp>%s</timestamp><availabilityZone>%s</availabilityZone></item>",
			r.typ, xmlEscape(r.product), r.price, ts, r.zone)
	}
	b.WriteString("</spotPriceHistorySet>")
	if end < len(rows) {
		b.WriteString("<nextToken>" + encodeToken(end) + "</nextToken>")
	} else {
		b.WriteString("<nextToken/>")
	}
	b.WriteString("</DescribeSpotPriceHistoryResponse>")
	return xmlAnswer(b.String())
}

// SetSpotPrice makes the type's spot price in every zone price, from the
// next DescribeSpotPriceHistory on; 0 goes back to the catalog's model.
func (s *Server) SetSpotPrice(instanceType string, price float64) error {
	if price < 0 {
		return fmt.Errorf("spot price %v of %s: want a positive price in $/h, or 0 for the catalog's", price, instanceType)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.spotPrices == nil {
		s.spotPrices = map[string]float64{}
	}
	if price == 0 {
		delete(s.spotPrices, instanceType)
	} else {
		s.spotPrices[instanceType] = price
	}
	return nil
}

func (s *Server) spotPrice(instanceType string) (float64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.spotPrices[instanceType]
	return p, ok
}
