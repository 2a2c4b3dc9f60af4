#!/usr/bin/env bash
# The README's first command: set everything up and run the demo.
# For now the demo starts the local control plane, applies Joiner's CRDs and
# the guides' scale-up manifest, and shows the NodePool and EC2NodeClass as
# kubectl prints them. Later issues grow it into the full walkthrough.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source hack/versions.sh

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

step "Building the control plane (first run only) and starting it on loopback"
JOINER_SETUP_VERBOSE=1 go run ./hack/cluster up > /tmp/joiner-demo-kubeconfig
export KUBECONFIG="$(cat /tmp/joiner-demo-kubeconfig)"
export PATH="$KUBE_BIN_DIR:$PATH"

step "kubectl apply -f test/testdata/seed-manifests/03-scale-up-down.yaml"
kubectl apply -f test/testdata/seed-manifests/03-scale-up-down.yaml

step "kubectl get nodepools,ec2nodeclasses"
kubectl get nodepools,ec2nodeclasses

step "kubectl get nodepools,ec2nodeclasses -o wide"
kubectl get nodepools,ec2nodeclasses -o wide

cat <<MSG

The control plane keeps running. Try it yourself:
  export KUBECONFIG=$KUBECONFIG PATH=$KUBE_BIN_DIR:\$PATH
  kubectl get nodepool default -o yaml     # see the defaults filled in
Stop it with: make down
MSG
