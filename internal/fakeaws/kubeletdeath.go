package fakeaws

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DeadKubeletHolder holds the node lease of a Node whose kubelet is dead.
//
// The local control plane's kwok plays the kubelet of every Node the
// endpoint registers, and it plays one only while it holds the Node's
// lease. Taking the lease for good (held by another, for longer than any
// test runs, never renewed) is what a kubelet's death looks like from the
// API server: kwok stops the Node's heartbeats and stops confirming its
// pods' deletions, and the node lifecycle controller marks the Node
// NotReady once the lease's last renewal is older than its grace period.
const DeadKubeletHolder = "fake-aws/dead-kubelet"

// deadLeaseSeconds keeps kwok from taking a dead kubelet's lease back: it
// takes a lease only once it has expired.
const deadLeaseSeconds = int32(1 << 30)

// KillKubelet kills the kubelet of the instance's Node while the instance
// keeps running, as when the kubelet crashes or the machine hangs (the case
// NodeRepair is for). An instance that stops or terminates loses its
// kubelet the same way.
func (s *Server) KillKubelet(ctx context.Context, instanceID string) (Boot, error) {
	if s.nodes == nil {
		return Boot{}, fmt.Errorf("instances do not boot as Nodes here (no cluster)")
	}
	s.nodes.mu.Lock()
	boot, ok := s.nodes.boots[instanceID]
	var cp Boot
	if ok {
		cp = *boot
	}
	s.nodes.mu.Unlock()
	if !ok || !cp.Joined {
		return Boot{}, fmt.Errorf("instance %s has no Node whose kubelet could die", instanceID)
	}
	if err := s.nodes.killKubelet(ctx, boot); err != nil {
		return Boot{}, err
	}
	s.nodes.mu.Lock()
	defer s.nodes.mu.Unlock()
	return *boot, nil
}

// killKubelet takes the Node's lease from kwok; once is enough.
func (b *nodeBooter) killKubelet(ctx context.Context, boot *Boot) error {
	b.mu.Lock()
	done, name := boot.KubeletDead, boot.Node
	b.mu.Unlock()
	if done || name == "" {
		return nil
	}
	leases := b.s.cluster.kube.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	holder, duration := DeadKubeletHolder, deadLeaseSeconds
	lease, err := leases.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		// Never renewed at all: the node lifecycle controller goes by
		// the Node's own heartbeat, which kwok no longer sends either.
		_, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &duration,
				RenewTime: &metav1.MicroTime{Time: b.s.clock.Now().Add(-time.Hour)}}}, metav1.CreateOptions{})
	case err == nil:
		// The last renewal stays as it was: from here on nobody renews.
		lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds = &holder, &duration
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("killing the kubelet of Node %s (taking its lease from kwok): %w", name, err)
	}
	b.mu.Lock()
	boot.KubeletDead = true
	b.mu.Unlock()
	b.s.log.Info("kubelet dead", "instance", boot.InstanceID, "node", name)
	return nil
}
