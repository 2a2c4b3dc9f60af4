package v1

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestReadiness(t *testing.T) {
	all := func(status metav1.ConditionStatus, gen int64) []metav1.Condition {
		var out []metav1.Condition
		for _, d := range ReadyDependents {
			out = append(out, metav1.Condition{Type: d, Status: status, Reason: d, ObservedGeneration: gen})
		}
		return out
	}
	with := func(conds []metav1.Condition, t string, s metav1.ConditionStatus) []metav1.Condition {
		for i := range conds {
			if conds[i].Type == t {
				conds[i].Status = s
			}
		}
		return conds
	}
	now := metav1.Now()
	cases := []struct {
		name       string
		generation int64
		deleting   bool
		conds      []metav1.Condition
		want       metav1.ConditionStatus
		reason     string
		message    string
	}{
		{name: "every dependent true", generation: 2, conds: all(metav1.ConditionTrue, 2), want: metav1.ConditionTrue, reason: "Ready"},
		{name: "one false", generation: 2, conds: with(all(metav1.ConditionTrue, 2), ConditionTypeSubnetsReady, metav1.ConditionFalse),
			want: metav1.ConditionFalse, reason: ReasonUnhealthyDependents, message: "SubnetsReady=False"},
		{name: "false beats unknown, both named", generation: 2,
			conds: with(with(all(metav1.ConditionTrue, 2), ConditionTypeAMIsReady, metav1.ConditionUnknown), ConditionTypeValidationSucceeded, metav1.ConditionFalse),
			want:  metav1.ConditionFalse, reason: ReasonUnhealthyDependents, message: "AMIsReady=Unknown, ValidationSucceeded=False"},
		{name: "a missing dependent", generation: 1, conds: all(metav1.ConditionTrue, 1)[1:],
			want: metav1.ConditionUnknown, reason: ReasonReconcilingDependents, message: "AMIsReady=Unknown"},
		{name: "written for an older generation", generation: 3, conds: all(metav1.ConditionTrue, 2),
			want: metav1.ConditionUnknown, reason: ReasonReconcilingDependents,
			message: "AMIsReady=Unknown, InstanceProfileReady=Unknown, SecurityGroupsReady=Unknown, SubnetsReady=Unknown, ValidationSucceeded=Unknown, PlacementGroupReady=Unknown, CapacityReservationsReady=Unknown"},
		{name: "never reconciled", want: metav1.ConditionUnknown, reason: ReasonReconcilingDependents,
			message: "AMIsReady=Unknown, InstanceProfileReady=Unknown, SecurityGroupsReady=Unknown, SubnetsReady=Unknown, ValidationSucceeded=Unknown, PlacementGroupReady=Unknown, CapacityReservationsReady=Unknown"},
		{name: "only a Ready condition is taken as it is", conds: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready"}},
			want: metav1.ConditionTrue, reason: "Ready"},
		{name: "being deleted", deleting: true, conds: all(metav1.ConditionTrue, 0), want: metav1.ConditionFalse, reason: ReasonNodeClassTerminating,
			message: `EC2NodeClass "default" is terminating`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc := &EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default", Generation: tc.generation}}
			if tc.deleting {
				nc.DeletionTimestamp = &now
			}
			nc.Status.Conditions = tc.conds
			status, reason, message := nc.Readiness()
			if status != tc.want || reason != tc.reason || message != tc.message {
				t.Errorf("got (%s, %q, %q), want (%s, %q, %q)", status, reason, message, tc.want, tc.reason, tc.message)
			}
		})
	}
}
