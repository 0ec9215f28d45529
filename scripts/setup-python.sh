#!/usr/bin/env bash
# Creates (or reuses) the Python venvs the tests use, outside the checkout under
# $DYNAMO_KSERVE_CACHE (default ~/.cache/dynamo-kserve); each is rebuilt only when its
# requirements file changes.
#   venv        the real tritonclient (conformance tests)       DYNAMO_KSERVE_VENV
#   venv-peers  real upstream servers: Triton via nvidia-pytriton  DYNAMO_KSERVE_PEERS_VENV
#               (and tritonserver laid out from it under $cache/tritonserver)
#   venv-llm    a real OpenAI-compatible server: LiteLLM proxy    DYNAMO_KSERVE_LLM_VENV
#   venv-clients  HTTP clients: the KServe SDK, the openai SDK    DYNAMO_KSERVE_CLIENTS_VENV
#   venv-aiperf   aiperf (its pins conflict with the KServe SDK's)  DYNAMO_KSERVE_AIPERF_VENV
#   venv-genai-perf  genai-perf (Triton's LLM benchmark)          DYNAMO_KSERVE_GENAI_PERF_VENV
#   venv-docs     MkDocs and its Material theme (the docs site)  DYNAMO_KSERVE_DOCS_VENV
#   venv-lint   ruff, mypy, shellcheck for `npm run lint`          DYNAMO_KSERVE_LINT_VENV
#   venv-storage  object stores: SeaweedFS, moto, fake-gcs-server   DYNAMO_KSERVE_STORAGE_VENV
# The peers venv uses Debian's python3: pytriton's Python-backend stub links the system
# libpython, so the interpreter's standard library must match it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${DYNAMO_KSERVE_CACHE:-$HOME/.cache/dynamo-kserve}"

# shellcheck source=lib/venv.sh
source "$root/scripts/lib/venv.sh"

make_venv python3 "${DYNAMO_KSERVE_VENV:-$cache/venv}" "$root/dataplane/test/conformance/requirements.txt"
if [[ ! -x /usr/bin/python3 ]] || ! /usr/bin/python3 -m venv --help >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq python3 python3-venv libpython3-dev
fi
make_venv /usr/bin/python3 "${DYNAMO_KSERVE_PEERS_VENV:-$cache/venv-peers}" "$root/dataplane/test/peers/requirements.txt"
# Triton itself, to run Python-backend model repositories (tests and bench).
bash "$root/scripts/layout-tritonserver.sh" "${DYNAMO_KSERVE_PEERS_VENV:-$cache/venv-peers}/bin/python" "$cache/tritonserver"
make_venv /usr/bin/python3 "${DYNAMO_KSERVE_LLM_VENV:-$cache/venv-llm}" "$root/dataplane/test/peers/llm-requirements.txt"
make_venv python3 "${DYNAMO_KSERVE_CLIENTS_VENV:-$cache/venv-clients}" "$root/dataplane/test/clients/requirements.txt"
make_venv python3 "${DYNAMO_KSERVE_AIPERF_VENV:-$cache/venv-aiperf}" "$root/dataplane/test/clients/aiperf-requirements.txt"
make_venv python3 "${DYNAMO_KSERVE_GENAI_PERF_VENV:-$cache/venv-genai-perf}" "$root/dataplane/test/clients/genai-perf-requirements.txt"
make_venv python3 "${DYNAMO_KSERVE_DOCS_VENV:-$cache/venv-docs}" "$root/docs/requirements.txt"
make_venv python3 "${DYNAMO_KSERVE_LINT_VENV:-$cache/venv-lint}" "$root/scripts/lint/requirements.txt"
make_venv python3 "${DYNAMO_KSERVE_STORAGE_VENV:-$cache/venv-storage}" "$root/lib/test/object-stores-requirements.txt"
