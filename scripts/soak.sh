#!/usr/bin/env bash
# Soak: `seckill load` at full speed for SECONDS (default 60) against a
# 1,000,000-unit sale with a 5 s payment timeout (expiry keeps returning
# stock), with the persister and sweeper running. Prints the service's RSS
# at start and end, the load report, and the audit. Exits non-zero if the
# load or the audit finds a problem.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
seconds=${1:-60}
cargo build --release -q -p seckill
bin=./target/release/seckill
work=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --save "" --appendonly no --dir "$work" --daemonize yes --logfile "$work/redis.log"
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; kill "$serve" 2>/dev/null || true; rm -rf "$work"' EXIT
SECKILL_ADMIN_TOKEN=soak "$bin" serve --listen 127.0.0.1:0 --redis-url "redis://127.0.0.1:$port/" \
  --database-url "$work/orders.db" --buyer-auth body --rate-per-user 0 --rate-per-ip 0 > "$work/serve.out" 2>&1 &
serve=$!
for _ in $(seq 100); do grep -q listening "$work/serve.out" && break; sleep 0.1; done
base=$(sed -n 's/^listening on //p' "$work/serve.out")
curl -fsS -XPOST -H 'Authorization: Bearer soak' -H 'content-type: application/json' \
  -d '{"id":"soak","name":"Soak","stock":1000000,"per_user_limit":5,"payment_timeout_secs":5}' \
  "$base/v1/sales" > /dev/null
rss() { ps -o rss= -p "$serve" | tr -d ' '; }
echo "service RSS at start: $(rss) KiB"
( for t in $(seq 10 10 "$seconds"); do sleep 10; echo "service RSS after ${t}s: $(rss) KiB"; done ) &
sampler=$!
"$bin" load --url "$base" --sale soak --buyers 100000000 --max-seconds "$seconds" --concurrency 128 --buyer-auth body --json \
  | tee "$work/load.json"
wait "$sampler" 2>/dev/null || true
echo "service RSS at end:   $(rss) KiB"
sleep 2
kill -TERM "$serve"; wait "$serve" || true
"$bin" audit --sale soak --redis-url "redis://127.0.0.1:$port/" --database-url "$work/orders.db"
