#!/usr/bin/env bash
# Build the e2e tier's binaries from their published Go modules (issue 37), once per pinned set.
#
#   tests/e2e/build.sh            build what is missing, print the directory that holds them
#   tests/e2e/build.sh --dir      only print that directory (nothing is built)
#
# Each build module under tests/e2e/gomod/<name>/ pins exact versions in its go.mod and go.sum;
# the binaries go to ${PH_E2E_BINS:-${XDG_CACHE_HOME:-$HOME/.cache}/predictive-headroom/e2e-bins/<key>}
# where <key> is a hash of every go.mod, go.sum, tools.go and the build flags, so a second run builds nothing
# and a changed pin builds into a new directory. GOMODCACHE and GOCACHE stay at Go's defaults.
#
# etcd, kube-apiserver, kube-scheduler, kube-controller-manager and kwok are required: a module
# that is not served or does not build stops the script with the module, version and error.
# karpenter (Karpenter with its kwok cloud provider, the tier's autoscaler) is built next, its CRDs
# copied from its module into karpenter-crds/ beside the binaries; when it fails the message goes
# to karpenter.failed and the script goes on (the tests that need it fail with that message).
# Karpenter v1.14 declares go 1.26.10: its build alone runs with GOTOOLCHAIN=go1.27.3 (the go
# command fetches that toolchain from the module proxy); the others keep the go on PATH, so their
# build cache stays valid.
# cluster-autoscaler is tried too; when its module is not served the script says so (BLOCKED ...),
# writes the message to cluster-autoscaler.blocked in the directory and goes on
# (PH_E2E_REQUIRE_AUTOSCALER=1 makes it an error instead): the tests run on Karpenter.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
BUILD="$HERE/gomod"
FLAGS=(-trimpath "-ldflags=-s -w")
KARPENTER_TOOLCHAIN=go1.27.3
# Karpenter binds its metrics and health endpoints to ":<port>" (every interface; no flag sets the
# host). It is built from a copy of its module with this one edit to pkg/operator/operator.go, so
# both listen on loopback only, as every server of the e2e tier does.
KARPENTER_LOOPBACK='s/fmt\.Sprintf(":%d", /fmt.Sprintf("127.0.0.1:%d", /'

key="$( (echo "${FLAGS[*]} $KARPENTER_TOOLCHAIN $KARPENTER_LOOPBACK"; cat "$BUILD"/*/go.mod "$BUILD"/*/go.sum "$BUILD"/*/*.go) 2>/dev/null | sha256sum | cut -c1-16)"
DIR="${PH_E2E_BINS:-${XDG_CACHE_HOME:-$HOME/.cache}/predictive-headroom/e2e-bins/$key}"
if [[ "${1:-}" == "--dir" ]]; then
  echo "$DIR"
  exit 0
fi
command -v go >/dev/null || {
  echo "e2e-bins: no 'go' on PATH: the e2e tier builds Kubernetes from Go modules (Go >= 1.26)" >&2
  exit 1
}
mkdir -p "$DIR"
started=$SECONDS

say() { echo "e2e-bins: $*" >&2; }

# The version a build module pins for a module path (from its go.mod, after replace).
pinned() { (cd "$BUILD/$1" && go list -m -f '{{if .Replace}}{{if .Replace.Version}}{{.Replace.Version}}{{else}}{{.Version}} (edited copy){{end}}{{else}}{{.Version}}{{end}}' "$2"); }

# Print a progress line every 40 packages compiled (go build -v names each one it compiles).
progress() {
  local name=$1 n=0 t0=$SECONDS line
  while IFS= read -r line; do
    case "$line" in
      *" "* | "#"* | "") echo "$line" ;; # compiler messages pass through
      *)
        n=$((n + 1))
        if ((n % 40 == 0)); then say "$name: $n packages compiled ($((SECONDS - t0))s)"; fi
        ;;
    esac
  done
  say "$name: $n packages compiled in $((SECONDS - t0))s"
}

