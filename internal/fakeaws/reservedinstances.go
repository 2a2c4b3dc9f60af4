package fakeaws

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// moto lists Reserved Instance offerings of its own, and cannot sell or
// describe Reserved Instances. The front answers all three calls, from
// the catalog: DescribeReservedInstancesOfferings,
// PurchaseReservedInstancesOffering and DescribeReservedInstances.

type riOffering struct {
	id, region, instanceType, zone, class, payment string
	years                                          int
	// fixed is the upfront price; hourly the recurring charge.
	fixed, hourly float64
}

func (o riOffering) scope() string {
	if o.zone == "" {
		return "Region"
	}
	return "Availability Zone"
}

type reservedInstance struct {
	id    string
	offer riOffering
	count int
	start time.Time
}

func (r *reservedInstance) end() time.Time {
	return r.start.Add(time.Duration(r.offer.years*yearSeconds) * time.Second)
}

func (r *reservedInstance) state(now time.Time) string {
	if now.Before(r.end()) {
		return "active"
	}
	return "retired"
}

type reservedInstances struct {
	mu sync.Mutex
	// offerings are those described so far, by ID: a purchase names one.
	offerings map[string]riOffering
	bought    []*reservedInstance
}

// riOfferingsFor are the offerings of a type listed at onDemand: for the
// region, and for the zone when one is asked for; each class, term and
// payment option. The effective hourly price is the same for each payment
// option; upfront payments cover all or half of it.
func riOfferingsFor(region, instanceType, zone string, onDemand float64) []riOffering {
	scopes := []string{""}
	if zone != "" {
		scopes = append(scopes, zone)
	}
	var out []riOffering
	for _, z := range scopes {
		for _, class := range []string{"standard", "convertible"} {
			for _, years := range []int{1, 3} {
				rate := discountedRate(class, years, onDemand)
				hours := float64(years*yearSeconds) / 3600
				for _, pay := range paymentOptions {
					o := riOffering{region: region, instanceType: instanceType, zone: z, class: class, payment: pay, years: years}
					switch pay {
					case "No Upfront":
						o.hourly = rate
					case "Partial Upfront":
						o.fixed, o.hourly = rate*hours/2, rate/2
					case "All Upfront":
						o.fixed = rate * hours
					}
					o.id = offeringID("ri", region, instanceType, z, class, strconv.Itoa(years), pay)
					out = append(out, o)
				}
			}
		}
	}
	return out
}

func (s *Server) describeReservedInstancesOfferings(c *call) *answer {
	f := c.Form
	filters := formFilters(f)
	one := func(param, filter string) []string {
		if v := f.Get(param); v != "" {
			return []string{v}
		}
		return filters[filter]
	}
	its, err := s.catalog.get(c.Region)
	if err != nil {
		return errorAnswer(c, awsError{http.StatusInternalServerError, "InternalError", err.Error(), false})
	}
	types := one("InstanceType", "instance-type")
	zones := one("AvailabilityZone", "availability-zone")
	var ids []string
	for k, v := range f {
		if strings.HasPrefix(k, "ReservedInstancesOfferingId.") {
			ids = append(ids, v[0])
		}
	}
	ids = append(ids, filters["reserved-instances-offering-id"]...)
	products := one("ProductDescription", "product-description")
	if len(products) > 0 && !slices.ContainsFunc(products, func(p string) bool { return strings.HasPrefix(p, linuxProduct) }) {
		its = nil // only Linux is sold here
	}
	if t := f.Get("InstanceTenancy"); t != "" && t != "default" {
		its = nil // dedicated RIs are not sold here
	}
	minD, _ := strconv.Atoi(f.Get("MinDuration"))
	maxD, _ := strconv.Atoi(f.Get("MaxDuration"))
	var out []riOffering
	for _, it := range its {
		if len(types) > 0 && !slices.Contains(types, it.Name) {
			continue
		}
		price := onDemandPrice(it)
		if price <= 0 {
			continue
		}
		zone := ""
		if len(zones) == 1 {
			zone = zones[0]
		}
		for _, o := range riOfferingsFor(c.Region, it.Name, zone, price) {
			d := o.years * yearSeconds
			switch {
			case len(ids) > 0 && !slices.Contains(ids, o.id),
				f.Get("OfferingClass") != "" && f.Get("OfferingClass") != o.class,
				f.Get("OfferingType") != "" && f.Get("OfferingType") != o.payment,
				len(filters["scope"]) > 0 && !slices.Contains(filters["scope"], o.scope()),
				len(filters["duration"]) > 0 && !slices.Contains(filters["duration"], strconv.Itoa(d)),
				minD > 0 && d < minD, maxD > 0 && d > maxD:
				continue
			}
			out = append(out, o)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].instanceType < out[j].instanceType })
	page, next := paginate(len(out), f.Get("NextToken"), f.Get("MaxResults"), 100)
	s.ris.mu.Lock()
	if s.ris.offerings == nil {
		s.ris.offerings = map[string]riOffering{}
	}
	var b strings.Builder
	for _, o := range out[page[0]:page[1]] {
		s.ris.offerings[o.id] = o
		fmt.Fprintf(&b, "<item><reservedInstancesOfferingId>%s</reservedInstancesOfferingId>%s<marketplace>false</marketplace><pricingDetailsSet/></item>",
			o.id, riXML(o))
	}
	s.ris.mu.Unlock()
	return xmlAnswer(fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>
<DescribeReservedInstancesOfferingsResponse xmlns="%s"><requestId>%s</requestId><reservedInstancesOfferingsSet>%s</reservedInstancesOfferingsSet>%s</DescribeReservedInstancesOfferingsResponse>`,
		ec2Namespace, newRequestID(), b.String(), nextTokenXML(next)))
}

// riXML are the fields an offering and a Reserved Instance share.
func riXML(o riOffering) string {
	zone := ""
	if o.zone != "" {
		zone = "<availabilityZone>" + o.zone + "</availabilityZone>"
	}
	recurring := ""
	if o.hourly > 0 {
		recurring = fmt.Sprintf("<item><frequency>Hourly</frequency><amount>%s</amount></item>", money(o.hourly))
	}
	return fmt.Sprintf("<instanceType>%s</instanceType>%s<duration>%d</duration><fixedPrice>%s</fixedPrice><usagePrice>0.0</usagePrice>"+
		"<productDescription>%s</productDescription><instanceTenancy>default</instanceTenancy><currencyCode>USD</currencyCode>"+
		"<offeringType>%s</offeringType><recurringCharges>%s</recurringCharges><offeringClass>%s</offeringClass><scope>%s</scope>",
		o.instanceType, zone, o.years*yearSeconds, money(o.fixed), linuxProduct, o.payment, recurring, o.class, o.scope())
}

func (s *Server) purchaseReservedInstancesOffering(c *call) *answer {
	id := c.Form.Get("ReservedInstancesOfferingId")
	count, err := strconv.Atoi(c.Form.Get("InstanceCount"))
	if err != nil || count < 1 {
		return errorAnswer(c, awsError{http.StatusBadRequest, "InvalidParameterValue", "InstanceCount must be a positive integer", true})
	}
	s.ris.mu.Lock()
	defer s.ris.mu.Unlock()
	o, ok := s.ris.offerings[id]
	if !ok || o.region != c.Region {
		return errorAnswer(c, awsError{http.StatusBadRequest, "InvalidReservedInstancesOfferingId",
			fmt.Sprintf("The Reserved Instances offering ID '%s' is not valid in %s; take one from describe-reserved-instances-offerings", id, c.Region), true})
	}
	r := &reservedInstance{id: uuid.NewString(), offer: o, count: count, start: s.clock.Now().UTC()}
	s.ris.bought = append(s.ris.bought, r)
	return xmlAnswer(fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>
<PurchaseReservedInstancesOfferingResponse xmlns="%s"><requestId>%s</requestId><reservedInstancesId>%s</reservedInstancesId></PurchaseReservedInstancesOfferingResponse>`,
		ec2Namespace, newRequestID(), r.id))
}

