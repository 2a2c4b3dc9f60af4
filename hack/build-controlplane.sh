#!/usr/bin/env bash
# Builds kube-apiserver, kube-scheduler, kube-controller-manager and kubectl
# from k8s.io/kubernetes through the Go module proxy, and kwok from
# sigs.k8s.io/kwok, into .cache/bin/<name>-<version>. A binary that is already
# there is not rebuilt, so only a version bump costs a rebuild.
#
# k8s.io/kubernetes cannot be required as-is: its go.mod points every staging
# module (k8s.io/api, k8s.io/apiserver, ...) at ./staging, which does not exist
# in the module zip. We generate a throwaway build module that requires it and
# replaces each staging module with its published v0.<minor>.<patch> tag.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/versions.sh"

kube_bins=(kube-apiserver kube-scheduler kube-controller-manager kubectl)

build_kube() {
  local missing=()
  for b in "${kube_bins[@]}"; do
    [ -x "$KUBE_BIN_DIR/$b" ] || missing+=("$b")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "building ${missing[*]} $KUBE_VERSION (about 4 min per binary on 2 cores; cached afterwards)" >&2
  local mod="$CACHE_DIR/build/kubernetes-$KUBE_VERSION"
  mkdir -p "$mod" "$KUBE_BIN_DIR"
  local gomod
  gomod=$(cd "$mod" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^\s*"GoMod": "\(.*\)",$/\1/p')
  local staging_ver="v0.${KUBE_VERSION#v1.}"
  {
    echo "module joiner.local/kubebuild"
    echo
    echo "go 1.24"
    echo
    echo "require k8s.io/kubernetes $KUBE_VERSION"
    echo
    grep -E '^\s*k8s.io/[a-z0-9-]+ => \./staging/' "$gomod" | awk -v v="$staging_ver" '{print "replace " $1 " => " $1 " " v}'
  } > "$mod/go.mod"
  cat > "$mod/tools.go" <<'GO'
//go:build tools

package kubebuild

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
  local ldflags="-s -w"
  ldflags+=" -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION"
  ldflags+=" -X k8s.io/component-base/version.gitMajor=1"
  ldflags+=" -X k8s.io/component-base/version.gitMinor=$(echo "$KUBE_VERSION" | cut -d. -f2)"
  ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
  ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION"
  (
    cd "$mod"
    GOFLAGS=-mod=mod go mod tidy -e >/dev/null 2>&1 || true
    pkgs=()
    for b in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
    CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -tags tools -ldflags "$ldflags" -o "$KUBE_BIN_DIR/" "${pkgs[@]}"
  )
}

# kwok_module_dir prints where the Go module cache holds kwok's source.
kwok_module_dir() {
  local dir
  dir=$(cd "$(mktemp -d)" && go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  [ -n "$dir" ] || { echo "cannot find the sigs.k8s.io/kwok@$KWOK_VERSION module" >&2; return 1; }
  echo "$dir"
}

# kwok is built from its module's source with one fix. kwok v0.7.0 (and
# v0.8.0) starts its pod and node controllers in the order of a map: when
# the pod controller comes first it is given the lease test before the
# node lease controller has set it, so kwok goes on confirming the pod
# deletions of a Node whose lease it lost. A Node whose kubelet died
# (internal/fakeaws/kubeletdeath.go) then lets its pods go, in the
# control-plane starts where the map's random order put pods first. The
# fix looks the test up at each call.
build_kwok() {
  [ -x "$KWOK_BIN_DIR/kwok" ] && return 0
  echo "building kwok $KWOK_VERSION (with the pod controller's lease fix)" >&2
  local dir src file
  dir=$(kwok_module_dir) || return 1
  src=$(mktemp -d)
  cp -r "$dir/." "$src/"
  chmod -R u+w "$src"
  file="$src/pkg/kwok/controllers/controller.go"
  sed -i 's/^\([[:space:]]*ReadOnlyFunc:[[:space:]]*\)c\.readOnlyFunc,$/\1func(node string) bool { return c.readOnlyFunc != nil \&\& c.readOnlyFunc(node) },/' "$file"
  [ "$(grep -c 'return c.readOnlyFunc != nil && c.readOnlyFunc(node)' "$file")" = 2 ] ||
    { echo "kwok $KWOK_VERSION: the lease fix no longer applies to $file" >&2; return 1; }
  mkdir -p "$KWOK_BIN_DIR"
  (cd "$src" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$KWOK_BIN_DIR/kwok" ./cmd/kwok)
  rm -rf "$src"
}

# The stages kwok plays, written next to its binary (the file's name
# carries a digest of hack/kwok, so a change there writes it again):
# - kwok's own node stages, initialize and heartbeat-with-lease, from its
#   module. kwok v0.7.0 picks its default heartbeat stage with the lease
#   test inverted: with node leases on it heartbeats the Node's status on
#   its own schedule, even for a Node whose lease someone else holds, so a
#   kubelet could never be made to die (internal/fakeaws/kubeletdeath.go).
#   Given these stages, kwok leaves the heartbeat to the lease, as a
#   kubelet does.
# - kwok's fast pod-ready and pod-complete stages, our pod-delete
#   (hack/kwok/pod-delete.yaml), which plays a pod's slow shutdown, and our
#   pod-unhealthy (hack/kwok/pod-unhealthy.yaml), a pod that never turns
#   Ready;
# - kwok's settings (hack/kwok/configuration.yaml).
write_kwok_stages() {
  local root digest out
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  digest=$(cat "$root/kwok/"*.yaml | sha256sum | cut -c1-12)
  out="$KWOK_BIN_DIR/stages-$digest.yaml"
  ln -sf "$(basename "$out")" "$KWOK_BIN_DIR/stages.yaml"
  [ -s "$out" ] && return 0
  local dir
  dir=$(kwok_module_dir) || return 1
  local stage="$dir/kustomize/stage"
  { cat "$stage/node/fast/node-initialize.yaml"; echo "---"
    cat "$stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml"; echo "---"
    cat "$stage/pod/fast/pod-ready.yaml"; echo "---"
    cat "$stage/pod/fast/pod-complete.yaml"; echo "---"
    cat "$root/kwok/pod-delete.yaml"; echo "---"
    cat "$root/kwok/pod-unhealthy.yaml"; echo "---"
    cat "$root/kwok/configuration.yaml"; } >"$out.tmp"
  mv "$out.tmp" "$out"
}

build_kwok
write_kwok_stages
build_kube
echo "control plane binaries ready in $KUBE_BIN_DIR and $KWOK_BIN_DIR" >&2
