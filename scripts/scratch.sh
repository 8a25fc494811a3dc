#!/usr/bin/env bash
# Sourced by scripts that start servers: a scratch folder ($OUT) removed on
# exit with every background process listed in PIDS, and `free_port`.
OUT=$(mktemp -d)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  # Until they are gone: a server still writing its log keeps the folder.
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$OUT"
}
trap cleanup EXIT
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
