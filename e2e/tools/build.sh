#!/usr/bin/env bash
# Builds the Go client tools the tests use (grpcurl) from their pinned Go modules with
# this machine's Go, into $DYNAMO_KSERVE_CACHE/tools/<tool>-<version>/ (reused when
# present). Prints the folder holding the binaries.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
cache="${DYNAMO_KSERVE_CACHE:-$HOME/.cache/dynamo-kserve}"
bin="$cache/tools/grpcurl-$GRPCURL_VERSION/bin"

if [[ ! -x "$bin/grpcurl" ]]; then
  command -v go >/dev/null || { echo "tools: Go is needed to build grpcurl" >&2; exit 1; }
  mkdir -p "$bin"
  echo "tools: building grpcurl $GRPCURL_VERSION" >&2
  GOBIN="$bin" CGO_ENABLED=0 go install "github.com/fullstorydev/grpcurl/cmd/grpcurl@$GRPCURL_VERSION" >&2
fi
echo "$bin"
