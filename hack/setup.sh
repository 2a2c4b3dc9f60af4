#!/usr/bin/env bash
# Installs and builds everything the local control plane needs, once:
# etcd, awscli, tmux, nodejs, npm, coinor-cbc, gcc, skopeo and chromium from Debian's packages, the Kubernetes and kwok binaries
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
# nodejs and npm run the IAM evaluator of cmd/fake-aws --iam-enforce.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
# coinor-cbc, a MIP solver, is the offline referee of make optimum; Joiner
# never runs it.
command -v cbc >/dev/null 2>&1 || missing+=(coinor-cbc)
# gcc: go test -race needs cgo on Linux (make race).
command -v gcc >/dev/null 2>&1 || missing+=(gcc)
# skopeo: make image checks that the layout publishes with it.
command -v skopeo >/dev/null 2>&1 || missing+=(skopeo)
# chromium: the simulator's test renders report.html headless.
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
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

# The IAM evaluator (@cloud-copilot/iam-simulate, AGPL-3.0, run as its own
# process by cmd/fake-aws --iam-enforce, never linked into Joiner), from the
# npm registry at the versions its lock file pins.
IAMSIM_SRC="$JOINER_ROOT/internal/fakeaws/iamsim"
IAMSIM_DIR="$CACHE_DIR/iamsim"
want=$(cat "$IAMSIM_SRC/package.json" "$IAMSIM_SRC/package-lock.json" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$IAMSIM_DIR/.installed" 2>/dev/null)" != "$want" ]; then
  echo "installing the IAM evaluator (npm ci)" >&2
  rm -rf "$IAMSIM_DIR" && mkdir -p "$IAMSIM_DIR"
  cp "$IAMSIM_SRC/package.json" "$IAMSIM_SRC/package-lock.json" "$IAMSIM_DIR/"
  (cd "$IAMSIM_DIR" && npm ci --no-audit --no-fund --loglevel=error) >&2
  echo "$want" > "$IAMSIM_DIR/.installed"
fi

echo "etcd=$(command -v etcd)"
for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  echo "$b=$KUBE_BIN_DIR/$b"
done
echo "kwok=$KWOK_BIN_DIR/kwok"
echo "kwok-stages=$KWOK_BIN_DIR/stages.yaml"
echo "helm=$HELM_BIN_DIR/helm"
echo "iamsim=$IAMSIM_DIR/node_modules"
