package awsclient

import "testing"

func TestPriceListEndpoint(t *testing.T) {
	for _, tc := range []struct {
		region   string
		has      bool
		endpoint string
	}{
		{"us-east-1", true, "us-east-1"},
		{"us-west-2", true, "us-east-1"},
		{"eu-west-1", true, "eu-central-1"},
		{"ap-northeast-1", true, "ap-south-1"},
		{"cn-north-1", true, "cn-northwest-1"},
		{"us-gov-west-1", false, ""},
		{"us-iso-east-1", false, ""},
		{"us-isob-east-1", false, ""},
	} {
		if got := HasPriceListAPI(tc.region); got != tc.has {
			t.Errorf("HasPriceListAPI(%s) = %v, want %v", tc.region, got, tc.has)
		}
		if tc.has && PricingRegion(tc.region) != tc.endpoint {
			t.Errorf("PricingRegion(%s) = %s, want %s", tc.region, PricingRegion(tc.region), tc.endpoint)
		}
	}
}
