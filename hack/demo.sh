#!/usr/bin/env bash
# The README's first command: set everything up and run the guides' scale-up
# walkthrough on a local control plane, with Joiner's kwok provider standing
# in for EC2.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source hack/versions.sh

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

step "Building the control plane (first run only) and starting it on loopback"
kubeconfig="$(JOINER_SETUP_VERBOSE=1 go run ./hack/cluster up)"
export KUBECONFIG="$kubeconfig"
export PATH="$KUBE_BIN_DIR:$PATH"
state="$(dirname "$kubeconfig")"

step "Starting Joiner (kwok provider: fake nodes priced from the embedded EC2 catalog)"
go build -o bin/joiner ./cmd/joiner
if [ -f "$state/joiner.pid" ]; then kill "$(cat "$state/joiner.pid")" 2>/dev/null || true; sleep 1; fi
# Random ports unless asked for, so a second cluster on the machine does not clash.
METRICS_PORT="${JOINER_METRICS_PORT:-0}" HEALTH_PROBE_PORT="${JOINER_HEALTH_PORT:-0}" DISABLE_LEADER_ELECTION=true \
  setsid ./bin/joiner > "$state/joiner.log" 2>&1 < /dev/null &
echo $! > "$state/joiner.pid"
sleep 2
if ! kill -0 "$(cat "$state/joiner.pid")" 2>/dev/null; then
  echo "Joiner did not start:" >&2
  tail -5 "$state/joiner.log" >&2
  exit 1
fi
echo "logs: $state/joiner.log"

step "kubectl apply -f test/testdata/seed-manifests/03-scale-up-down.yaml"
kubectl apply -f test/testdata/seed-manifests/03-scale-up-down.yaml

step "Waiting for the 5 inflate pods to run"
for i in $(seq 1 120); do
  running=$(kubectl get pods -l app=inflate --field-selector=status.phase=Running --no-headers 2>/dev/null | wc -l)
  [ "$running" -ge 5 ] && break
  sleep 1
done
if [ "$running" -lt 5 ]; then
  echo "only $running of 5 pods run after 2 minutes; Joiner's log ends with:" >&2
  tail -5 "$state/joiner.log" >&2
  exit 1
fi
kubectl wait --for=condition=Ready nodeclaims --all --timeout=60s >/dev/null

step "kubectl get nodepools,ec2nodeclasses"
kubectl get nodepools,ec2nodeclasses

step "kubectl get nodeclaims"
kubectl get nodeclaims

step "kubectl get pods -o wide"
kubectl get pods -o wide

step "What Joiner logged"
grep -E '"message":"(found provisionable pod\(s\)|computed new nodeclaim\(s\) to fit pod\(s\)|created nodeclaim|launched nodeclaim|registered nodeclaim|initialized nodeclaim)"' "$state/joiner.log" \
  | sed -E 's/.*"message":"([^"]*)".*/  \1/' | uniq

step "The same plan, offline: joiner plan -f test/testdata/seed-manifests/03-scale-up-down.yaml"
./bin/joiner plan -f test/testdata/seed-manifests/03-scale-up-down.yaml

step "Scale down: kubectl scale deployment/inflate --replicas 1"
echo "(the demo shortens the guide's consolidateAfter from 1m to 10s so you need not wait)"
kubectl patch nodepool default --type=merge -p '{"spec":{"disruption":{"consolidateAfter":"10s"}}}' >/dev/null
old=$(kubectl get nodeclaims -o jsonpath='{.items[0].metadata.name}')
kubectl scale deployment/inflate --replicas 1
for i in $(seq 1 120); do
  now=$(kubectl get nodeclaims -o jsonpath='{.items[*].metadata.name}')
  running=$(kubectl get pods -l app=inflate --field-selector=status.phase=Running --no-headers 2>/dev/null | wc -l)
  if [ -n "$now" ] && [ "$now" != "$old" ] && [ "$(echo "$now" | wc -w)" -eq 1 ] && [ "$running" -eq 1 ]; then break; fi
  sleep 1
done

step "Joiner replaced the node with a cheaper one"
grep -E '"message":"(disrupting nodeclaim|tainted node|deleted node|deleted nodeclaim)' "$state/joiner.log" \
  | sed -E 's/.*"message":"([^"]*)".*/  \1/' | uniq

step "kubectl get nodeclaims"
kubectl get nodeclaims

step "kubectl get pods -o wide"
kubectl get pods -o wide

cat <<MSG

The control plane and Joiner keep running. Try it yourself:
  export KUBECONFIG=$KUBECONFIG PATH=$KUBE_BIN_DIR:\$PATH
  kubectl scale deployment/inflate --replicas 20 && kubectl get nodeclaims -w
Stop everything with: make down
MSG
