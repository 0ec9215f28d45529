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
# `build.sh` builds all of them, in the order the tests first need them (the Kubernetes tier:
# KEDA; then the e2e tier's steps in turn); `build.sh NAME...` builds those alone. Each
# component is built under a lock of its own, so a test that asks for one
# (e2e/support/platform.ts) while .ci/run's background build is at it waits for that build
# rather than starting a second, and one that asks for a later one builds it at once.
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

# built OUT PACKAGE...: whether every package's command is in OUT/bin.
built() {
  local out="$1" package
  shift
  for package in "$@"; do [[ -x "$out/bin/$(basename "$package")" ]] || return 1; done
}

# build NAME MODULE VERSION PACKAGE...: builds each package's command into the cache (under
# NAME's lock: see above). Where a function prepare_NAME is defined, it runs in the wrapper
# module's folder first, given upstream's module folder, and a PACKAGE written ./DIR=PACKAGE
# is built from the wrapper's DIR (which prepare_NAME wrote) in place of PACKAGE.
build() {
  local name="$1" module="$2" version="$3"
  shift 3
  local out="$cache/platform/$name-$version" lock started
  if built "$out" "${@##*=}"; then
    echo "platform: reusing $out/bin" >&2
    return
  fi
  command -v go >/dev/null || { echo "platform: Go is needed to build $name" >&2; exit 1; }
  mkdir -p "$out/bin" "$out/src"
  exec {lock}>"$out/.lock"
  if ! flock --nonblock "$lock"; then
    echo "platform: waiting for the build of $name $version under way" >&2
    flock "$lock"
  fi
  if built "$out" "${@##*=}"; then
    echo "platform: reusing $out/bin (built meanwhile)" >&2
    exec {lock}>&-
    return
  fi
  echo "platform: building $name $version (slow the first time)" >&2
  started=$SECONDS
  (
    cd "$out/src"
    # Upstream's module, downloaded once: its go.mod (for its directives) and its folder (for prepare_NAME).
    local download upstream
    download="$(go mod download -json "$module@$version")"
    upstream="$(sed -n 's/.*"GoMod": "\(.*\)",/\1/p' <<<"$download")"
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
    local package
    {
      printf '//go:build tools\n\n// Package tools pins the commands this module builds.\npackage tools\n\nimport (\n'
      for package in "$@"; do printf '\t_ "%s"\n' "${package##*=}"; done
      printf ')\n'
    } > tools.go
    if declare -F "prepare_$name" >/dev/null; then
      "prepare_$name" "$(sed -n 's/.*"Dir": "\(.*\)",/\1/p' <<<"$download")"
    fi
    go mod tidy >/dev/null 2>&1 || go mod download
    for package in "$@"; do
      go build -trimpath -ldflags "-s -w" -o "$out/bin/$(basename "${package##*=}")" "${package%%=*}" >&2
    done
  )
  echo "platform: built $name $version in $((SECONDS - started)) s" >&2
  exec {lock}>&-
}

# Prometheus's discovery mechanisms are plugins, and its build lets whoever builds it choose
# them (upstream's plugins.yml and `make plugins`): the test clusters use Kubernetes discovery
# alone (the Prometheus Operator's ServiceMonitors), plus the file and HTTP ones upstream always
# keeps. Its command is upstream's own main.go with the plugin list swapped for that one: a
# third less to compile, without the clouds' SDKs.
PROMETHEUS_PLUGINS=(kubernetes file http)
prepare_prometheus() {
  local upstream="$1" plugins="" plugin
  for plugin in "${PROMETHEUS_PLUGINS[@]}"; do
    plugins+="\t_ \"github.com/prometheus/prometheus/discovery/$plugin\"\n"
  done
  mkdir -p cmd/prometheus
  grep -q '^\s*_ "github.com/prometheus/prometheus/plugins"' "$upstream/cmd/prometheus/main.go" ||
    { echo "platform: Prometheus's main.go no longer imports its plugins package" >&2; exit 1; }
  sed "s#^\s*_ \"github.com/prometheus/prometheus/plugins\".*#$plugins#" \
    "$upstream/cmd/prometheus/main.go" >cmd/prometheus/main.go
}

# One function per component, listed in the order the tests first need them.
component_keda() {
  build keda github.com/kedacore/keda/v2 "$KEDA_VERSION" \
    github.com/kedacore/keda/v2/cmd/operator github.com/kedacore/keda/v2/cmd/adapter
}
component_prometheus-operator() {
  build prometheus-operator github.com/prometheus-operator/prometheus-operator "$PROMETHEUS_OPERATOR_VERSION" \
    github.com/prometheus-operator/prometheus-operator/cmd/operator \
    github.com/prometheus-operator/prometheus-operator/cmd/prometheus-config-reloader
}
component_prometheus() {
  build prometheus github.com/prometheus/prometheus "$PROMETHEUS_VERSION" \
    ./cmd/prometheus=github.com/prometheus/prometheus/cmd/prometheus
}
component_prometheus-adapter() {
  build prometheus-adapter sigs.k8s.io/prometheus-adapter "$PROMETHEUS_ADAPTER_VERSION" \
    sigs.k8s.io/prometheus-adapter/cmd/adapter
}
component_metrics-server() {
  build metrics-server sigs.k8s.io/metrics-server "$METRICS_SERVER_VERSION" \
    sigs.k8s.io/metrics-server/cmd/metrics-server
}
component_lwepp() {
  build lwepp sigs.k8s.io/gateway-api-inference-extension "$GATEWAY_API_INFERENCE_EXTENSION_LWEPP_VERSION" \
    sigs.k8s.io/gateway-api-inference-extension/cmd/lwepp
}
component_epp() {
  build epp sigs.k8s.io/gateway-api-inference-extension "$GATEWAY_API_INFERENCE_EXTENSION_VERSION" \
    sigs.k8s.io/gateway-api-inference-extension/cmd/epp
}
component_traefik() {
  build traefik github.com/traefik/traefik/v3 "$TRAEFIK_VERSION" github.com/traefik/traefik/v3/cmd/traefik
}
components=(keda prometheus-operator prometheus prometheus-adapter metrics-server lwepp epp traefik)

(($#)) || set -- "${components[@]}"
for component in "$@"; do
  declare -F "component_$component" >/dev/null ||
    { echo "platform: no component $component (one of: ${components[*]})" >&2; exit 2; }
done
for component in "$@"; do "component_$component"; done
echo "$cache/platform"
