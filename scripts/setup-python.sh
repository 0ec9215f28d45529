#!/usr/bin/env bash
# Creates (or reuses) the Python venv with the real tritonclient used by the conformance
# tests. It lives outside the checkout, under $DYNAMO_KSERVE_CACHE (default
# ~/.cache/dynamo-kserve), and is rebuilt only when requirements.txt changes.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${DYNAMO_KSERVE_CACHE:-$HOME/.cache/dynamo-kserve}"
venv="${DYNAMO_KSERVE_VENV:-$cache/venv}"
requirements="$root/dataplane/test/conformance/requirements.txt"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$requirements" | cut -d' ' -f1)"
if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  echo "python: reusing $venv"
  exit 0
fi
echo "python: creating $venv"
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
echo "$want" > "$stamp"
