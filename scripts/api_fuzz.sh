#!/usr/bin/env bash
# Holds `serve` to its OpenAPI document: starts a private redis-server and
# `seckill serve` (JWT buyers, a payment token, SQLite), creates a sale, and
# runs schemathesis (pinned, in .venv-api; one worker, as CPython 3.11's
# parser is not safe for hypothesis's threads) against GET /openapi.json with
# every check on, its stateful phase following the document's links from a
# created sale to purchases and from a purchase to reading, paying and
# cancelling the order. A fixed seed and a bounded number of examples; any
# failure fails the script. Then generates a Python client from the same
# document, as README shows. Run by scripts/test.sh. SECKILL_FUZZ_EXAMPLES
# sets the examples per operation (30).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
SCHEMATHESIS=4.32.5
CLIENT_GENERATOR=0.28.3
VENV=${SECKILL_API_VENV:-.venv-api}
case $VENV in /*) ;; *) VENV=$PWD/$VENV ;; esac
if ! "$VENV/bin/schemathesis" --version 2>/dev/null | grep -q "$SCHEMATHESIS" ||
  ! "$VENV/bin/openapi-python-client" --version 2>/dev/null | grep -q "$CLIENT_GENERATOR"; then
  python3 -m venv "$VENV" 2>/dev/null || { need_apt python3-venv && python3 -m venv "$VENV"; }
  "$VENV/bin/pip" install -q "schemathesis==$SCHEMATHESIS" "openapi-python-client==$CLIENT_GENERATOR"
fi
cargo build -q -p seckill
S=./target/debug/seckill
. scripts/scratch.sh
REDIS_PORT=$(free_port)
# An append-only file, as the README asks of a Redis that must not lose
# orders: serve warns without one, and any warning fails this run.
redis-server --port "$REDIS_PORT" --save '' --appendonly yes --appendfsync everysec --dir "$OUT" >"$OUT/redis.log" 2>&1 &
PIDS+=($!)
WEB=$(free_port)
export SECKILL_FUZZ_ADMIN=fuzz-admin-token-0123456789
export SECKILL_FUZZ_PAYMENTS=fuzz-payments-token-0123456789
printf %s "$SECKILL_FUZZ_ADMIN" >"$OUT/admin"
printf %s "$SECKILL_FUZZ_PAYMENTS" >"$OUT/payments"
printf %s fuzz-jwt-secret-of-32-bytes-or-more >"$OUT/jwt"
# A buyer's HS256 token, good for a day.
export SECKILL_FUZZ_BUYER=$(python3 - "$OUT/jwt" <<'PY'
import base64, hashlib, hmac, json, sys, time
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
body = b64(json.dumps({"sub": "fuzz-buyer", "exp": int(time.time()) + 86400}).encode())
key = open(sys.argv[1], "rb").read()
sig = b64(hmac.new(key, f"{head}.{body}".encode(), hashlib.sha256).digest())
print(f"{head}.{body}.{sig}")
PY
)
$S serve --listen "127.0.0.1:$WEB" --redis-url "redis://127.0.0.1:$REDIS_PORT" \
  --database-url "sqlite://$OUT/orders.db" --admin-token-file "$OUT/admin" \
  --payments-token-file "$OUT/payments" --buyer-auth jwt --jwt-secret-file "$OUT/jwt" \
  --rate-per-user 0 --rate-per-ip 0 >"$OUT/serve.log" 2>&1 &
PIDS+=($!)
URL=http://127.0.0.1:$WEB
for _ in $(seq 100); do curl -sf "$URL/readyz" >/dev/null && break; sleep 0.1; done
curl -sf -H "Authorization: Bearer $SECKILL_FUZZ_ADMIN" -H 'content-type: application/json' \
  -d '{"id": "fuzz", "name": "Fuzz", "stock": 1000, "per_user_limit": 1000}' "$URL/v1/sales" >/dev/null
REPORTS=$OUT/report
fuzz() { # SEED [ARGS...]
  local seed=$1
  shift
  "$VENV/bin/schemathesis" --config-file scripts/schemathesis.toml run "$URL/openapi.json" \
    --seed "$seed" --max-examples "${SECKILL_FUZZ_EXAMPLES:-30}" --checks all --request-timeout 5 \
    --report ndjson --report-dir "$REPORTS/$seed" "$@"
}
# The stateful phase must have walked the links as far as paying and
# cancelling an order it bought, not only have tried: each walk is short
# and random, so up to six more stateful runs (seconds each), each with the
# next fixed seed, go on until one of them has (their checks count too).
reached() {
  python3 - "$REPORTS" <<'PY'
import glob, json, sys
reached = set()
for path in glob.glob(f"{sys.argv[1]}/*/*.ndjson"):
    for line in open(path):
        event = json.loads(line).get("ScenarioFinished")
        if not event or event["phase"] != "stateful":
            continue
        recorder = event["recorder"]
        for case_id, case in recorder["cases"].items():
            answer = recorder["interactions"].get(case_id, {}).get("response") or {}
            if 200 <= answer.get("status_code", 0) < 300:
                reached.add((case["value"]["method"], case["value"]["path"]))
want = {("POST", "/v1/sales/{id}/purchase"), ("GET", "/v1/orders/{order_id}"),
        ("POST", "/v1/orders/{order_id}/pay"), ("POST", "/v1/orders/{order_id}/cancel")}
missing = sorted(want - reached)
if missing:
    sys.exit(f"the stateful phase has not yet succeeded at: {missing}")
print("stateful phase reached:", ", ".join(f"{m} {p}" for m, p in sorted(want)))
PY
}
SEED=20261124
status=0
fuzz $SEED || status=$?
for more in 1 2 3 4 5 6 7; do
  reached && break
  [ "$more" = 7 ] && { status=1; break; }
  fuzz $((SEED + more)) --phases stateful || status=$?
done
# A server-side failure the checks could pass (a 503 the document lists)
# is still a bug here: Redis and SQLite are up. The persister's own
# retried reads are left out: with the thousands of shard streams the
# fuzzer's sales make, a read can time out and is retried, losing nothing.
if grep -E 'ERROR|WARN' "$OUT/serve.log" | grep -v 'seckill_orders::persister' >"$OUT/problems"; then
  echo "serve logged problems while fuzzed:" >&2
  head -20 "$OUT/problems" >&2
  status=1
fi
# README: a client generated from the document.
(cd "$OUT" && "$VENV/bin/openapi-python-client" generate --url "$URL/openapi.json" \
  --meta none --output-path seckill_client >/dev/null) || status=$?
[ -f "$OUT/seckill_client/__init__.py" ] || { echo "no client was generated" >&2; status=1; }
exit $status
