#!/usr/bin/env bash
# What each Redis durability setting costs a purchase: `seckill bench`
# (strategies atomic and coalesced, 50,000 buyers for 50,000 units, so each
# attempt writes) against a private redis-server started with no
# persistence, `appendfsync everysec` and `appendfsync always`, and with
# no persistence but a replica and `bench --durability replica` (each
# purchase acknowledged once the replica has it), three runs each, the
# median kept. Figures: purchases/s, p99, Redis time per
# purchase inside the commands (INFO commandstats) and redis-server CPU
# per purchase from /proc (which also holds writing the AOF). Writes the
# table between the durability-cost markers of docs/reliability.md. Needs
# redis-server; about a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
. scripts/run.sh
RUNS=${RUNS:-3}

# A private redis-server with settings "$@" on a free port; sets PORT.
server() {
  local name=$1
  shift
  PORT=$(free_port)
  mkdir -p "$OUT/$name"
  redis-server --port "$PORT" --save '' --dir "$OUT/$name" --logfile "$OUT/redis-$name.log" "$@" &
  PIDS+=($!)
  for _ in $(seq 50); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
}

# Runs the benchmarks of setting $1 against a server with settings "$@";
# DURABILITY=replica adds a replica and acknowledges through it.
run() {
  local name=$1 port first=${#PIDS[@]}
  server "$@"
  port=$PORT
  if [ "${DURABILITY:-primary}" = replica ]; then
    server "$name-replica" --replicaof 127.0.0.1 "$port"
    for _ in $(seq 100); do
      redis-cli -p "$PORT" info replication | grep -q 'master_link_status:up' && break
      sleep 0.1
    done
  fi
  for strategy in atomic coalesced; do
    for _ in $(seq "$RUNS"); do
      redis-cli -p "$port" flushall >/dev/null
      $S bench --redis-url "redis://127.0.0.1:$port/" --strategy "$strategy" \
        --durability "${DURABILITY:-primary}" --stock 50000 --buyers 50000 --json |
        python3 -c "import json,sys; d=json.loads(sys.stdin.readline()); d['setting']='$name'; print(json.dumps(d))"
    done
  done
  for pid in "${PIDS[@]:$first}"; do
    kill "$pid"
    wait "$pid" 2>/dev/null || true
  done
}

{
  run none --appendonly no
  run everysec --appendonly yes --appendfsync everysec
  run always --appendonly yes --appendfsync always
  DURABILITY=replica run replica --appendonly no
} >"$OUT/durability.jsonl"
python3 scripts/durability_doc.py "$OUT/durability.jsonl" docs/reliability.md
