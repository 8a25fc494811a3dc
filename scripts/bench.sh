#!/usr/bin/env bash
# Regenerates docs/benchmarks.md: runs every benchmark the page shows, in
# one go, on this machine, and writes the page from their JSON output
# (scripts/bench_doc.py), then docs/scaling.md (scripts/scaling.sh) and the
# durability-cost table of docs/reliability.md (scripts/durability.sh). About
# twenty-five minutes. Needs redis-server, curl,
# python3, openssl; PostgreSQL on 127.0.0.1:5432, MariaDB/MySQL on 127.0.0.1:3306 and
# valgrind are used when present.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
. scripts/run.sh
command -v openssl >/dev/null || need_apt openssl

step "lock-bench"
for m in hot spread; do for w in counter empty; do
  $S lock-bench --mode $m --work $w --clients 32 --duration 10 --compare --json >>"$OUT/lock.jsonl"
done; done

step "lock-bench: the lock's siblings, beside their Node peers"
# redis-semaphore (mutex, semaphore) and rate-limiter-flexible, installed
# from npm into the scratch folder, run by scripts/peers/bench.mjs the way
# lock-bench runs ours; a server of their own, ours and theirs alternating.
command -v node >/dev/null && command -v npm >/dev/null || need_apt nodejs npm
PEERS="$OUT/peers"
mkdir -p "$PEERS"
cp scripts/peers/bench.mjs "$PEERS/"
(cd "$PEERS" && npm install --silent --no-audit --no-fund redis-semaphore rate-limiter-flexible ioredis >/dev/null)
PRPORT=$(free_port)
redis-server --port "$PRPORT" --save '' --appendonly no --daemonize no --logfile "$OUT/peers-redis.log" &
PRPID=$!
PIDS+=($PRPID)
for _ in $(seq 50); do redis-cli -p "$PRPORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
# The server's CPU time (user + system, /proc/PID/stat) around each run:
# Redis runs on one core, so its CPU per operation bounds what any client
# can reach, and noise barely moves it. And the client's (this shell's
# finished children, fields 16 and 17): the clients share the machine's
# cores with the server, so the two together bound it too.
with_cpu() { # WHO PRIMITIVE MODE CONNECTIONS COMMAND…: runs COMMAND, notes its and the server's CPU
  local who=$1 p=$2 m=$3 c=$4 before after client
  shift 4
  before=$(cpu_ticks "$PRPID")
  client=$(awk '{print $16 + $17}' /proc/$$/stat)
  "$@"
  after=$(cpu_ticks "$PRPID")
  client=$(($(awk '{print $16 + $17}' /proc/$$/stat) - client))
  awk -v w="$who" -v p="$p" -v m="$m" -v c="$c" -v t=$((after - before)) -v k="$client" -v hz="$TICK" -v n="$(nproc)" \
    'BEGIN { printf "{\"who\":\"%s\",\"primitive\":\"%s\",\"mode\":\"%s\",\"connections\":\"%s\",\"redis_cpu_s\":%.3f,\"client_cpu_s\":%.3f,\"cores\":%d}\n", w, p, m, c, t / hz, k / hz, n }' \
    >>"$OUT/siblings-cpu.jsonl"
}
# `own`: 32 clients with a connection each, as 32 processes would have;
# `shared`: 32 tasks of one process on one connection (ours: one `Locks`,
# the calls its tasks ask at once batched into one; theirs: one ioredis
# connection with auto-pipelining).
for c in own shared; do for m in hot spread; do for p in mutex semaphore rwlock ratelimit; do
  with_cpu ours $p $m $c $S lock-bench --redis-url "redis://127.0.0.1:$PRPORT/" --primitive $p --mode $m \
    --connections $c --work empty --clients 32 --duration 10 --rate 1000 --burst 1000 --json >>"$OUT/siblings.jsonl"
  if [ $p != rwlock ]; then
    with_cpu peer $p $m $c node "$PEERS/bench.mjs" --port "$PRPORT" --primitive $p --mode $m --clients 32 \
      --connections $c --duration 10 --rate 1000 --burst 1000 >>"$OUT/peers.jsonl"
  fi
