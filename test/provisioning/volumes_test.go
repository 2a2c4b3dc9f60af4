package provisioning

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/test/framework"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// zonalDisk is an EBS PersistentVolume pinned to zone by its node affinity,
// and a claim bound to it. Nothing provisions or attaches it here: the PV
// controller binds the pair, kube-scheduler checks the node affinity.
func zonalDisk(name, zone string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata: {name: %[1]s}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: manual
  persistentVolumeReclaimPolicy: Retain
  claimRef: {namespace: default, name: %[1]s}
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-%[1]s}
  nodeAffinity:
    required:
      nodeSelectorTerms: [{matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [%[2]s]}]}]
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: %[1]s, namespace: default}
spec:
  storageClassName: manual
  volumeName: %[1]s
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
`, name, zone)
}

func withClaim(claim string) string {
	return fmt.Sprintf("      volumes: [{name: data, persistentVolumeClaim: {claimName: %s}}]\n", claim)
}

// podNode is the node and zone of the only Running pod labelled app=name.
func podNode(t *testing.T, app string) (node, zone string) {
	t.Helper()
	_, nodes := framework.Running(t, map[string]string{"app": app})
	for n := range nodes {
		node = n
	}
	if len(nodes) != 1 {
		t.Fatalf("want one Running %s pod, got %v", app, nodes)
	}
	var nd corev1.Node
	if err := framework.Kube.Get(context.Background(), client.ObjectKey{Name: node}, &nd); err != nil {
		t.Fatal(err)
	}
	return node, nd.Labels[corev1.LabelTopologyZone]
}

// TestVolumesEndToEnd: a pod bound to a zone-b volume gets a zone-b node,
// though an existing zone-a node has room; consolidation never moves it to
// zone a; and a node at its CSINode attach limit gets no more volumes.
func TestVolumesEndToEnd(t *testing.T) {
	framework.StartJoiner(t)
	fillerNode := ""
	// After ResetCluster (cleanups run last first): the claims are free once
	// their pods are gone.
	t.Cleanup(func() {
		framework.Kubectl(t, "", "delete", "pvc", "db-data", "vol-1", "vol-2", "-n", "default", "--ignore-not-found")
		framework.Kubectl(t, "", "delete", "pv", "db-data", "vol-1", "vol-2", "--ignore-not-found")
		if fillerNode != "" {
			framework.Kubectl(t, "", "delete", "csinode", fillerNode, "--ignore-not-found")
		}
	})
	t.Cleanup(func() { framework.ResetCluster(t) })
	framework.Kubectl(t, framework.PoolAndClass, "apply", "-f", "-")

	// An existing managed node in zone a, with room to spare.
	framework.Kubectl(t, framework.Deployment("filler", 1, "250m", "256Mi", "      nodeSelector: {topology.kubernetes.io/zone: us-east-1a}\n"), "apply", "-f", "-")
	framework.Eventually(t, 2*time.Minute, "the filler pod Running", func() (bool, string) {
		n, nodes := framework.Running(t, map[string]string{"app": "filler"})
		return n == 1, fmt.Sprintf("%d running on %v", n, nodes)
	})
	var zone string
	fillerNode, zone = podNode(t, "filler")
	if zone != "us-east-1a" {
		t.Fatalf("filler node %s in %s", fillerNode, zone)
	}

	t.Run("a pod whose volume is in zone b gets a zone-b node", func(t *testing.T) {
		framework.Kubectl(t, zonalDisk("db-data", "us-east-1b"), "apply", "-f", "-")
		framework.Eventually(t, time.Minute, "the claim Bound", func() (bool, string) {
			out := framework.Kubectl(t, "", "get", "pvc", "db-data", "-n", "default", "-o", "jsonpath={.status.phase}")
			return out == "Bound", out
		})
		framework.Kubectl(t, framework.Deployment("db", 1, "250m", "256Mi", withClaim("db-data")), "apply", "-f", "-")
		framework.Eventually(t, 2*time.Minute, "the db pod Running", func() (bool, string) {
			n, nodes := framework.Running(t, map[string]string{"app": "db"})
			return n == 1, fmt.Sprintf("%d running on %v; %d nodeclaims", n, nodes, len(framework.NodeClaims(t)))
		})
		node, zone := podNode(t, "db")
		if zone != "us-east-1b" || node == fillerNode {
			t.Fatalf("db runs on %s in %s", node, zone)
		}
		zones := map[string]int{}
		for _, nc := range framework.NodeClaims(t) {
			zones[nc.Labels[corev1.LabelTopologyZone]]++
		}
		if zones["us-east-1a"] != 1 || zones["us-east-1b"] != 1 || len(zones) != 2 {
			t.Fatalf("nodeclaims by zone %v, want one in us-east-1a (filler) and one in us-east-1b (db)", zones)
		}
	})

	t.Run("consolidation does not move it to the roomy zone-a node", func(t *testing.T) {
		node, _ := podNode(t, "db")
		// The decision to keep the node is the positive signal; without the
		// volume the db pod would fit the filler node and its node would go.
		framework.Eventually(t, 2*time.Minute, "a DisruptionBlocked event on "+node, func() (bool, string) {
			out := framework.Kubectl(t, "", "get", "events", "-A", "--field-selector", "reason=DisruptionBlocked,involvedObject.name="+node, "-o", "custom-columns=MSG:.message", "--no-headers")
			return strings.Contains(out, "no cheaper replacement"), framework.TailLines(out, 3)
		})
		if now, zone := podNode(t, "db"); now != node || zone != "us-east-1b" {
			t.Fatalf("db moved from %s to %s in %s", node, now, zone)
		}
	})

	t.Run("a node at its CSINode attach limit gets no more volumes", func(t *testing.T) {
		framework.Kubectl(t, fmt.Sprintf(`apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {name: %[1]s}
