package simulate

import (
	"math"
	"sort"
	"strings"
	"time"

	"github.com/joiner-autoscaler/joiner/pkg/disruption"
)

// Result is one configuration's run.
type Result struct {
	Summary Summary `json:"summary"`
	// Samples are the time series, every Timing.Sample.
	Samples []Sample `json:"samples"`
	// Decisions are the disruption commands, in order.
	Decisions []Decision `json:"decisions"`
	// Blocked counts, per reason a node was left alone (its first four
	// words), the nodes each pass gave it to, summed over passes.
	Blocked map[string]int `json:"blocked"`
	// Problems are errors of the LP bound's computation, if any (the
	// bound of those samples is 0), and what the run could not do as
	// asked (a static NodePool no node can be planned for).
	Problems []string `json:"problems,omitempty"`
}

// Summary is what a run comes to; summary.json holds one per configuration.
type Summary struct {
	Config string `json:"config"`
	// TotalCost is what the nodes cost over the run, $: at list prices
	// or, with commitments, on the bill (each node's effective price as
	// the commitments cover it from moment to moment; RI fees, paid
	// whatever runs, are not counted). ListCost is the same nodes at list
	// prices. LPBoundCost is the LP lower bound of the pods running and
	// pending, integrated over the same time; with commitments, less the
	// most they could save (commitmentsCanSave).
	TotalCost      float64 `json:"totalCost"`
	ListCost       float64 `json:"listCost"`
	LPBoundCost    float64 `json:"lpBoundCost"`
	CostAboveBound float64 `json:"costAboveBound"`
	NodeHours      float64 `json:"nodeHours"`
	// Evictions are the pods evicted, by disruption, expiry or
	// interruption; EvictionsByReason splits them.
	Evictions         int            `json:"evictions"`
	EvictionsByReason map[string]int `json:"evictionsByReason"`
	// LostPods are bare Pods evicted, which nothing makes again.
	LostPods int `json:"lostPods"`
	// Disruptions are the nodes disrupted, by reason.
	Disruptions       map[string]int `json:"disruptions"`
	PendingSecondsP50 float64        `json:"pendingSecondsP50"`
	PendingSecondsP99 float64        `json:"pendingSecondsP99"`
	PendingSecondsMax float64        `json:"pendingSecondsMax"`
	PeakNodes         int            `json:"peakNodes"`
	NodesLaunched     int            `json:"nodesLaunched"`
	LaunchesFailed    int            `json:"launchesFailed"`
	Plans             int            `json:"plans"`
	DisruptionPasses  int            `json:"disruptionPasses"`
	Duration          string         `json:"duration"`
}

// Sample is the cluster at one instant.
type Sample struct {
	// Minutes since the start.
	Minutes float64 `json:"minutes"`
	// CostPerHour is the running nodes' prices (on the bill, with
	// commitments, and ListPerHour their list prices); BoundPerHour the LP
	// bound of the pods at that moment.
	CostPerHour  float64        `json:"costPerHour"`
	ListPerHour  float64        `json:"listPerHour,omitempty"`
	BoundPerHour float64        `json:"boundPerHour"`
	Nodes        int            `json:"nodes"`
	ByCapacity   map[string]int `json:"byCapacityType"`
	ByType       map[string]int `json:"byInstanceType"`
	Pods         int            `json:"pods"`
	Pending      int            `json:"pending"`
}

// Decision is a disruption command as the controller would log it.
type Decision struct {
	Minutes      float64  `json:"minutes"`
	Reason       string   `json:"reason"`
	Nodes        []string `json:"nodes"`
	Replacements []string `json:"replacements,omitempty"`
	Savings      float64  `json:"savingsPerHour"`
}

// recorder accumulates a run's figures as it goes.
type recorder struct {
	start    time.Time
	cost     float64
	listCost float64
	// onBill: the run has commitments, and cost is charged at billRate
	// from billSince on (billChanged) rather than per node at list.
	onBill       bool
	billRate     float64
	billSince    time.Time
	nodeHours    float64
	waits        []float64
	evictions    map[string]int
	lost         int
	disruptions  map[string]int
	launches     int
	launchFailed int
	plans        int
	passes       int
	peak         int
	samples      []Sample
	decisions    []Decision
	blockedBy    map[string]int
}

func (r *recorder) pending(d time.Duration) { r.waits = append(r.waits, d.Seconds()) }
func (r *recorder) evicted(reason string)   { r.evictions[reason]++ }
func (r *recorder) disrupted(reason string) { r.disruptions[reason]++ }
func (r *recorder) launched(*simNode, string) {
	r.launches++
}

// terminated adds n's cost from launch to now.
func (r *recorder) terminated(n *simNode, now time.Time) {
	h := now.Sub(n.launched).Hours()
	r.listCost += h * n.offering.Price
	if !r.onBill {
		r.cost += h * n.offering.Price
	}
	r.nodeHours += h
}

func (r *recorder) decided(now time.Time, cmd disruption.Command) {
	d := Decision{Minutes: now.Sub(r.start).Minutes(), Reason: strings.ToLower(string(cmd.Reason)), Savings: cmd.Savings}
	for _, c := range cmd.Candidates {
		d.Nodes = append(d.Nodes, c.Node+" ("+c.InstanceType+", "+c.CapacityType+")")
	}
	for _, nc := range cmd.Replacements {
		d.Replacements = append(d.Replacements, nc.InstanceType.Name+" ("+nc.Offering.CapacityType+")")
	}
	r.decisions = append(r.decisions, d)
}

// blocked counts the reasons of a pass by their first four words, which
// keeps reasons of one kind together while the report stays short.
func (r *recorder) blocked(skipped map[string]string) {
	for _, why := range skipped {
		r.blockedBy[reasonKind(why)]++
	}
}

func reasonKind(why string) string {
	words := strings.Fields(why)
	if len(words) > 4 {
		words = words[:4]
	}
	return strings.Join(words, " ")
}

// percentile is the p-th percentile (0..1) of sorted xs, nearest rank.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(xs)))) - 1
	if i < 0 {
		i = 0
	}
	return xs[i]
}

func (r *recorder) summary(name string, d time.Duration, bound float64) Summary {
	sort.Float64s(r.waits)
	total := 0
	for _, n := range r.evictions {
		total += n
	}
	s := Summary{Config: name, TotalCost: round(r.cost, 4), ListCost: round(r.listCost, 4), LPBoundCost: round(bound, 4), CostAboveBound: round(r.cost-bound, 4),
		NodeHours: round(r.nodeHours, 3), Evictions: total, EvictionsByReason: r.evictions, LostPods: r.lost, Disruptions: r.disruptions,
		PendingSecondsP50: percentile(r.waits, 0.5), PendingSecondsP99: percentile(r.waits, 0.99), PeakNodes: r.peak,
		NodesLaunched: r.launches, LaunchesFailed: r.launchFailed, Plans: r.plans, DisruptionPasses: r.passes, Duration: d.String()}
	if len(r.waits) > 0 {
		s.PendingSecondsMax = r.waits[len(r.waits)-1]
	}
	return s
}

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}