func (s *Server) describeReservedInstances(c *call) *answer {
	f := c.Form
	filters := formFilters(f)
	var ids []string
	for k, v := range f {
		if strings.HasPrefix(k, "ReservedInstancesId.") {
			ids = append(ids, v[0])
		}
	}
	ids = append(ids, filters["reserved-instances-id"]...)
	now := s.clock.Now()
	s.ris.mu.Lock()
	defer s.ris.mu.Unlock()
	var b strings.Builder
	for _, r := range s.ris.bought {
		o := r.offer
		have := map[string]string{"instance-type": o.instanceType, "availability-zone": o.zone, "scope": o.scope(),
			"state": r.state(now), "duration": strconv.Itoa(o.years * yearSeconds), "product-description": linuxProduct}
		keep := o.region == c.Region && (len(ids) == 0 || slices.Contains(ids, r.id)) &&
			(f.Get("OfferingClass") == "" || f.Get("OfferingClass") == o.class) && (f.Get("OfferingType") == "" || f.Get("OfferingType") == o.payment)
		for name, values := range filters {
			if v, ok := have[name]; ok && !slices.Contains(values, v) {
				keep = false
			}
		}
		if !keep {
			continue
		}
		fmt.Fprintf(&b, "<item><reservedInstancesId>%s</reservedInstancesId>%s<start>%s</start><end>%s</end><instanceCount>%d</instanceCount><state>%s</state></item>",
			r.id, riXML(o), r.start.Format(ec2Time), r.end().Format(ec2Time), r.count, r.state(now))
	}
	return xmlAnswer(fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>
<DescribeReservedInstancesResponse xmlns="%s"><requestId>%s</requestId><reservedInstancesSet>%s</reservedInstancesSet></DescribeReservedInstancesResponse>`,
		ec2Namespace, newRequestID(), b.String()))
}

// ec2Time is how EC2's XML writes a time.
const ec2Time = "2006-01-02T15:04:05.000Z"

// money writes a price as AWS does, with up to 8 decimals.
func money(v float64) string {
	s := strconv.FormatFloat(v, 'f', 8, 64)
	s = strings.TrimRight(s, "0")
	if strings.HasSuffix(s, ".") {
		s += "0"
	}
	return s
}

// paginate is the [start, end) of the page a token (encodeToken's
// offset) and a page size ask for, and the next page's token ("" at the
// end).
func paginate(n int, token, maxResults string, defaultSize int) ([2]int, string) {
	start, _ := decodeToken(token)
	size, err := strconv.Atoi(maxResults)
	if err != nil || size <= 0 {
		size = defaultSize
	}
	start = min(max(start, 0), n)
	end := min(start+size, n)
	if end < n {
		return [2]int{start, end}, encodeToken(end)
	}
	return [2]int{start, end}, ""
}

func nextTokenXML(next string) string {
	if next == "" {
		return ""
	}
	return "<nextToken>" + next + "</nextToken>"
}