# build NAME MODULE BINARY=PACKAGE...: build the packages of build module NAME into $DIR.
build() {
  local name=$1 module=$2 version missing=() out pkg bin
  shift 2
  for spec in "$@"; do
    bin=${spec%%=*}
    [[ -x "$DIR/$bin" ]] || missing+=("$spec")
  done
  if ((${#missing[@]} == 0)); then
    say "$name: cached (${*%%=*})"
    return 0
  fi
  version=$(pinned "$name" "$module" 2>/dev/null || echo "?")
  say "$name: building ${missing[*]%%=*} from $module@$version ..."
  if ! out=$(cd "$BUILD/$name" && go mod download "$module" 2>&1); then
    say "FAILED $name: module $module version $version could not be downloaded:"
    echo "$out" >&2
    return 1
  fi
  local tmp
  tmp=$(mktemp -d "$DIR/.build-XXXXXX")
  local pkgs=()
  for spec in "${missing[@]}"; do pkgs+=("${spec#*=}"); done
  # One go build for all packages of a module, so they share the work; -o DIR names each
  # binary after its package's last path element, renamed to the wanted name below.
  local target="$tmp/"
  if ((${#missing[@]} == 1)); then target="$tmp/${missing[0]%%=*}"; fi
  if ! (cd "$BUILD/$name" && go build "${FLAGS[@]}" -v -o "$target" "${pkgs[@]}" 2>&1 | progress "$name"; exit "${PIPESTATUS[0]}"); then
    rm -rf "$tmp"
    say "FAILED $name: go build of ${pkgs[*]} ($module@$version) failed (messages above)"
    return 1
  fi
  for spec in "${missing[@]}"; do
    bin=${spec%%=*}
    pkg=${spec#*=}
    if ((${#missing[@]} == 1)); then mv "$tmp/$bin" "$DIR/$bin"; else mv "$tmp/$(basename "$pkg")" "$DIR/$bin"; fi
  done
  rmdir "$tmp"
}

build etcd go.etcd.io/etcd/server/v3 etcd=go.etcd.io/etcd/server/v3
build kubernetes k8s.io/kubernetes \
  kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
  kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler \
  kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager
build kwok sigs.k8s.io/kwok kwok=sigs.k8s.io/kwok/cmd/kwok

# karpenter: sigs.k8s.io/karpenter's kwok/ main package, with the loopback edit above, and its
# CRDs (NodePool, NodeClaim, NodeOverlay, CapacityBuffer; KWOKNodeClass) from the same module.
# A Karpenter that does not build does not stop the script: the message goes to karpenter.failed
# in the directory, the tests that need Karpenter fail with it, the rest of the tier runs.
build_karpenter() {
  local src work="$DIR/.karpenter-src"
  src=$(cd "$BUILD/karpenter" && go mod download sigs.k8s.io/karpenter && go list -m -f '{{.Dir}}' sigs.k8s.io/karpenter) || {
    say "FAILED karpenter: module sigs.k8s.io/karpenter (pinned in tests/e2e/gomod/karpenter/go.mod) could not be downloaded (GOTOOLCHAIN=$GOTOOLCHAIN)"
    return 1
  }
  # go build -overlay may not replace files in GOMODCACHE: build from a copy of the module with
  # the one edit (module/), through a replace directive in a copy of the build module (karpenter/).
  rm -rf "$work" && mkdir -p "$work/karpenter"
  cp -r "$src" "$work/module" && chmod -R u+w "$work/module"
  sed -i "$KARPENTER_LOOPBACK" "$work/module/pkg/operator/operator.go"
  if [[ $(grep -c 'Sprintf("127.0.0.1:%d", ' "$work/module/pkg/operator/operator.go") != 2 ]]; then
    say "FAILED karpenter: $src/pkg/operator/operator.go no longer binds its metrics and health ports as \":%d\": revise KARPENTER_LOOPBACK in tests/e2e/build.sh"
    return 1
  fi
  cp "$BUILD/karpenter"/go.mod "$BUILD/karpenter"/go.sum "$BUILD/karpenter"/tools.go "$work/karpenter/"
  (cd "$work/karpenter" && go mod edit -replace sigs.k8s.io/karpenter=../module)
  BUILD=$work build karpenter sigs.k8s.io/karpenter karpenter=sigs.k8s.io/karpenter/kwok || return 1
  rm -rf "$DIR/karpenter-crds" && mkdir -p "$DIR/karpenter-crds"
  cp "$src"/pkg/apis/crds/*.yaml "$src"/kwok/apis/crds/*.yaml "$DIR/karpenter-crds/"
  chmod u+w "$DIR"/karpenter-crds/*.yaml
  rm -rf "$work"
}
if [[ -x "$DIR/karpenter" && -d "$DIR/karpenter-crds" ]]; then
  say "karpenter: cached (karpenter, karpenter-crds)"
else
  rm -f "$DIR/karpenter.failed"
  if ! (export GOTOOLCHAIN=$KARPENTER_TOOLCHAIN; build_karpenter) 2> >(tee "$DIR/.karpenter-build.log" >&2); then
    sleep 1 # let tee write the last lines
    tail -n 40 "$DIR/.karpenter-build.log" >"$DIR/karpenter.failed"
    say "FAILED karpenter: the tests that need it will fail with these lines ($DIR/karpenter.failed)"
  fi
fi

# cluster-autoscaler: a nested module of k8s.io/autoscaler whose tags are not Go-style, so its
# go.mod names the release commit as a pseudo-version. Built only with the kwok cloud provider.
CA_MODULE=k8s.io/autoscaler/cluster-autoscaler
CA_VERSION=$(sed -n 's#^[[:space:]]*'"$CA_MODULE"' \(v[^ ]*\).*#\1#p' "$BUILD/autoscaler/go.mod" | head -1)
if [[ -x "$DIR/cluster-autoscaler" ]]; then
  say "autoscaler: cached (cluster-autoscaler)"
elif ! out=$(cd "$BUILD/autoscaler" && GOFLAGS=-mod=mod go mod download -json "$CA_MODULE@$CA_VERSION" 2>&1); then
  message="module $CA_MODULE version $CA_VERSION (release cluster-autoscaler-1.34.5) is not available: $(echo "$out" | grep -E 'Error|403|404|server response' | tr -s ' \t\n' ' ' | head -c 600)"
  echo "$message" >"$DIR/cluster-autoscaler.blocked"
  say "BLOCKED cluster-autoscaler: $message"
  if [[ "${PH_E2E_REQUIRE_AUTOSCALER:-}" == 1 ]]; then exit 1; fi
  say "the e2e tests use Karpenter's kwok provider as their autoscaler (docs/e2e.md)"
else
  rm -f "$DIR/cluster-autoscaler.blocked"
  (cd "$BUILD/autoscaler" && GOFLAGS=-mod=mod go mod tidy)
  tmp=$(mktemp -d "$DIR/.build-XXXXXX")
  (cd "$BUILD/autoscaler" && GOFLAGS=-mod=mod go build "${FLAGS[@]}" -tags kwok -v -o "$tmp/cluster-autoscaler" "$CA_MODULE" 2>&1 | progress autoscaler; exit "${PIPESTATUS[0]}") || {
    say "FAILED autoscaler: go build of $CA_MODULE@$CA_VERSION failed (messages above)"
    exit 1
  }
  mv "$tmp/cluster-autoscaler" "$DIR/" && rmdir "$tmp"
fi

say "done in $((SECONDS - started))s: $DIR"
ls -l "$DIR" >&2
echo "$DIR"