spec:
  drivers: [{name: ebs.csi.aws.com, nodeID: %[1]s, allocatable: {count: 1}}]
`, fillerNode), "apply", "-f", "-")
		before := len(framework.NodeClaims(t))
		for _, name := range []string{"vol-1", "vol-2"} {
			framework.Kubectl(t, zonalDisk(name, "us-east-1a"), "apply", "-f", "-")
		}
		framework.Eventually(t, time.Minute, "the claims Bound", func() (bool, string) {
			out := framework.Kubectl(t, "", "get", "pvc", "vol-1", "vol-2", "-n", "default", "-o", "jsonpath={.items[*].status.phase}")
			return out == "Bound Bound", out
		})
		for _, name := range []string{"vol-1", "vol-2"} {
			framework.Kubectl(t, framework.Deployment(name, 1, "100m", "128Mi", withClaim(name)), "apply", "-f", "-")
		}
		// The filler node has the room for both pods, but attaches one
		// volume: one pod needs a new node in zone a.
		framework.Eventually(t, 2*time.Minute, "both volume pods Running", func() (bool, string) {
			n1, nodes1 := framework.Running(t, map[string]string{"app": "vol-1"})
			n2, nodes2 := framework.Running(t, map[string]string{"app": "vol-2"})
			return n1 == 1 && n2 == 1, fmt.Sprintf("vol-1 on %v, vol-2 on %v; %d nodeclaims", nodes1, nodes2, len(framework.NodeClaims(t)))
		})
		n1, _ := podNode(t, "vol-1")
		n2, z2 := podNode(t, "vol-2")
		if n1 == n2 || z2 != "us-east-1a" {
			t.Fatalf("vol-1 on %s, vol-2 on %s in %s", n1, n2, z2)
		}
		if after := len(framework.NodeClaims(t)); after != before+1 {
			t.Fatalf("%d nodeclaims, want %d: one new node for the volume the filler node cannot attach", after, before+1)
		}
	})
}
