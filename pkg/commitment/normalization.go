package commitment

import (
	"strconv"
	"strings"
)

// sizeFactors are AWS's normalization factors for regional RIs' size
// flexibility: a large counts 4, an xlarge 8.
var sizeFactors = map[string]float64{
	"nano": 0.25, "micro": 0.5, "small": 1, "medium": 2, "large": 4, "xlarge": 8,
}

// Normalization is the type's normalization factor: 8N for an Nxlarge, 0
// for a size AWS gives no general factor here (metal, whose factor is its
// family's largest size).
func Normalization(instanceType string) float64 {
	_, size, ok := strings.Cut(instanceType, ".")
	if !ok {
		return 0
	}
	if f, ok := sizeFactors[size]; ok {
		return f
	}
	if n, err := strconv.Atoi(strings.TrimSuffix(size, "xlarge")); err == nil && strings.HasSuffix(size, "xlarge") && n > 0 {
		return 8 * float64(n)
	}
	return 0
}
