# shellcheck shell=bash
# make_venv PYTHON VENV REQUIREMENTS: creates (or reuses) a venv with REQUIREMENTS installed;
# it is rebuilt only when the requirements file or the interpreter's version changes.
# Sourced by scripts/setup-python.sh and bench/setup.sh; require_venv by the scripts that use one.

# venv_stamp PYTHON REQUIREMENTS: what a venv made from REQUIREMENTS with PYTHON is stamped with.
venv_stamp() {
  (cat "$2"; "$1" --version) | sha256sum | cut -d' ' -f1
}

# require_venv WHO VENV REQUIREMENTS: exits 1, saying what to run, unless VENV is as
# scripts/setup-python.sh leaves it: present, and made from REQUIREMENTS as they are now (so
# that every checkout runs the pinned versions).
require_venv() {
  local who="$1" venv="$2" requirements="$3"
  if [[ ! -x "$venv/bin/python" ]]; then
    echo "$who: $venv is missing; run bash scripts/setup-python.sh" >&2
    exit 1
  fi
  if [[ "$(cat "$venv/.requirements.sha256" 2>/dev/null)" != "$(venv_stamp "$venv/bin/python" "$requirements")" ]]; then
    echo "$who: $venv was made from other requirements than $requirements; run bash scripts/setup-python.sh" >&2
    exit 1
  fi
}

make_venv() { # python venv requirements
  local python="$1" venv="$2" requirements="$3"
  local stamp="$venv/.requirements.sha256" want
  want="$(venv_stamp "$python" "$requirements")"
  if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "python: reusing $venv"
    return
  fi
  echo "python: creating $venv"
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  # Explicit failures: callers may test the result, which turns `set -e` off in here.
  "$python" -m venv "$venv" || return 1
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements" || {
    rm -rf "$venv"
    return 1
  }
  echo "$want" > "$stamp"
}
