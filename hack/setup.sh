#!/usr/bin/env bash
# Installs and builds everything the local control plane needs, once:
# etcd, awscli and tmux from Debian's packages, the Kubernetes and kwok binaries
# (hack/build-controlplane.sh) and helm (from the Go module proxy), and checks that moto_server (the AWS emulator
# behind cmd/fake-aws) and cfn-lint are installed. Prints the binaries' paths as name=path lines.
# Safe to run concurrently: test packages that start together wait on a lock.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/versions.sh"
mkdir -p "$CACHE_DIR"
exec 9>"$CACHE_DIR/setup.lock"
flock 9

# Debian packages: etcd for the control plane, awscli for the demo's second
# client of the local AWS endpoint, tmux for test/viewer's terminal.
missing=()
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
command -v aws >/dev/null 2>&1 || missing+=(awscli)
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]} (Debian packages)" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq >&2
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
if ! command -v moto_server >/dev/null 2>&1; then
  echo "moto_server not found: the local AWS endpoint (cmd/fake-aws) runs it. Install it with: pip install 'moto[server]'" >&2
  exit 1
fi
if ! command -v cfn-lint >/dev/null 2>&1; then
  echo "cfn-lint not found: test/install lints deploy/cloudformation with it. Install it with: pip install cfn-lint" >&2
  exit 1
fi
"$(dirname "${BASH_SOURCE[0]}")/build-controlplane.sh" >&2
if [ ! -x "$HELM_BIN_DIR/helm" ]; then
  echo "building helm $HELM_VERSION" >&2
  mkdir -p "$HELM_BIN_DIR"
  CGO_ENABLED=0 GOBIN="$HELM_BIN_DIR" go install -trimpath -ldflags "-s -w" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
fi

echo "etcd=$(command -v etcd)"
for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  echo "$b=$KUBE_BIN_DIR/$b"
done
echo "kwok=$KWOK_BIN_DIR/kwok"
echo "helm=$HELM_BIN_DIR/helm"
