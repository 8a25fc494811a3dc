#!/usr/bin/env bash
# Regenerates docs/scaling.md: measures what one sharded sale costs (Redis
# per purchase, unsharded next to sharded in the same run; each master's
# share on a private cluster; skewed demand; the service's CPU per purchase;
# the persister's CPU per order and SQL rows/s) and writes the capacity
# model from those figures (scripts/scaling_doc.py). About five minutes.
# Needs redis-server, curl, python3; PostgreSQL on 127.0.0.1:5432 is used
# when present. scripts/bench.sh runs it too.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
. scripts/run.sh

step "one server: unsharded and 4 shards, alternating"
for i in 1 2 3; do for s in atomic coalesced; do for n in 1 4; do
  $S bench --strategy $s --stock 300000 --buyers 300000 --concurrency 256 --shards $n --json >>"$OUT/one-$s-$n.jsonl"
done; done; done

step "cluster (3 masters + 3 replicas): unsharded and 3 shards, alternating"
for i in 1 2; do for s in atomic coalesced; do for n in 1 3; do
  $S bench --cluster --strategy $s --stock 300000 --buyers 300000 --concurrency 256 --shards $n --json >>"$OUT/cluster-$s-$n.jsonl"
done; done; done
# The same load per shard as the unsharded run's: 3 × 256 buyers at once.
$S bench --cluster --strategy coalesced --stock 300000 --buyers 300000 --concurrency 768 --shards 3 --json >"$OUT/cluster-coalesced-3-c768.jsonl"

step "skewed demand on a cluster"
$S bench --cluster --strategy atomic --shards 6 --skew --stock 20000 --buyers 80000 --per-user-limit 1 --json >"$OUT/skew.jsonl"

step "many sales: idle ones, and purchases spread over 100 to 10,000"
# bench.sh has measured them already when it runs this.
if [ -n "${MANY_SALES_FROM:-}" ]; then
  cp "$MANY_SALES_FROM/idle.jsonl" "$MANY_SALES_FROM/spread.jsonl" "$OUT/"
else
  bash scripts/idle.sh >"$OUT/idle.jsonl"
  bash scripts/spread.sh >"$OUT/spread.jsonl"
fi

step "persister per order"
$S bench --strategy coalesced --stock 200000 --buyers 200000 --shards 4 --persist-to "$OUT/p.db" --json >"$OUT/persist-sqlite.jsonl"
PG=postgres://postgres@127.0.0.1:5432/seckill_scaling
if psql postgres://postgres@127.0.0.1:5432/postgres -q -c "DROP DATABASE IF EXISTS seckill_scaling" \
  -c "CREATE DATABASE seckill_scaling" >/dev/null 2>&1; then
  $S bench --strategy coalesced --stock 200000 --buyers 200000 --shards 4 --persist-to $PG --json >"$OUT/persist-postgres.jsonl"
fi

step "service CPU per purchase of a sharded sale"
RPORT=$(free_port)
redis-server --port "$RPORT" --save '' --appendonly no --daemonize no --logfile "$OUT/redis.log" &
PIDS+=($!)
for _ in $(seq 50); do redis-cli -p "$RPORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
REDIS=redis://127.0.0.1:$RPORT/
WEB=$(free_port)
$S serve --listen 127.0.0.1:$WEB --redis-url $REDIS --database-url "$OUT/svc.db" \
  --admin-token tok --buyer-auth body --rate-per-user 0 --rate-per-ip 0 >"$OUT/serve.log" 2>&1 &
SERVE=$!
PIDS+=($SERVE)
for _ in $(seq 100); do curl -sf http://127.0.0.1:$WEB/healthz >/dev/null && break; sleep 0.1; done
curl -sf -XPOST -H 'Authorization: Bearer tok' -H 'content-type: application/json' \
  -d '{"id":"hot","name":"hot","stock":1000000,"per_user_limit":5,"shards":4}' \
  http://127.0.0.1:$WEB/v1/sales >/dev/null
before=$(cpu_ticks $SERVE)
$S load --url http://127.0.0.1:$WEB --sale hot --buyers 200000 --concurrency 256 --request-ids --buyer-auth body \
  --redis-url $REDIS --json >"$OUT/http.json"
after=$(cpu_ticks $SERVE)
echo $(( (after - before) * 1000000 / TICK / 200000 )) >"$OUT/http.cpu"

step "writing docs/scaling.md"
python3 scripts/scaling_doc.py "$OUT" "$(date -u +%Y-%m-%d)" >docs/scaling.md
echo "docs/scaling.md regenerated" >&2
