#!/usr/bin/env bash
# Builds the Go client tools the tests and benchmarks use (grpcurl, helm, ghz, vegeta) from their pinned Go modules with
# this machine's Go, into $DYNAMO_KSERVE_CACHE/tools/<tool>-<version>/bin (reused when
# present).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
cache="${DYNAMO_KSERVE_CACHE:-$HOME/.cache/dynamo-kserve}"

build() {
  local name="$1" version="$2" package="$3"
  local bin="$cache/tools/$name-$version/bin"
  if [[ -x "$bin/$name" ]]; then
    echo "tools: reusing $bin/$name" >&2
    return
  fi
  command -v go >/dev/null || { echo "tools: Go is needed to build $name" >&2; exit 1; }
  mkdir -p "$bin"
  echo "tools: building $name $version" >&2
  GOBIN="$bin" CGO_ENABLED=0 go install "$package@$version" >&2
}

build grpcurl "$GRPCURL_VERSION" github.com/fullstorydev/grpcurl/cmd/grpcurl
build helm "$HELM_VERSION" helm.sh/helm/v3/cmd/helm
build ghz "$GHZ_VERSION" github.com/bojand/ghz/cmd/ghz
# The HTTP load generator of the benchmark (REST and OpenAI scenarios).
build vegeta "$VEGETA_VERSION" github.com/tsenart/vegeta/v12
# perf_analyzer is no Go module: a PyPI wheel that needs a newer glibc (see the script).
bash "$here/perf-analyzer.sh"