done; done; done
# The floor under any client: the server's CPU for a round trip of the
# cheapest command sent as the runs above send theirs (32 connections,
# one request in flight on each). Its record's mode is the round trips.
FLOOR_N=300000
with_cpu floor ping $FLOOR_N own redis-benchmark -p "$PRPORT" -c 32 -P 1 -n $FLOOR_N -t ping_mbulk -q >/dev/null
# And of the cheapest function call, one that only returns 1: each of our
# operations' round trips is a function call.
redis-cli -p "$PRPORT" FUNCTION LOAD REPLACE "#!lua name=floor
redis.register_function('floor_one', function() return 1 end)" >/dev/null
with_cpu floor fcall $FLOOR_N own redis-benchmark -p "$PRPORT" -c 32 -P 1 -n $FLOOR_N -q fcall floor_one 0 >/dev/null

step "bench: all strategies"
mkdir -p docs/img
$S bench --strategy all --stock 1000 --buyers 10000 --concurrency 256 --per-user-limit 1 --compare --json \
  --plot docs/img/bench-strategies.svg >"$OUT/all.jsonl"

step "bench: production path"
for s in atomic coalesced; do
  $S bench --strategy $s --stock 300000 --buyers 300000 --concurrency 256 --compare --json >"$OUT/prod-$s.jsonl"
done

step "bench and lock-bench on a private Redis Cluster (3 masters + 3 replicas)"
for s in atomic coalesced; do
  $S bench --cluster --strategy $s --stock 300000 --buyers 300000 --concurrency 256 --compare --json >"$OUT/cluster-$s.jsonl"
done
for m in hot spread; do
  $S lock-bench --cluster --mode $m --work counter --clients 32 --duration 10 --compare --json >>"$OUT/cluster-lock.jsonl"
done

step "bench: persister"
for s in atomic coalesced; do
  rm -f /tmp/bench.db*
  $S bench --strategy $s --stock 200000 --buyers 200000 --persist-to /tmp/bench.db --json >"$OUT/persist-sqlite-$s.jsonl"
done
rm -f /tmp/bench.db*
PG=postgres://postgres@127.0.0.1:5432/seckill_bench
# A fresh database per run, as the SQLite file is: each run inserts into an
# empty table.
fresh_pg() {
  psql postgres://postgres@127.0.0.1:5432/postgres -q -c "DROP DATABASE IF EXISTS seckill_bench" \
    -c "CREATE DATABASE seckill_bench" >/dev/null 2>&1
}
for s in atomic coalesced; do
  if fresh_pg; then
    $S bench --strategy $s --stock 200000 --buyers 200000 --persist-to $PG --json >"$OUT/persist-postgres-$s.jsonl"
  fi
done
MY=mysql://root@127.0.0.1:3306/seckill_bench
fresh_mysql() {
  command -v mysql >/dev/null &&
    mysql -uroot -h127.0.0.1 -P3306 -e "DROP DATABASE IF EXISTS seckill_bench; CREATE DATABASE seckill_bench" >/dev/null 2>&1
}
for s in atomic coalesced; do
  if fresh_mysql; then
    $S bench --strategy $s --stock 200000 --buyers 200000 --persist-to $MY --json >"$OUT/persist-mysql-$s.jsonl"
  fi
done

if command -v valgrind >/dev/null; then
  step "instructions per purchase (callgrind)"
  bash scripts/lua-cost.sh >"$OUT/lua-cost.txt"
fi

step "HTTP: serve under load"
# A CA and a certificate for localhost: the same server also listens for
# TLS, for the rows over TLS.
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$OUT/ca.key" -out "$OUT/ca.pem" -days 2 \
  -subj "/CN=seckill bench CA" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout "$OUT/tls.key" -out "$OUT/tls.csr" \
  -subj "/CN=localhost" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$OUT/tls.ext"
