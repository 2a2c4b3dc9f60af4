# Versions of the local control plane. Sourced by the hack/ scripts; bumping a
# version here makes the next run rebuild that binary into a new cache folder.
KUBE_VERSION="${KUBE_VERSION:-v1.33.13}"
KWOK_VERSION="${KWOK_VERSION:-v0.7.0}"
# helm, for the chart (charts/joiner), built from the Go module proxy.
HELM_VERSION="${HELM_VERSION:-v3.19.2}"
# The cache lives in the repository but is ignored by git.
JOINER_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE_DIR="${JOINER_CACHE_DIR:-$JOINER_ROOT/.cache}"
KUBE_BIN_DIR="$CACHE_DIR/bin/kubernetes-$KUBE_VERSION"
# "-ro1": built with the fix in hack/build-controlplane.sh (build_kwok).
KWOK_BIN_DIR="$CACHE_DIR/bin/kwok-$KWOK_VERSION-ro1"
HELM_BIN_DIR="$CACHE_DIR/bin/helm-$HELM_VERSION"
