// Package interruption reads the EventBridge events that EC2 and AWS Health
// deliver to the interruption queue, and says what each asks of Joiner.
package interruption

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Kind names a message as Karpenter's metrics and events do.
type Kind string

const (
	KindSpotInterruption Kind = "spot_interrupted"
	KindRebalance        Kind = "rebalance_recommendation"
	KindScheduledChange  Kind = "scheduled_change"
	KindStateChange      Kind = "state_change"
	// KindCapacityReservation is an interruptible Capacity Reservation
	// taking its instances back, two minutes ahead, as spot does.
	KindCapacityReservation Kind = "capacity_reservation_interrupted"
	KindNoOp                Kind = "no_op"
)

// Action is what a message asks for.
type Action string

const (
	// ActionDrain deletes the NodeClaim, so its node is cordoned and
	// drained, respecting PDBs, before the instance goes.
	ActionDrain Action = "CordonAndDrain"
	// ActionNone only records the message (an event on the node).
	ActionNone Action = "NoAction"
)

// Message is one parsed event.
type Message struct {
	Kind        Kind
	InstanceIDs []string
	// State is the new instance state of a state-change message.
	State string
	// Time is when AWS emitted the event.
	Time time.Time
}

// Action is what the message asks for. Rebalance recommendations only
// warn: acting on them would churn spot nodes that may never be reclaimed.
func (m Message) Action() Action {
	switch m.Kind {
	case KindSpotInterruption, KindScheduledChange, KindCapacityReservation:
		return ActionDrain
	case KindStateChange:
		switch m.State {
		case "stopping", "stopped", "shutting-down", "terminated":
			return ActionDrain
		}
	}
	return ActionNone
}

type envelope struct {
	Source     string          `json:"source"`
	DetailType string          `json:"detail-type"`
	Time       time.Time       `json:"time"`
	Detail     json.RawMessage `json:"detail"`
}

type ec2Detail struct {
	InstanceID string `json:"instance-id"`
	State      string `json:"state"`
}

type healthDetail struct {
	Service           string `json:"service"`
	EventTypeCategory string `json:"eventTypeCategory"`
	AffectedEntities  []struct {
		EntityValue string `json:"entityValue"`
	} `json:"affectedEntities"`
}

// Parse reads a message body. A body that is not an EventBridge event is an
// error (the caller deletes it, so it is not received forever); an event of
// a kind Joiner does not act on is KindNoOp.
func Parse(body string) (Message, error) {
	var e envelope
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		return Message{}, fmt.Errorf("not an EventBridge event: %w", err)
	}
	if e.Source == "" || e.DetailType == "" {
		return Message{}, fmt.Errorf("not an EventBridge event: no source or detail-type")
	}
	m := Message{Kind: KindNoOp, Time: e.Time}
	switch {
	case e.Source == "aws.ec2" && e.DetailType == "EC2 Spot Instance Interruption Warning":
		m.Kind = KindSpotInterruption
	case e.Source == "aws.ec2" && e.DetailType == "EC2 Instance Rebalance Recommendation":
		m.Kind = KindRebalance
	case e.Source == "aws.ec2" && e.DetailType == "EC2 Instance State-change Notification":
		m.Kind = KindStateChange
	case e.Source == "aws.ec2" && e.DetailType == "EC2 Capacity Reservation Instance Interruption Warning":
		m.Kind = KindCapacityReservation
	case e.Source == "aws.health" && e.DetailType == "AWS Health Event":
		var d healthDetail
		if err := json.Unmarshal(e.Detail, &d); err != nil {
			return Message{}, fmt.Errorf("AWS Health event: %w", err)
		}
		if d.Service == "EC2" && d.EventTypeCategory == "scheduledChange" {
			m.Kind = KindScheduledChange
			for _, a := range d.AffectedEntities {
				if strings.HasPrefix(a.EntityValue, "i-") {
					m.InstanceIDs = append(m.InstanceIDs, a.EntityValue)
				}
			}
		}
		return m, nil
	default:
		return m, nil
	}
	var d ec2Detail
	if err := json.Unmarshal(e.Detail, &d); err != nil {
		return Message{}, fmt.Errorf("%s event: %w", e.DetailType, err)
	}
	if d.InstanceID == "" {
		return Message{}, fmt.Errorf("%s event without detail.instance-id", e.DetailType)
	}
	m.InstanceIDs = []string{d.InstanceID}
	m.State = d.State
	return m, nil
}
