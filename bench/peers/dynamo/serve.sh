#!/usr/bin/env bash
# NVIDIA Dynamo's KServe gRPC frontend with the identity worker behind it, as one process
# group for the benchmark: serve.sh VENV GRPC_PORT HTTP_PORT DISCOVERY_DIR.
# File-based discovery in DISCOVERY_DIR, every Dynamo host on 127.0.0.1; the frontend's
# KServe gRPC service listens on GRPC_PORT (its --http-port), its HTTP side on HTTP_PORT.
set -euo pipefail
venv="$1" grpc_port="$2" http_port="$3"
export DYN_FILE_KV="$4"
export DYN_TCP_RPC_HOST=127.0.0.1 DYN_TCP_RESPONSE_STREAM_HOST=127.0.0.1 DYN_EVENT_PLANE_HOST=127.0.0.1
export DYN_SYSTEM_HOST=127.0.0.1 DYN_HTTP_HOST=127.0.0.1 DYN_LOG=warn
"$venv/bin/python" "$(dirname "$0")/identity_worker.py" &
exec "$venv/bin/python" -m dynamo.frontend --kserve-grpc-server --discovery-backend file \
  --http-port "$grpc_port" --grpc-metrics-port "$http_port"