openssl x509 -req -in "$OUT/tls.csr" -CA "$OUT/ca.pem" -CAkey "$OUT/ca.key" -CAcreateserial \
  -out "$OUT/tls.pem" -days 2 -extfile "$OUT/tls.ext" 2>/dev/null
RPORT=$(free_port)
TPORT=$(free_port)
redis-server --port "$RPORT" --tls-port "$TPORT" --tls-cert-file "$OUT/tls.pem" \
  --tls-key-file "$OUT/tls.key" --tls-ca-cert-file "$OUT/ca.pem" --tls-auth-clients no \
  --save '' --appendonly no --daemonize no --logfile "$OUT/redis.log" &
PIDS+=($!)
for _ in $(seq 50); do redis-cli -p "$RPORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
REDIS=redis://127.0.0.1:$RPORT/
TLS_REDIS="rediss://localhost:$TPORT/ --redis-ca-file $OUT/ca.pem"
# The lock's example, as the README shows it (its test runs the same code).
cargo run -q --release -p seckill-lock --example guarded_counter -- "$REDIS" | grep -qx 'counter = 200'
cargo run -q --release -p seckill-lock --example siblings -- "$REDIS" | grep -qx 'the writer alone'

# http NAME STOCK SERVE-FLAGS LOAD-FLAGS [REQUESTS [LIMIT]]: a fresh
# `serve`, a sale of STOCK units (LIMIT per user, 5 unless given), REQUESTS
# purchases (200,000 unless given) through `seckill load`; writes the
# load's JSON and the service's CPU µs per request.
http() {
  local name=$1 stock=$2 flags=$3 load_flags=$4 requests=${5:-200000} limit=${6:-5} web pid
  # The service's Redis: $SERVE_REDIS (URL and flags) if set, else $REDIS.
  local redis=${SERVE_REDIS:-$REDIS}
  # Nothing of the runs before: a persister would otherwise drain their
  # orders during this run's load.
  redis-cli -p "$RPORT" FLUSHALL >/dev/null
  web=$(free_port)
  # shellcheck disable=SC2086
  $S serve --listen 127.0.0.1:$web --redis-url $redis --database-url "$OUT/svc-$name.db" \
    --admin-token tok --rate-per-user "${RATE_PER_USER:-0}" --rate-per-ip 0 $flags >"$OUT/serve-$name.log" 2>&1 &
  pid=$!
  PIDS+=($pid)
  for _ in $(seq 100); do curl -sf http://127.0.0.1:$web/healthz >/dev/null && break; sleep 0.1; done
  curl -sf -XPOST -H 'Authorization: Bearer tok' -H 'content-type: application/json' \
    -d "{\"id\":\"$name\",\"name\":\"$name\",\"stock\":$stock,\"per_user_limit\":$limit}" \
    http://127.0.0.1:$web/v1/sales >/dev/null
  local before after
  before=$(cpu_ticks $pid)
  # shellcheck disable=SC2086
  $S load --url http://127.0.0.1:$web --sale "$name" --buyers "$requests" --concurrency 256 \
    $load_flags --redis-url $REDIS --json >"$OUT/http-$name.json"
  after=$(cpu_ticks $pid)
  awk -v a="$after" -v b="$before" -v t="$TICK" -v n="$requests" \
    'BEGIN { printf "%.2f\n", (a - b) * 1000000 / t / n }' >"$OUT/http-$name.cpu"
  kill -TERM $pid
  wait $pid || true
}
BODY="--buyer-auth body"
# Three alternating pairs: one pair's ratio moves with the machine.
for i in 1 2 3; do
  # The first row is also drawn, second by second.
  plot=""
  [ "$i" = 1 ] && plot="--plot docs/img/load.svg"
  http stock-$i 1000000 "$BODY" "$BODY --request-ids $plot"
  http nobg-$i 1000000 "$BODY --no-background" "$BODY --request-ids"
done
http soldout 1000 "$BODY" "$BODY"

