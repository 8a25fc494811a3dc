#!/usr/bin/env bash
# The main job end to end on a private redis-server the binary starts itself.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
cargo build --release -q -p seckill
exec ./target/release/seckill lock-bench --mode hot --clients 32 --duration 5 "$@"
