#!/usr/bin/env bash
# Creates (or reuses) the Python venvs the tests use, outside the checkout under
# $DYNAMO_KSERVE_CACHE (default ~/.cache/dynamo-kserve); each is rebuilt only when its
# requirements file changes.
#   venv        the real tritonclient (conformance tests)       DYNAMO_KSERVE_VENV
#   venv-peers  real upstream servers: Triton via nvidia-pytriton  DYNAMO_KSERVE_PEERS_VENV
#   venv-llm    a real OpenAI-compatible server: LiteLLM proxy    DYNAMO_KSERVE_LLM_VENV
# The peers venv uses Debian's python3: pytriton's Python-backend stub links the system
# libpython, so the interpreter's standard library must match it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${DYNAMO_KSERVE_CACHE:-$HOME/.cache/dynamo-kserve}"

make_venv() { # python venv requirements
  local python="$1" venv="$2" requirements="$3"
  local stamp="$venv/.requirements.sha256" want
  want="$( (cat "$requirements"; "$python" --version) | sha256sum | cut -d' ' -f1)"
  if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "python: reusing $venv"
    return
  fi
  echo "python: creating $venv"
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  "$python" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
  echo "$want" > "$stamp"
}

make_venv python3 "${DYNAMO_KSERVE_VENV:-$cache/venv}" "$root/dataplane/test/conformance/requirements.txt"
if [[ ! -x /usr/bin/python3 ]] || ! /usr/bin/python3 -m venv --help >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq python3 python3-venv libpython3-dev
fi
make_venv /usr/bin/python3 "${DYNAMO_KSERVE_PEERS_VENV:-$cache/venv-peers}" "$root/dataplane/test/peers/requirements.txt"
make_venv /usr/bin/python3 "${DYNAMO_KSERVE_LLM_VENV:-$cache/venv-llm}" "$root/dataplane/test/peers/llm-requirements.txt"
