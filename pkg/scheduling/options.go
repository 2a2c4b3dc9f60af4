package scheduling

// Options tune the solver; the zero value gives the defaults.
type Options struct {
	// PriceBand keeps a NodeClaim's instance-type options within this factor
	// of the cheapest option, so a fallback launch never costs much more.
	// Default 1.3.
	PriceBand float64
	// MaxInstanceTypes caps a NodeClaim's options. Default 60, CreateFleet's limit.
	MaxInstanceTypes int
	// PreferencePolicy is Karpenter's PREFERENCE_POLICY. Default Respect.
	PreferencePolicy PreferencePolicy
	// MinValuesPolicy is Karpenter's MIN_VALUES_POLICY. Default Strict.
	MinValuesPolicy MinValuesPolicy
}

// PreferencePolicy says whether preferred scheduling terms shape a plan.
type PreferencePolicy string

const (
	// PreferencePolicyRespect treats preferences as required first and
	// drops them one at a time while a pod does not fit.
	PreferencePolicyRespect PreferencePolicy = "Respect"
	// PreferencePolicyIgnore drops preferred node affinity, preferred pod
	// affinity and anti-affinity and ScheduleAnyway spreads before planning,
	// so they cost nothing. PreferNoSchedule taints are still avoided until
	// a pod fits nowhere else, as Karpenter does under either policy.
	PreferencePolicyIgnore PreferencePolicy = "Ignore"
)

// MinValuesPolicy says what happens when a NodeClaim's instance-type
// options cannot meet a requirement's minValues.
type MinValuesPolicy string

const (
	// MinValuesPolicyStrict leaves such a NodeClaim out: its pods try the
	// next NodePool, or stay pending with the requirement named.
	MinValuesPolicyStrict MinValuesPolicy = "Strict"
	// MinValuesPolicyBestEffort launches with as many values as the options
	// have, lowers minValues on the NodeClaim to match and marks it relaxed.
	MinValuesPolicyBestEffort MinValuesPolicy = "BestEffort"
)

func (o Options) withDefaults() Options {
	if o.PriceBand <= 1 {
		o.PriceBand = 1.3
	}
	if o.MaxInstanceTypes <= 0 {
		o.MaxInstanceTypes = 60
	}
	if o.PreferencePolicy == "" {
		o.PreferencePolicy = PreferencePolicyRespect
	}
	if o.MinValuesPolicy == "" {
		o.MinValuesPolicy = MinValuesPolicyStrict
	}
	return o
}
