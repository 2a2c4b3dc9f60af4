#!/usr/bin/env bash
# Installs and builds everything the local control plane needs, once:
# etcd from Debian's etcd-server package, and the Kubernetes and kwok binaries
# (hack/build-controlplane.sh), and checks that moto_server (the AWS emulator
# behind cmd/fake-aws) is installed. Prints the binaries' paths as name=path lines.
# Safe to run concurrently: test packages that start together wait on a lock.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/versions.sh"
mkdir -p "$CACHE_DIR"
exec 9>"$CACHE_DIR/setup.lock"
flock 9

if ! command -v etcd >/dev/null 2>&1; then
  echo "installing etcd (Debian package etcd-server)" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq >&2
  $sudo apt-get install -y -qq --no-install-recommends etcd-server >&2
fi
if ! command -v moto_server >/dev/null 2>&1; then
  echo "moto_server not found: the local AWS endpoint (cmd/fake-aws) runs it. Install it with: pip install 'moto[server]'" >&2
  exit 1
fi
"$(dirname "${BASH_SOURCE[0]}")/build-controlplane.sh" >&2

echo "etcd=$(command -v etcd)"
for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  echo "$b=$KUBE_BIN_DIR/$b"
done
echo "kwok=$KWOK_BIN_DIR/kwok"
