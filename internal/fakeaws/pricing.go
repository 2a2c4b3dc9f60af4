package fakeaws

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
)

// regionNames are the Price List "location" values of the regions.
var regionNames = map[string]string{
	"us-east-1": "US East (N. Virginia)", "us-east-2": "US East (Ohio)", "us-west-1": "US West (N. California)",
	"us-west-2": "US West (Oregon)", "ca-central-1": "Canada (Central)", "eu-west-1": "EU (Ireland)",
	"eu-central-1": "EU (Frankfurt)", "eu-west-2": "EU (London)", "eu-west-3": "EU (Paris)", "eu-north-1": "EU (Stockholm)",
	"ap-northeast-1": "Asia Pacific (Tokyo)", "ap-northeast-2": "Asia Pacific (Seoul)", "ap-southeast-1": "Asia Pacific (Singapore)",
	"ap-southeast-2": "Asia Pacific (Sydney)", "ap-south-1": "Asia Pacific (Mumbai)", "sa-east-1": "South America (Sao Paulo)",
}

// usagePrefixes start the usagetype of regions other than us-east-1.
var usagePrefixes = map[string]string{
	"us-east-2": "USE2-", "us-west-1": "USW1-", "us-west-2": "USW2-", "ca-central-1": "CAN1-", "eu-west-1": "EU-",
	"eu-central-1": "EUC1-", "eu-west-2": "EUW2-", "eu-west-3": "EUW3-", "eu-north-1": "EUN1-", "ap-northeast-1": "APN1-",
	"ap-northeast-2": "APN2-", "ap-southeast-1": "APS1-", "ap-southeast-2": "APS2-", "ap-south-1": "APS3-", "sa-east-1": "SAE1-",
}

// Term codes of the on-demand offer and its hourly price dimension, the same
// for every product in the real price list.
const (
	onDemandTermCode = "JRTCKXETXF"
	hourlyRateCode   = "6YS6EN2CT7"
)

// regionTypes caches the catalog's instance types per region.
type regionTypes struct {
	mu sync.Mutex
	m  map[string][]*cloudprovider.InstanceType
}

func (rt *regionTypes) get(region string) ([]*cloudprovider.InstanceType, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if its, ok := rt.m[region]; ok {
		return its, nil
	}
	its, err := catalog.InstanceTypes(catalog.Options{Region: region, Zones: []string{region + "a"}})
	if err != nil {
		return nil, err
	}
	if rt.m == nil {
		rt.m = map[string][]*cloudprovider.InstanceType{}
	}
	rt.m[region] = its
	return its, nil
}

func onDemandPrice(it *cloudprovider.InstanceType) float64 {
	for _, o := range it.Offerings {
		if o.CapacityType == "on-demand" {
			return o.Price
		}
	}
	return 0
}

type priceFilter struct {
	Type  string `json:"Type"`
	Field string `json:"Field"`
	Value string `json:"Value"`
}

func (f priceFilter) matches(attrs map[string]string) (bool, error) {
	var v string
	found := false
	for k, av := range attrs {
		if strings.EqualFold(k, f.Field) {
			v, found = av, true
			break
		}
	}
	switch f.Type {
	case "TERM_MATCH", "EQUALS":
		return found && strings.EqualFold(v, f.Value), nil
	case "CONTAINS":
		return found && strings.Contains(strings.ToLower(v), strings.ToLower(f.Value)), nil
	case "ANY_OF", "NONE_OF":
		in := false
		for _, want := range strings.Split(f.Value, ",") {
			if found && strings.EqualFold(strings.TrimSpace(want), v) {
				in = true
			}
		}
		return in == (f.Type == "ANY_OF"), nil
	}
	return false, fmt.Errorf("filter type %q: TERM_MATCH, EQUALS, CONTAINS, ANY_OF or NONE_OF", f.Type)
}

