#!/usr/bin/env bash
# Builds the real Kubernetes components the tests run, from pinned upstream Go modules,
# with this machine's Go. Output: $DYNAMO_KSERVE_CACHE/cluster/<versions>/bin/{etcd,
# kube-apiserver,kube-controller-manager,kube-scheduler,kubectl,kubelet,kube-proxy,kwok,pause}. A finished build is reused
# (CI's fresh clone on the same machine skips straight to the tests).
#
# k8s.io/kubernetes cannot be `go install`ed: its go.mod replaces every k8s.io/<staging>
# module with a folder inside the repository. A wrapper module requires it and replaces
# each staging module with its published v0.Y.Z instead.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
cache="${DYNAMO_KSERVE_CACHE:-$HOME/.cache/dynamo-kserve}"
out="$cache/cluster/k8s-$KUBERNETES_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION"
bin="$out/bin"
components=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy kwok pause)

complete() {
  for component in "${components[@]}"; do [[ -x "$bin/$component" ]] || return 1; done
}
if complete; then
  echo "cluster: reusing $bin"
  echo "$bin"
  exit 0
fi

command -v go >/dev/null || { echo "cluster: Go is needed to build the test cluster" >&2; exit 1; }
mkdir -p "$bin" "$out/src"
# One build at a time: .ci/run builds the cluster in the background while the tiers that do
# not need it run, and the Kubernetes tier's first call (cluster.ts) waits for that build here.
exec {lock}>"$out/.lock"
if ! flock --nonblock "$lock"; then
  echo "cluster: waiting for the build under way" >&2
  flock "$lock"
  if complete; then
    echo "cluster: reusing $bin (built meanwhile)" >&2
    echo "$bin"
    exit 0
  fi
fi
export GOFLAGS="-mod=mod" CGO_ENABLED=0

# --- Kubernetes control plane --------------------------------------------------------
kube="$out/src/kubernetes"
mkdir -p "$kube"
staging_minor="v0.${KUBERNETES_VERSION#v1.}"
(
  cd "$kube"
  kube_mod="$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')"
  {
    echo "module dynamo-kserve.dev/cluster/kubernetes"
    echo
    echo "go $(go env GOVERSION | sed 's/^go//; s/^\([0-9]*\.[0-9]*\).*/\1/')"
    echo
    echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
    echo
    sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#replace \1 => \1 '"$staging_minor"'#p' "$kube_mod"
  } > go.mod
  cat > tools.go <<'GO'
//go:build tools

// Package tools pins the Kubernetes commands this module builds.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
  go mod tidy >/dev/null 2>&1 || go mod download
  for component in kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy; do
    if [[ ! -x "$bin/$component" ]]; then
      echo "cluster: building $component $KUBERNETES_VERSION (slow the first time)"
      go build -trimpath -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$KUBERNETES_VERSION" \
        -o "$bin/$component" "k8s.io/kubernetes/cmd/$component"
    fi
  done
)

# --- etcd: a one-line main around etcdmain ----------------------------------------------
if [[ ! -x "$bin/etcd" ]]; then
  etcd="$out/src/etcd"
  mkdir -p "$etcd"
  (
    cd "$etcd"
    cat > go.mod <<MOD
module dynamo-kserve.dev/cluster/etcd

go $(go env GOVERSION | sed 's/^go//; s/^\([0-9]*\.[0-9]*\).*/\1/')

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
MOD
    cat > main.go <<'GO'
// Command etcd is etcd's own server main, built from the pinned go.etcd.io/etcd/server/v3.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
    go mod tidy >/dev/null
    echo "cluster: building etcd $ETCD_VERSION"
    go build -trimpath -ldflags "-s -w" -o "$bin/etcd" .
  )
fi

# --- kwok: fake nodes that make pods Ready ----------------------------------------------
if [[ ! -x "$bin/kwok" ]]; then
  echo "cluster: building kwok $KWOK_VERSION"
  GOBIN="$bin" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
fi

# --- pause: the sandbox container of the real test node's pods (node.ts) -------------------
if [[ ! -x "$bin/pause" ]]; then
  echo "cluster: building pause"
  (cd "$here/pause" && go build -trimpath -ldflags "-s -w" -o "$bin/pause" .)
fi

complete || { echo "cluster: build incomplete in $bin" >&2; exit 1; }
echo "$bin"
