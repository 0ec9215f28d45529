#!/usr/bin/env bash
# Lays out Triton's server from nvidia-pytriton (in the venv-peers venv) to run a plain model
# repository, as pytriton lays it out before it starts it: the Python-backend stub of the
# venv's interpreter version, the bundled libraries on the path (written to libs-path).
# Used by the tests (Python-backend models run by Triton beside our python engine) and the
# bench. Usage: layout-tritonserver.sh VENV_PYTHON TARGET_DIR
set -euo pipefail
peers_python="$1" target="$2"
[[ -x "$target/bin/tritonserver" && -f "$target/libs-path" ]] && exit 0
pytriton="$("$peers_python" -c 'import os, pytriton; print(os.path.dirname(pytriton.__file__))')"
echo "laying out tritonserver from $pytriton in $target"
rm -rf "$target"
cp -r "$pytriton/tritonserver" "$target"
rm -rf "$target/python_backend_stubs"
version="$("$peers_python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
cp "$pytriton/tritonserver/python_backend_stubs/$version/triton_python_backend_stub" "$target/backends/python/"
echo "$(dirname "$pytriton")/nvidia_pytriton.libs" > "$target/libs-path"
