#!/usr/bin/env bash
# The whole test suite. Every test starts its own redis-server processes.
# PostgreSQL tests (later) run when DATABASE_URL or a local server is there.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
if cargo nextest --version >/dev/null 2>&1; then
  exec cargo nextest run --workspace --profile "${NEXTEST_PROFILE:-default}" "$@"
else
  echo "cargo-nextest not found; running cargo test" >&2
  exec cargo test --workspace "$@"
fi
