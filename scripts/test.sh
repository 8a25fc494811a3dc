#!/usr/bin/env bash
# The whole test suite. Every test starts its own redis-server processes;
# PostgreSQL tests run when DATABASE_URL or a local server is there.
# Runs under cargo-nextest when installed (each test in its own process),
# else under `cargo test` (tests of a file share a process and run on
# several threads); SECKILL_TEST_RUNNER=cargo forces the latter. The suite
# must pass both ways. Then, unless arguments pick tests or
# SECKILL_API_FUZZ=0, scripts/api_fuzz.sh holds a live `serve` to its
# OpenAPI document with schemathesis.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
if [ "${SECKILL_TEST_RUNNER:-}" != cargo ] && cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --profile "${NEXTEST_PROFILE:-default}" "$@"
else
  [ "${SECKILL_TEST_RUNNER:-}" = cargo ] || echo "cargo-nextest not found; running cargo test" >&2
  cargo test --workspace "$@"
fi
if [ $# -eq 0 ] && [ "${SECKILL_API_FUZZ:-1}" != 0 ]; then
  bash scripts/api_fuzz.sh
fi
