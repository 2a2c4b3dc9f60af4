package interruption

import (
	"strings"
	"testing"
)

// FuzzParse feeds Parse what an SQS queue may hold: EventBridge events of
// every kind, truncated or mangled, and anything else. Parse must never
// panic, and a message it accepts must be one the controller can act on.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`{"version":"0","source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","time":"2026-11-26T12:00:00Z","detail":{"instance-id":"i-0123456789abcdef0","instance-action":"terminate"}}`,
		`{"version":"0","source":"aws.ec2","detail-type":"EC2 Instance Rebalance Recommendation","detail":{"instance-id":"i-1"}}`,
		`{"version":"0","source":"aws.ec2","detail-type":"EC2 Instance State-change Notification","detail":{"instance-id":"i-1","state":"stopping"}}`,
		`{"version":"0","source":"aws.health","detail-type":"AWS Health Event","detail":{"service":"EC2","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"i-1"}]}}`,
		`{"version":"0","source":"aws.health","detail-type":"AWS Health Event","detail":{"service":"EC2","eventTypeCategory":"issue"}}`,
		`{"source":"aws.ec2"}`, `{}`, `[]`, `null`, ``, `{"detail":`, `{"source":"x","detail-type":"y","detail":123}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		m, err := Parse(body)
		if err != nil {
			if m.Kind != "" && m.Kind != KindNoOp || len(m.InstanceIDs) > 0 {
				t.Fatalf("an error with a message to act on: %+v, %v", m, err)
			}
			return
		}
		for _, id := range m.InstanceIDs {
			if strings.TrimSpace(id) == "" {
				t.Fatalf("accepted a message naming an empty instance ID: %+v", m)
			}
		}
		_ = m.Action() // every accepted kind has an action
	})
}
