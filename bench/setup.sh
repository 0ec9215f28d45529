#!/usr/bin/env bash
# Installs what `npm run bench` drives, outside the checkout under $DYNAMO_KSERVE_CACHE
# (default ~/.cache/dynamo-kserve), each piece reused until its inputs change:
#   ghz (Go module, e2e/tools/build.sh), the bare grpc-go ceiling (bench/ceilings/go),
#   Triton's server from nvidia-pytriton (laid out by scripts/setup-python.sh),
#   KServe, MLServer and NVIDIA Dynamo's frontend from PyPI (one venv each: their pins
#   conflict),
#   matplotlib for the chart.
# A peer that cannot be installed here is not dropped: bench/<id>.unavailable keeps the
# exact error, and the report shows it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${DYNAMO_KSERVE_CACHE:-$HOME/.cache/dynamo-kserve}"
bench="$cache/bench"
mkdir -p "$bench"
# shellcheck source=../scripts/lib/venv.sh
source "$root/scripts/lib/venv.sh"

bash "$root/scripts/setup-python.sh" # venv-peers: Triton from nvidia-pytriton
bash "$root/e2e/tools/build.sh"      # ghz

hash_of() { cat "$@" | sha256sum | cut -c1-16; }

want="$(hash_of "$root"/bench/ceilings/go/{main.go,go.mod,go.sum})"
if [[ ! -x "$bench/ceiling-go" || "$(cat "$bench/ceiling-go.sha" 2>/dev/null)" != "$want" ]]; then
  echo "bench: building the grpc-go ceiling"
  (cd "$root/bench/ceilings/go" && CGO_ENABLED=0 go build -o "$bench/ceiling-go" .)
  echo "$want" > "$bench/ceiling-go.sha"
fi

# attempt ID VENV REQUIREMENTS: installs a peer, or records why it cannot be (once per
# requirements file, so a failing install is not retried on every run). A no-deps.txt
# beside the requirements is installed after them with --no-deps (packages whose declared
# dependencies PyPI cannot satisfy, their real ones listed in the requirements).
attempt() {
  local id="$1" venv="$cache/$2" requirements="$root/$3"
  local stamp="$bench/$id.attempted" want no_deps
  no_deps="$(dirname "$requirements")/no-deps.txt"
  local hashed=("$requirements")
  [[ -f "$no_deps" ]] && hashed+=("$no_deps")
  want="$(hash_of "${hashed[@]}")"
  if [[ -f "$bench/$id.unavailable" && "$(cat "$stamp" 2>/dev/null)" == "$want" ]]; then
    echo "bench: $id is unavailable here (recorded in $bench/$id.unavailable)"
    return
  fi
  if make_venv python3 "$venv" "$requirements" > "$bench/$id.install.log" 2>&1 &&
    { [[ ! -f "$no_deps" ]] || "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$no_deps" >> "$bench/$id.install.log" 2>&1; }; then
    rm -f "$bench/$id.unavailable"
    echo "bench: $id ready in $venv"
  else
    grep -E "ERROR:|error:|installation of|reachable" "$bench/$id.install.log" | sed "s/^ *//" | tail -n 6 > "$bench/$id.unavailable"
    echo "bench: $id cannot be installed here; see $bench/$id.install.log"
  fi
  echo "$want" > "$stamp"
}
attempt kserve venv-kserve bench/peers/kserve/requirements.txt
attempt mlserver venv-mlserver bench/peers/mlserver/requirements.txt
attempt dynamo venv-dynamo bench/peers/dynamo/requirements.txt
make_venv python3 "$cache/venv-bench" "$root/bench/requirements.txt"
