#!/usr/bin/env bash
# The main job, end to end: `seckill demo` starts its own redis-server and
# SQLite file, serves the HTTP API, and runs a whole flash sale through it.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
# Not -q: a first build takes minutes, and its progress shows it is working.
cargo build --release -p seckill
exec ./target/release/seckill demo "$@"
