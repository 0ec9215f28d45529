#!/usr/bin/env bash
# Builds the docs site (mkdocs.yml, docs/) strictly into dist/site/: a broken link, anchor or
# snippet, or a page left out of the navigation, fails. `npm run docs:build` (and so `npm test`)
# runs this; `npm run docs:serve` runs `mkdocs serve` the same way. MkDocs comes from the venv
# scripts/setup-python.sh makes (venv-docs, pinned in docs/requirements.txt).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${DYNAMO_KSERVE_CACHE:-$HOME/.cache/dynamo-kserve}"
venv="${DYNAMO_KSERVE_DOCS_VENV:-$cache/venv-docs}"
command="${1:-build}"

# shellcheck source=scripts/lib/venv.sh
source "$root/scripts/lib/venv.sh"
require_venv docs "$venv" "$root/docs/requirements.txt"
cd "$root"
# Material prints a banner about its successor on every build unless told not to.
export NO_MKDOCS_2_WARNING=1
case "$command" in
  build) exec "$venv/bin/mkdocs" build --strict ;;
  serve) exec "$venv/bin/mkdocs" serve --strict ;;
  *)
    echo "usage: $0 [build|serve]" >&2
    exit 2
    ;;
esac
