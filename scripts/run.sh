#!/usr/bin/env bash
# Sourced by the benchmark scripts after scripts/deps.sh: builds the release
# binary ($S), makes a scratch folder ($OUT) that is removed on exit with
# every background process listed in PIDS, and gives `step` (a progress
# line), `free_port` and `cpu_ticks PID` (user + system clock ticks).
cargo build --release -q -p seckill
S=./target/release/seckill
OUT=$(mktemp -d)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  # Until they are gone: a server still writing its log keeps the folder.
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$OUT"
}
trap cleanup EXIT
step() { echo "== $*" >&2; }
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
TICK=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