step "over TLS: bench and HTTP, beside plain TCP"
# The same server, by its plain and its TLS port; three alternating pairs.
# tls_bench STRATEGY tcp|tls I: the bench's JSON, and its own CPU
# seconds (user + system, bash's `time`) in a .cpu file beside it.
tls_bench() {
  local target=$REDIS
  [ "$2" = tls ] && target=$TLS_REDIS
  local TIMEFORMAT='%U %S'
  # shellcheck disable=SC2086
  { time $S bench --strategy "$1" --stock 300000 --buyers 300000 --concurrency 256 \
      --redis-url $target --json >"$OUT/tls-bench-$1-$2-$3.json"; } 2>"$OUT/tls-bench-$1-$2-$3.cpu"
}
for i in 1 2 3; do
  for s in atomic coalesced; do
    tls_bench $s tcp $i
    tls_bench $s tls $i
  done
  http tcp-$i 1000000 "$BODY" "$BODY --request-ids"
  SERVE_REDIS="$TLS_REDIS" http tls-$i 1000000 "$BODY" "$BODY --request-ids"
done

step "HTTP: the per-user rate, counted in each instance or shared in Redis"
# 2,000 buyers sending 100 purchases each, under a rate far above what
# they send (1,000/s, burst 1,000): what counting costs, not refusals. The
# two alternate, three rounds.
for i in 1 2 3; do
  for scope in local shared; do
    RATE_PER_USER=1000 http rate-$scope-$i 1000000 "$BODY --burst-per-user 1000 --rate-limit $scope" \
      "$BODY --users 2000 --request-ids" 200000 100
  done
done

step "HTTP: what verifying buyers costs (--buyer-auth body, jwt HS256, jwt RS256)"
head -c 48 /dev/urandom | base64 >"$OUT/jwt.secret"
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$OUT/rsa.key" 2>/dev/null
openssl pkey -in "$OUT/rsa.key" -pubout -out "$OUT/rsa.pub"
HS_SERVE="--buyer-auth jwt --jwt-secret-file $OUT/jwt.secret"
HS_LOAD="--jwt-secret-file $OUT/jwt.secret"
RS_SERVE="--buyer-auth jwt --jwt-public-key-file $OUT/rsa.pub"
RS_LOAD="--jwt-private-key-file $OUT/rsa.key"
# 2,000 buyers repeating their tokens (100 purchases each, all sold), the
# three modes alternating, three rounds.
for i in 1 2 3; do
  http auth-body-$i 1000000 "$BODY" "$BODY --users 2000 --request-ids" 200000 100
  http auth-hs256-$i 1000000 "$HS_SERVE" "$HS_LOAD --users 2000 --request-ids" 200000 100
  http auth-rs256-$i 1000000 "$RS_SERVE" "$RS_LOAD --users 2000 --request-ids" 200000 100
done
# First sight: 20,000 requests, each a buyer of its own, so every token is
# verified; no persister, so the service idles at nothing while `load`
# signs the tokens before its clock starts.
for m in body hs256 rs256; do
  case $m in
    body) sf="$BODY" lf="$BODY" ;;
    hs256) sf="$HS_SERVE" lf="$HS_LOAD" ;;
    rs256) sf="$RS_SERVE" lf="$RS_LOAD" ;;
  esac
  http auth-$m-fresh 1000000 "$sf --no-background" "$lf --users 20000 --request-ids" 20000 100
done

step "many sales: idle ones, and purchases spread over 100 to 10,000"
bash scripts/idle.sh >"$OUT/idle.jsonl"
bash scripts/spread.sh >"$OUT/spread.jsonl"

step "writing docs/benchmarks.md"
python3 scripts/bench_doc.py "$OUT" "$(date -u +%Y-%m-%d)" >docs/benchmarks.md
echo "docs/benchmarks.md regenerated" >&2

step "one sale over many masters: docs/scaling.md"
MANY_SALES_FROM="$OUT" bash scripts/scaling.sh

step "what Redis durability settings cost a purchase: docs/reliability.md"
bash scripts/durability.sh