// getProducts answers the Price List API's GetProducts for AmazonEC2 from
// the embedded catalog, in the real format: each PriceList entry a JSON
// document with product.attributes and terms.OnDemand.
func (s *Server) getProducts(c *call) *answer {
	var in struct {
		ServiceCode   string        `json:"ServiceCode"`
		Filters       []priceFilter `json:"Filters"`
		MaxResults    *int          `json:"MaxResults"`
		NextToken     string        `json:"NextToken"`
		FormatVersion string        `json:"FormatVersion"`
	}
	if err := json.Unmarshal(c.Body, &in); err != nil {
		return errorAnswer(c, awsError{http.StatusBadRequest, "ValidationException", err.Error(), true})
	}
	max := 100
	if in.MaxResults != nil {
		if *in.MaxResults < 1 || *in.MaxResults > 100 {
			return errorAnswer(c, awsError{http.StatusBadRequest, "ValidationException", "MaxResults must be between 1 and 100", true})
		}
		max = *in.MaxResults
	}
	start, err := decodeToken(in.NextToken)
	if err != nil {
		return errorAnswer(c, awsError{http.StatusBadRequest, "InvalidNextTokenException", "The specified token isn't valid.", true})
	}
	// The price list is global; generate the region the filters ask for.
	region := s.region
	for _, f := range in.Filters {
		if strings.EqualFold(f.Field, "regionCode") {
			region = f.Value
		}
		if strings.EqualFold(f.Field, "location") {
			for code, name := range regionNames {
				if strings.EqualFold(name, f.Value) {
					region = code
				}
			}
		}
	}
	var docs []string
	if in.ServiceCode == "AmazonEC2" {
		its, err := s.catalog.get(region)
		if err != nil {
			return errorAnswer(c, awsError{http.StatusInternalServerError, "InternalErrorException", err.Error(), false})
		}
		for _, it := range its {
			attrs := productAttributes(it, region)
			ok := true
			for _, f := range in.Filters {
				m, err := f.matches(attrs)
				if err != nil {
					return errorAnswer(c, awsError{http.StatusBadRequest, "ValidationException", err.Error(), true})
				}
				ok = ok && m
			}
			if ok {
				docs = append(docs, priceDocument(it, region, attrs))
			}
		}
	}
	if start > len(docs) {
		return errorAnswer(c, awsError{http.StatusBadRequest, "InvalidNextTokenException", "The specified token isn't valid.", true})
	}
	end := min(start+max, len(docs))
	out := map[string]any{"FormatVersion": "aws_v1", "PriceList": append([]string{}, docs[start:end]...)}
	if end < len(docs) {
		out["NextToken"] = encodeToken(end)
	}
	return jsonAnswer(c, out)
}

func productAttributes(it *cloudprovider.InstanceType, region string) map[string]string {
	location := regionNames[region]
	if location == "" {
		location = region
	}
	mib, _ := strconv.ParseFloat(it.Labels["karpenter.k8s.aws/instance-memory"], 64)
	// The Price List files bare-metal sizes under Dedicated tenancy, as
	// their own product family.
	family, tenancy := "Compute Instance", "Shared"
	if strings.Contains(it.Name, ".metal") {
		family, tenancy = "Compute Instance (bare metal)", "Dedicated"
	}
	return map[string]string{
		"productFamily":           family,
		"servicecode":             "AmazonEC2",
		"serviceCode":             "AmazonEC2",
		"servicename":             "Amazon Elastic Compute Cloud",
		"instanceType":            it.Name,
		"instanceFamily":          it.Labels["karpenter.k8s.aws/instance-family"],
		"regionCode":              region,
		"location":                location,
		"locationType":            "AWS Region",
		"operatingSystem":         "Linux",
		"tenancy":                 tenancy,
		"preInstalledSw":          "NA",
		"capacitystatus":          "Used",
		"licenseModel":            "No License required",
		"marketoption":            "OnDemand",
		"operation":               "RunInstances",
		"usagetype":               usagePrefixes[region] + "BoxUsage:" + it.Name,
		"vcpu":                    it.Labels["karpenter.k8s.aws/instance-cpu"],
		"memory":                  strconv.FormatFloat(mib/1024, 'f', -1, 64) + " GiB",
		"processorArchitecture":   "64-bit",
		"currentGeneration":       "Yes",
		"networkPerformance":      it.Labels["karpenter.k8s.aws/instance-network-bandwidth"] + " Megabit",
		"physicalProcessor":       it.Labels["karpenter.k8s.aws/instance-cpu-manufacturer"],
		"normalizationSizeFactor": "1",
	}
}

func sku(region, name string) string {
	h := sha256.Sum256([]byte(region + "/" + name))
	const alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
	b := make([]byte, 16)
	for i := range b {
		b[i] = alphabet[int(h[i])%len(alphabet)]
	}
	return string(b)
}

func priceDocument(it *cloudprovider.InstanceType, region string, attrs map[string]string) string {
	code := sku(region, it.Name)
	price := onDemandPrice(it)
	product := map[string]string{}
	for k, v := range attrs {
		if k != "productFamily" && k != "serviceCode" {
			product[k] = v
		}
	}
	term := code + "." + onDemandTermCode
	dim := term + "." + hourlyRateCode
	doc := map[string]any{
		"product": map[string]any{
			"productFamily": attrs["productFamily"],
			"attributes":    product,
			"sku":           code,
		},
		"serviceCode": "AmazonEC2",
		"terms": map[string]any{
			"OnDemand": map[string]any{
				term: map[string]any{
					"priceDimensions": map[string]any{
						dim: map[string]any{
							"unit":         "Hrs",
							"endRange":     "Inf",
							"description":  fmt.Sprintf("$%s per On Demand Linux %s Instance Hour", strconv.FormatFloat(price, 'f', -1, 64), it.Name),
							"appliesTo":    []string{},
							"rateCode":     dim,
							"beginRange":   "0",
							"pricePerUnit": map[string]string{"USD": strconv.FormatFloat(price, 'f', 10, 64)},
						},
					},
					"sku":            code,
					"effectiveDate":  "2025-07-01T00:00:00Z",
					"offerTermCode":  onDemandTermCode,
					"termAttributes": map[string]string{},
				},
			},
		},
		"version":         "20250715000000",
		"publicationDate": "2025-07-15T00:00:00Z",
	}
	b, _ := json.Marshal(doc)
	return string(b)
}
