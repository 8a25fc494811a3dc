#!/usr/bin/env bash
# Sourced by the benchmark scripts after scripts/deps.sh: builds the release
# binary ($S), takes scripts/scratch.sh ($OUT, PIDS, `free_port`), and
# gives `step` (a progress line) and `cpu_ticks PID` (user + system clock
# ticks).
cargo build --release -q -p seckill
S=./target/release/seckill
. scripts/scratch.sh
step() { echo "== $*" >&2; }
TICK=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
