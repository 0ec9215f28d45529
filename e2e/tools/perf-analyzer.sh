#!/usr/bin/env bash
# Installs perf_analyzer (PyPI perf-analyzer, pinned in versions.env) into
# $DYNAMO_KSERVE_CACHE/tools/perf_analyzer-<version>/ without touching the system. Its wheel is
# built for glibc 2.38 and GCC 13's libstdc++, newer than Debian 12 ships, so the binary runs
# through the loader of Debian trixie's libc6, unpacked next to it with trixie's libstdc++6 and
# libgcc-s1 (each .deb checked against the SHA256 of trixie's package index); the system's
# libssl and libz serve the rest. bin/perf_analyzer is a wrapper that does exactly that, so
# genai-perf finds it on PATH.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
cache="${DYNAMO_KSERVE_CACHE:-$HOME/.cache/dynamo-kserve}"
out="$cache/tools/perf_analyzer-$PERF_ANALYZER_VERSION"
debian="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

if [[ -x "$out/bin/perf_analyzer" && -e "$out/runtime/libcudart.so" ]] &&
  "$out/bin/perf_analyzer" --version >/dev/null 2>&1; then
  echo "tools: reusing $out/bin/perf_analyzer" >&2
  exit 0
fi
echo "tools: installing perf_analyzer $PERF_ANALYZER_VERSION and a glibc to run it" >&2
rm -rf "$out"
mkdir -p "$out/bin" "$out/download" "$out/runtime"
cd "$out/download"

python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  --platform manylinux_2_38_x86_64 "perf-analyzer==$PERF_ANALYZER_VERSION" -d .
python3 -m zipfile -e perf_analyzer-"$PERF_ANALYZER_VERSION"-*.whl wheel
install -m 0755 wheel/perf_analyzer/bin/perf_analyzer "$out/runtime/perf_analyzer"
# --shared-memory system aborts without libcudart.so ("Cannot open CUDA runtime library").
echo "nvidia-cuda-runtime-cu12==$CUDA_RUNTIME_VERSION --hash=sha256:$CUDA_RUNTIME_SHA256" > cuda-runtime.txt
python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  --platform manylinux2014_x86_64 --require-hashes -r cuda-runtime.txt -d .
python3 -m zipfile -e nvidia_cuda_runtime_cu12-"$CUDA_RUNTIME_VERSION"-*.whl cuda
install -m 0644 cuda/nvidia/cuda_runtime/lib/libcudart.so.12 "$out/runtime/libcudart.so.12"
ln -sf libcudart.so.12 "$out/runtime/libcudart.so"

curl -fsSL "$debian/dists/trixie/main/binary-amd64/Packages.xz" | xz -dc > Packages
for package in libc6 libstdc++6 libgcc-s1; do
  # The stanza of PACKAGE: its file in the pool and that file's SHA256.
  read -r filename sha256 < <(awk -v want="$package" '
    /^Package: / { name = $2 }
    name == want && /^Filename: / { file = $2 }
    name == want && /^SHA256: / { sum = $2 }
    /^$/ { if (file != "" && sum != "") { print file, sum; exit } }' Packages)
  [[ -n "${filename:-}" ]] || { echo "tools: $package is not in Debian trixie's index" >&2; exit 1; }
  curl -fsSL -o "$package.deb" "$debian/$filename"
  echo "$sha256  $package.deb" | sha256sum --check --quiet
  dpkg-deb -x "$package.deb" root
  echo "tools: $filename" >&2
done
cp -a root/usr/lib/x86_64-linux-gnu/. "$out/runtime/"
cd "$out" && rm -rf download

cat > "$out/bin/perf_analyzer" <<'WRAPPER'
#!/bin/sh
# perf_analyzer through trixie's loader: its libc and libstdc++ first, then the system's.
runtime="$(dirname "$0")/../runtime"
exec "$runtime/ld-linux-x86-64.so.2" --library-path "$runtime:/usr/lib/x86_64-linux-gnu:/lib/x86_64-linux-gnu" \
  "$runtime/perf_analyzer" "$@"
WRAPPER
chmod 0755 "$out/bin/perf_analyzer"
"$out/bin/perf_analyzer" --version >&2
