#!/usr/bin/env bash
# The whole test suite. Every test starts its own redis-server processes;
# PostgreSQL tests run when DATABASE_URL or a local server is there.
# Runs under cargo-nextest when installed (each test in its own process),
# else under `cargo test` (tests of a file share a process and run on
# several threads); SECKILL_TEST_RUNNER=cargo forces the latter. The suite
# must pass both ways.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
if [ "${SECKILL_TEST_RUNNER:-}" != cargo ] && cargo nextest --version >/dev/null 2>&1; then
  exec cargo nextest run --workspace --profile "${NEXTEST_PROFILE:-default}" "$@"
else
  [ "${SECKILL_TEST_RUNNER:-}" = cargo ] || echo "cargo-nextest not found; running cargo test" >&2
  exec cargo test --workspace "$@"
fi
