#!/usr/bin/env bash
# The stand-in base image for building the dynamo-kserve image where no container registry
# is reachable: a Debian bookworm rootfs made with debootstrap (from the Debian mirror),
# plus a node of the Dockerfile's major (.node-version's: this machine's when it is of that
# major, else the one scripts/node.sh brings), this machine's npm and its CA trust (package
# registries may be reached through a TLS-inspecting proxy), imported with `docker import`.
# Real users build with the Dockerfile's default BASE_IMAGE (a public Node image) instead.
# Prints the image tag; reuses the image when it exists (the rootfs tarball is cached under
# $DYNAMO_KSERVE_CACHE).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
wanted_node="$(tr -d '[:space:]' <"$root/.node-version")"
node_binary="$(command -v node)"
if [[ "$("$node_binary" -p process.versions.node)" != "${wanted_node%%.*}."* ]]; then
  node_binary="$(bash "$root/scripts/node.sh")/bin/node"
fi
node_version="$("$node_binary" -p process.versions.node)"
ca_bundle="${NODE_EXTRA_CA_CERTS:-/etc/ssl/certs/ca-certificates.crt}"
ca_hash="$(sha256sum "$ca_bundle" | cut -c1-8)"
tag="dynamo-kserve-base:bookworm-node${node_version}-ca${ca_hash}"
if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "$tag"
  exit 0
fi
cache="${DYNAMO_KSERVE_CACHE:-$HOME/.cache/dynamo-kserve}/image"
tarball="$cache/bookworm-node${node_version}-ca${ca_hash}.tar"
mkdir -p "$cache"
if [[ ! -f "$tarball" ]]; then
  command -v debootstrap >/dev/null || { echo "base-image: debootstrap is needed (apt-get install debootstrap)" >&2; exit 1; }
  rootfs="$(mktemp -d)"
  trap 'rm -rf "$rootfs"' EXIT
  echo "base-image: debootstrap bookworm (minbase) into $rootfs" >&2
  debootstrap --variant=minbase bookworm "$rootfs" http://deb.debian.org/debian >&2
  install -m 0755 "$node_binary" "$rootfs/usr/local/bin/node"
  npm_dir="$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")"
  mkdir -p "$rootfs/usr/local/lib/node_modules"
  cp -a "$npm_dir" "$rootfs/usr/local/lib/node_modules/npm"
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
  mkdir -p "$rootfs/etc/ssl/certs"
  install -m 0644 "$ca_bundle" "$rootfs/etc/ssl/certs/dynamo-kserve-ca-bundle.crt"
  # What a slim Debian image leaves out: package lists, docs, caches.
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/*
  tar -C "$rootfs" -cf "$tarball.partial" .
  mv "$tarball.partial" "$tarball"
fi
docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/dynamo-kserve-ca-bundle.crt' \
  "$tarball" "$tag" >&2
echo "$tag"
