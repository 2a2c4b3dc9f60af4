package pods

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestOwnership(t *testing.T) {
	ctrl := true
	cases := []struct {
		name                 string
		pod                  corev1.Pod
		daemon, mirror, node bool
	}{
		{name: "plain pod"},
		{name: "DaemonSet pod", pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", Controller: &ctrl}}}},
			daemon: true, node: true},
		{name: "a DaemonSet kind of another group is not one", pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "DaemonSet", Name: "ds"}}}}},
		{name: "ReplicaSet pod", pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs"}}}}},
		{name: "mirror pod", pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "x"}}}, mirror: true, node: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsOwnedByDaemonSet(&tc.pod); got != tc.daemon {
				t.Errorf("IsOwnedByDaemonSet = %v, want %v", got, tc.daemon)
			}
			if got := IsMirror(&tc.pod); got != tc.mirror {
				t.Errorf("IsMirror = %v, want %v", got, tc.mirror)
			}
			if got := IsOwnedByNode(&tc.pod); got != tc.node {
				t.Errorf("IsOwnedByNode = %v, want %v", got, tc.node)
			}
		})
	}
}

func TestHostPorts(t *testing.T) {
	cases := []struct {
		name string
		spec corev1.PodSpec
		want []HostPort
	}{
		{name: "none", spec: corev1.PodSpec{Containers: []corev1.Container{{Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}}},
		{name: "container port defaults to TCP", spec: corev1.PodSpec{Containers: []corev1.Container{{Ports: []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}}}},
			want: []HostPort{{Port: 8080, Protocol: corev1.ProtocolTCP}}},
		{name: "init containers count", spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Ports: []corev1.ContainerPort{{HostPort: 53, Protocol: corev1.ProtocolUDP, HostIP: "10.0.0.1"}}}},
			Containers:     []corev1.Container{{Ports: []corev1.ContainerPort{{HostPort: 9090}}}}},
			want: []HostPort{{IP: "10.0.0.1", Port: 53, Protocol: corev1.ProtocolUDP}, {Port: 9090, Protocol: corev1.ProtocolTCP}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := HostPorts(&corev1.Pod{Spec: tc.spec})
			if len(got) != len(tc.want) {
				t.Fatalf("HostPorts = %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("HostPorts[%d] = %v, want %v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestHostPortConflicts(t *testing.T) {
	tcp := func(ip string, port int32) HostPort {
		return HostPort{IP: ip, Port: port, Protocol: corev1.ProtocolTCP}
	}
	cases := []struct {
		name string
		a, b HostPort
		want bool
	}{
		{name: "same port, both wildcard", a: tcp("", 80), b: tcp("0.0.0.0", 80), want: true},
		{name: "same port, one wildcard", a: tcp("10.0.0.1", 80), b: tcp("", 80), want: true},
		{name: "same port, different addresses", a: tcp("10.0.0.1", 80), b: tcp("10.0.0.2", 80)},
		{name: "different ports", a: tcp("", 80), b: tcp("", 81)},
		{name: "different protocols", a: tcp("", 53), b: HostPort{Port: 53, Protocol: corev1.ProtocolUDP}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.a.Conflicts(tc.b); got != tc.want {
				t.Errorf("Conflicts = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestIsProvisionable(t *testing.T) {
	unschedulable := corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}
	now := metav1.Now()
	cases := []struct {
		name string
		pod  corev1.Pod
		want bool
	}{
		{name: "unschedulable", pod: corev1.Pod{Status: unschedulable}, want: true},
		{name: "not yet tried by the scheduler", pod: corev1.Pod{}},
		{name: "bound", pod: corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}, Status: unschedulable}},
		{name: "nominated for preemption", pod: corev1.Pod{Status: func() corev1.PodStatus { s := unschedulable; s.NominatedNodeName = "n"; return s }()}},
		{name: "deleting", pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Status: unschedulable}},
		{name: "finished", pod: corev1.Pod{Status: func() corev1.PodStatus { s := unschedulable; s.Phase = corev1.PodSucceeded; return s }()}},
		{name: "DaemonSet pod", pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet"}}}, Status: unschedulable}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsProvisionable(&tc.pod); got != tc.want {
				t.Errorf("IsProvisionable = %v, want %v", got, tc.want)
			}
		})
	}
}
