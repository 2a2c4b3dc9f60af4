package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EC2NodeClassStatus holds the resolved selectors of an EC2NodeClass.
type EC2NodeClassStatus struct {
	// Subnets resolved from subnetSelectorTerms.
	// +optional
	Subnets []Subnet `json:"subnets,omitempty"`
	// SecurityGroups resolved from securityGroupSelectorTerms.
	// +optional
	SecurityGroups []SecurityGroup `json:"securityGroups,omitempty"`
	// CapacityReservations resolved from capacityReservationSelectorTerms.
	// +optional
	CapacityReservations []CapacityReservation `json:"capacityReservations,omitempty"`
	// AMIs resolved from amiSelectorTerms.
	// +optional
	AMIs []AMI `json:"amis,omitempty"`
	// InstanceProfile used by the nodes.
	// +optional
	InstanceProfile string `json:"instanceProfile,omitempty"`
	// Conditions contains signals for health and readiness.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Subnet is a resolved subnet.
type Subnet struct {
	// ID of the subnet.
	// +required
	ID string `json:"id"`
	// Zone of the subnet.
	// +required
	Zone string `json:"zone"`
	// ZoneID of the subnet.
	// +optional
	ZoneID string `json:"zoneID,omitempty"`
}

// SecurityGroup is a resolved security group.
type SecurityGroup struct {
	// ID of the security group.
	// +required
	ID string `json:"id"`
	// Name of the security group.
	// +optional
	Name string `json:"name,omitempty"`
}

// AMI is a resolved AMI with the node requirements it serves (arch, GPU...).
type AMI struct {
	// ID of the AMI.
	// +required
	ID string `json:"id"`
	// Deprecation state of the AMI.
	// +optional
	Deprecated bool `json:"deprecated,omitempty"`
	// Name of the AMI.
	// +optional
	Name string `json:"name,omitempty"`
	// Requirements of the AMI to be utilized on an instance type.
	// +required
	Requirements []corev1.NodeSelectorRequirement `json:"requirements"`
}

// CapacityReservation is a resolved capacity reservation.
type CapacityReservation struct {
	// AvailabilityZone of the reservation.
	// +required
	AvailabilityZone string `json:"availabilityZone"`
	// EndTime of the reservation, if it ends.
	// +optional
	EndTime *metav1.Time `json:"endTime,omitempty"`
	// ID of the reservation.
	// +kubebuilder:validation:Pattern:="^cr-[0-9a-z]+$"
	// +required
	ID string `json:"id"`
	// InstanceMatchCriteria of the reservation.
	// +kubebuilder:validation:Enum:={open,targeted}
	// +required
	InstanceMatchCriteria string `json:"instanceMatchCriteria"`
	// InstanceType of the reservation.
	// +required
	InstanceType string `json:"instanceType"`
	// Interruptible reservations may be reclaimed.
	// +optional
	Interruptible bool `json:"interruptible,omitempty"`
	// OwnerID of the reservation.
	// +kubebuilder:validation:Pattern:="^[0-9]{12}$"
	// +required
	OwnerID string `json:"ownerID"`
	// ReservationType is "default" or "capacity-block".
	// +kubebuilder:validation:Enum:={default,capacity-block}
	// +kubebuilder:default=default
	// +optional
	ReservationType string `json:"reservationType,omitempty"`
	// State is "active" or "expiring".
	// +kubebuilder:validation:Enum:={active,expiring}
	// +kubebuilder:default=active
	// +optional
	State string `json:"state,omitempty"`
}
