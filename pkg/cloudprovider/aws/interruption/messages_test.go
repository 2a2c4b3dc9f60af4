package interruption

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	cases := []struct {
		name       string
		body       string
		wantKind   Kind
		wantIDs    string
		wantAction Action
		wantErr    string
	}{
		{name: "spot interruption", body: `{"version":"0","id":"1","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","time":"2026-11-23T10:00:00Z","region":"us-east-1","resources":["arn:aws:ec2:us-east-1:1:instance/i-0abc"],"detail":{"instance-id":"i-0abc","instance-action":"terminate"}}`,
			wantKind: KindSpotInterruption, wantIDs: "i-0abc", wantAction: ActionDrain},
		{name: "capacity reservation interruption drains", body: `{"version":"0","detail-type":"EC2 Capacity Reservation Instance Interruption Warning","source":"aws.ec2","detail":{"instance-id":"i-0abc","instance-action":"terminate","instance-termination-time":"2026-11-26T12:02:00Z","azId":"use1-az1"}}`,
			wantKind: KindCapacityReservation, wantIDs: "i-0abc", wantAction: ActionDrain},
		{name: "rebalance only warns", body: `{"detail-type":"EC2 Instance Rebalance Recommendation","source":"aws.ec2","detail":{"instance-id":"i-0abc"}}`,
			wantKind: KindRebalance, wantIDs: "i-0abc", wantAction: ActionNone},
		{name: "stopping drains", body: `{"detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","detail":{"instance-id":"i-0abc","state":"stopping"}}`,
			wantKind: KindStateChange, wantIDs: "i-0abc", wantAction: ActionDrain},
		{name: "running does not", body: `{"detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","detail":{"instance-id":"i-0abc","state":"running"}}`,
			wantKind: KindStateChange, wantIDs: "i-0abc", wantAction: ActionNone},
		{name: "scheduled maintenance drains every instance named", body: `{"detail-type":"AWS Health Event","source":"aws.health","detail":{"service":"EC2","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"i-1"},{"entityValue":"i-2"}]}}`,
			wantKind: KindScheduledChange, wantIDs: "i-1,i-2", wantAction: ActionDrain},
		{name: "other health events are ignored", body: `{"detail-type":"AWS Health Event","source":"aws.health","detail":{"service":"S3","eventTypeCategory":"issue"}}`,
			wantKind: KindNoOp, wantAction: ActionNone},
		{name: "another source is ignored", body: `{"detail-type":"Object Created","source":"aws.s3","detail":{}}`, wantKind: KindNoOp, wantAction: ActionNone},
		{name: "not JSON", body: `hello`, wantErr: "not an EventBridge event"},
		{name: "no instance", body: `{"detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","detail":{}}`, wantErr: "without detail.instance-id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse(tc.body)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Kind != tc.wantKind || strings.Join(m.InstanceIDs, ",") != tc.wantIDs || m.Action() != tc.wantAction {
				t.Fatalf("got %s %v %s, want %s %s %s", m.Kind, m.InstanceIDs, m.Action(), tc.wantKind, tc.wantIDs, tc.wantAction)
			}
		})
	}
}
