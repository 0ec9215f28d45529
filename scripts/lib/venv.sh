# shellcheck shell=bash
# make_venv PYTHON VENV REQUIREMENTS: creates (or reuses) a venv with REQUIREMENTS installed;
# it is rebuilt only when the requirements file or the interpreter's version changes.
# Sourced by scripts/setup-python.sh and bench/setup.sh.
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
  # Explicit failures: callers may test the result, which turns `set -e` off in here.
  "$python" -m venv "$venv" || return 1
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements" || {
    rm -rf "$venv"
    return 1
  }
  echo "$want" > "$stamp"
}
