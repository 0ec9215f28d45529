#!/usr/bin/env bash
# Builds the real platform components the operator's objects are tested against, from pinned
# upstream Go modules (e2e/cluster/versions.env) with this machine's Go:
#   prometheus-operator, prometheus-config-reloader  (github.com/prometheus-operator/prometheus-operator)
#   prometheus                                       (github.com/prometheus/prometheus: Kubernetes discovery)
#   prometheus-adapter                               (sigs.k8s.io/prometheus-adapter: the custom metrics API)
#   metrics-server                                   (sigs.k8s.io/metrics-server: the resource metrics API)
#   lwepp, epp                                       (sigs.k8s.io/gateway-api-inference-extension:
#                                                     the lightweight and the full endpoint picker)
#   traefik                                          (github.com/traefik/traefik/v3: a Gateway API
#                                                     implementation)
#   keda, keda-adapter                               (github.com/kedacore/keda/v2: the operator and
#                                                     its external metrics API server; not the
#                                                     admission webhooks)
# into $DYNAMO_KSERVE_CACHE/platform/<name>-<version>/bin (reused when present).
#
# `go install module@version` is refused for modules whose go.mod has replace directives, so
# each is built inside a small wrapper module that requires it and carries over upstream's
# replace and exclude lines (a replace pointing into upstream's own tree is dropped: the
# required version of that module is published on its own).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=../cluster/versions.env
source "$here/../cluster/versions.env"
cache="${DYNAMO_KSERVE_CACHE:-$HOME/.cache/dynamo-kserve}"
export GOFLAGS="-mod=mod" CGO_ENABLED=0

# build NAME MODULE VERSION PACKAGE...: builds each package's command into the cache; prints the bin folder.
build() {
  local name="$1" module="$2" version="$3"
  shift 3
  local out="$cache/platform/$name-$version" missing=0
  for package in "$@"; do [[ -x "$out/bin/$(basename "$package")" ]] || missing=1; done
  if ((missing == 0)); then
    echo "platform: reusing $out/bin" >&2
    return
  fi
  command -v go >/dev/null || { echo "platform: Go is needed to build $name" >&2; exit 1; }
  echo "platform: building $name $version (slow the first time)" >&2
  mkdir -p "$out/bin" "$out/src"
  (
    cd "$out/src"
    local upstream
    upstream="$(go mod download -json "$module@$version" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')"
    printf 'module dynamo-kserve.dev/platform/%s\n\ngo %s\n\nrequire %s %s\n' \
      "$name" "$(go env GOVERSION | sed 's/^go//; s/^\([0-9]*\.[0-9]*\).*/\1/')" "$module" "$version" > go.mod
    # Upstream's replace and exclude directives, as go mod edit flags.
    # shellcheck disable=SC2016 # a JavaScript program: its ${...} are JavaScript's, not the shell's
    go mod edit -json "$upstream" | node -e '
      const mod = JSON.parse(require("fs").readFileSync(0, "utf8"));
      const at = (m) => (m.Version ? `${m.Path}@${m.Version}` : m.Path);
      for (const r of mod.Replace ?? []) if (!/^\.\.?\//.test(r.New.Path)) console.log(`-replace=${at(r.Old)}=${at(r.New)}`);
      for (const e of mod.Exclude ?? []) console.log(`-exclude=${at(e)}`);
    ' | xargs -r go mod edit
    {
      printf '//go:build tools\n\n// Package tools pins the commands this module builds.\npackage tools\n\nimport (\n'
      for package in "$@"; do printf '\t_ "%s"\n' "$package"; done
      printf ')\n'
    } > tools.go
    go mod tidy >/dev/null 2>&1 || go mod download
    for package in "$@"; do
      go build -trimpath -ldflags "-s -w" -o "$out/bin/$(basename "$package")" "$package" >&2
    done
  )
}

build prometheus-operator github.com/prometheus-operator/prometheus-operator "$PROMETHEUS_OPERATOR_VERSION" \
  github.com/prometheus-operator/prometheus-operator/cmd/operator \
  github.com/prometheus-operator/prometheus-operator/cmd/prometheus-config-reloader
build prometheus github.com/prometheus/prometheus "$PROMETHEUS_VERSION" \
  github.com/prometheus/prometheus/cmd/prometheus
build prometheus-adapter sigs.k8s.io/prometheus-adapter "$PROMETHEUS_ADAPTER_VERSION" \
  sigs.k8s.io/prometheus-adapter/cmd/adapter
build metrics-server sigs.k8s.io/metrics-server "$METRICS_SERVER_VERSION" \
  sigs.k8s.io/metrics-server/cmd/metrics-server
build lwepp sigs.k8s.io/gateway-api-inference-extension "$GATEWAY_API_INFERENCE_EXTENSION_LWEPP_VERSION" \
  sigs.k8s.io/gateway-api-inference-extension/cmd/lwepp
build epp sigs.k8s.io/gateway-api-inference-extension "$GATEWAY_API_INFERENCE_EXTENSION_VERSION" \
  sigs.k8s.io/gateway-api-inference-extension/cmd/epp
build traefik github.com/traefik/traefik/v3 "$TRAEFIK_VERSION" github.com/traefik/traefik/v3/cmd/traefik
build keda github.com/kedacore/keda/v2 "$KEDA_VERSION" \
  github.com/kedacore/keda/v2/cmd/operator github.com/kedacore/keda/v2/cmd/adapter
echo "$cache/platform"
