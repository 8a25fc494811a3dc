#!/usr/bin/env bash
# What live idle sales cost: `seckill serve` (persister, sweeper and
# archiver in-process) on a private Redis, 0, 200, 2,000 and 10,000 sales
# made and nothing bought; once the service has learned of them, Redis's
# and serve's CPU (from /proc, % of one core, summed over masters and over
# instances) and Redis commands per second over 10 s, and Redis's memory
# then. Three setups: one server and one serve; one server and three
# serves; a 3-master cluster and one serve (`bash scripts/idle.sh
# cluster`: that one alone). One JSON line per setup and count. Needs
# redis-server, redis-cli, curl and python3; about six minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
. scripts/run.sh
MEASURED=10

# server: one redis-server; sets REDIS_FLAGS, RPIDS and RPORTS.
server() {
  local port
  port=$(free_port)
  redis-server --port "$port" --save '' --appendonly no --logfile "$OUT/redis-$port.log" &
  PIDS+=($!)
  RPIDS=($!)
  RPORTS=("$port")
  for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  REDIS_FLAGS="--redis-url redis://127.0.0.1:$port/"
}

# cluster: three masters, no replicas; sets REDIS_FLAGS, RPIDS and RPORTS.
cluster() {
  local port nodes=() dir
  RPIDS=() RPORTS=()
  while [ ${#RPORTS[@]} -lt 3 ]; do
    port=$(free_port)
    # The cluster bus listens on port + 10000: it must be free too.
    python3 -c "import socket,sys; s=socket.socket(); s.bind(('127.0.0.1', $port + 10000))" 2>/dev/null || continue
    dir="$OUT/node-$port"
    mkdir -p "$dir"
    redis-server --port "$port" --cluster-enabled yes --cluster-config-file "$dir/nodes.conf" \
      --dir "$dir" --save '' --appendonly no --logfile "$dir/log" &
    PIDS+=($!)
    RPIDS+=($!)
    RPORTS+=("$port")
    nodes+=("127.0.0.1:$port")
  done
  for port in "${RPORTS[@]}"; do
    for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  done
  redis-cli --cluster create "${nodes[@]}" --cluster-yes >/dev/null
  for _ in $(seq 100); do
    [ "$(redis-cli -p "${RPORTS[0]}" cluster info | tr -d '\r' | awk -F: '/^cluster_state:/ {print $2}')" = ok ] && break
    sleep 0.1
  done
  REDIS_FLAGS="--redis-cluster $(IFS=,; echo "${nodes[*]}")"
}

# serves N: N instances of serve on the Redis; sets WEBS and SPIDS.
serves() {
  WEBS=() SPIDS=()
  for i in $(seq "$1"); do
    local web
    web=$(free_port)
    # shellcheck disable=SC2086
    $S serve --listen 127.0.0.1:$web $REDIS_FLAGS --database-url "$OUT/idle-${RPORTS[0]}.db" \
      --admin-token tok --buyer-auth body >"$OUT/serve-$web.log" 2>&1 &
    PIDS+=($!)
    SPIDS+=($!)
    WEBS+=("$web")
  done
  for web in "${WEBS[@]}"; do
    for _ in $(seq 100); do curl -sf http://127.0.0.1:$web/healthz >/dev/null && break; sleep 0.1; done
  done
}

# make FROM TO: sales idle-FROM … idle-(TO-1), over one kept-alive connection.
make() {
  python3 - "${WEBS[0]}" "$1" "$2" <<'PY'
import http.client, json, sys
port, first, last = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
c = http.client.HTTPConnection("127.0.0.1", int(port))
for i in range(first, last):
    body = json.dumps({"id": f"idle-{i}", "name": f"idle {i}", "stock": 100, "per_user_limit": 1})
    c.request("POST", "/v1/sales", body, {"Authorization": "Bearer tok", "Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    if r.status != 201:
        sys.exit(f"creating idle-{i}: HTTP {r.status} {r.read()}")
PY
}

ticks() {
  local sum=0 pid
  for pid in "$@"; do sum=$((sum + $(cpu_ticks "$pid"))); done
  echo "$sum"
}
# info_sum SECTION FIELD: FIELD of INFO SECTION, summed over the masters.
info_sum() {
  local sum=0 port
  for port in "${RPORTS[@]}"; do
    sum=$((sum + $(redis-cli -p "$port" INFO "$1" | tr -d '\r' | awk -F: -v f="$2" '$1 == f {print $2}')))
  done
  echo "$sum"
}
commands() { info_sum stats total_commands_processed; }

# alone SETUP: Redis's own cost before any serve (a cluster's nodes talk
# to each other on their bus even when no client does).
alone() {
  local r0 c0 r1 c1
  sleep 2
  r0=$(ticks "${RPIDS[@]}") c0=$(commands)
  sleep "$MEASURED"
  r1=$(ticks "${RPIDS[@]}") c1=$(commands)
  awk -v setup="$1" -v t="$TICK" -v s="$MEASURED" -v r="$((r1 - r0))" -v c="$((c1 - c0))" 'BEGIN {
    printf "{\"setup\": \"%s\", \"sales\": null, \"redis_cpu_pct\": %.2f, \"serve_cpu_pct\": 0, \"commands_per_s\": %.0f}\n",
      setup, r * 100 / t / s, c / s }'
}

# measure SETUP: the four counts on the Redis and serves started; with
# each, Redis's memory (`used_memory`, summed over masters).
measure() {
  local made=0 n r0 s0 c0 r1 s1 c1 m
  for n in 0 200 2000 10000; do
    make "$made" "$n"
    # Long enough for every instance to learn of the new sales and read
    # each once (its start-up work, not what an idle sale costs), its
    # archiver's 10 s pass included.
    sleep $((12 + (n - made) / 1000))
    made=$n
    r0=$(ticks "${RPIDS[@]}") s0=$(ticks "${SPIDS[@]}") c0=$(commands)
    sleep "$MEASURED"
    r1=$(ticks "${RPIDS[@]}") s1=$(ticks "${SPIDS[@]}") c1=$(commands) m=$(info_sum memory used_memory)
    awk -v setup="$1" -v n="$n" -v t="$TICK" -v s="$MEASURED" -v r="$((r1 - r0))" \
      -v v="$((s1 - s0))" -v c="$((c1 - c0))" -v m="$m" 'BEGIN {
        printf "{\"setup\": \"%s\", \"sales\": %d, \"redis_cpu_pct\": %.2f, \"serve_cpu_pct\": %.2f, \"commands_per_s\": %.0f, \"redis_memory_bytes\": %d}\n",
          setup, n, r * 100 / t / s, v * 100 / t / s, c / s, m }'
  done
  for pid in "${SPIDS[@]}" "${RPIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${SPIDS[@]}" "${RPIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
}

# Every setup, or those named: server, serves, cluster.
for setup in "${@:-server serves cluster}"; do
  for one in $setup; do
    case $one in
    server) server && alone "one server" && serves 1 && measure "one server, one serve" ;;
    serves) server && serves 3 && measure "one server, three serves" ;;
    cluster) cluster && alone "3-master cluster" && serves 1 && measure "3-master cluster, one serve" ;;
    *) echo "unknown setup $one (server, serves, cluster)" >&2 && exit 2 ;;
    esac
  done
done
