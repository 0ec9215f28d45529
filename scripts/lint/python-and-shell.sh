#!/usr/bin/env bash
# The Python and shell part of `npm run lint`: ruff (lint and format check) and mypy on the
# repository's Python, shellcheck on its shell scripts. Settings: pyproject.toml and
# .shellcheckrc at the root. The tools come from venv-lint, which scripts/setup-python.sh
# makes from scripts/lint/requirements.txt (pinned versions).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cache="${DYNAMO_KSERVE_CACHE:-$HOME/.cache/dynamo-kserve}"
venv="${DYNAMO_KSERVE_LINT_VENV:-$cache/venv-lint}"
# shellcheck source=scripts/lib/venv.sh
source "$root/scripts/lib/venv.sh"
require_venv "lint (Python and shell)" "$venv" "$root/scripts/lint/requirements.txt"

cd "$root"
# The repository's files, and new ones not ignored yet.
files() { git ls-files --cached --others --exclude-standard "$@"; }

status=0
step() { # name command...: runs a linter, and goes on to the next one whatever it says
  echo "lint: $1"
  "${@:2}" || status=1
}

step "ruff check" "$venv/bin/ruff" check --quiet .
step "ruff format --check" "$venv/bin/ruff" format --check --quiet .

# Every model.py is a module named `model` (as Triton loads it): mypy takes one per run.
mapfile -t models < <(files '*/model.py')
mapfile -t modules < <(files '*.py' | grep -v '/model\.py$')
step "mypy" "$venv/bin/mypy" --no-error-summary "${modules[@]}"
for model in "${models[@]}"; do
  step "mypy $model" "$venv/bin/mypy" --no-error-summary "$model"
done

# Every shell script, and CI's entry point (no .sh suffix).
mapfile -t scripts < <(files '*.sh' .ci/run)
step "shellcheck" "$venv/bin/shellcheck" "${scripts[@]}"

if ((status != 0)); then
  echo "lint: Python or shell findings above (ruff format . fixes the formatting)" >&2
fi
exit "$status"
