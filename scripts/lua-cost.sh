#!/usr/bin/env bash
# Instructions per call of the purchase functions, counted by callgrind on
# a private redis-server: unlike µs, machine load does not move them.
# Prints one line per case as `name instructions`; the last two are the
# expiry sweep's, per sale. Needs valgrind,
# redis-server and redis-benchmark; about a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-10000}
LUA=crates/engine/src/lua
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# The engine's whole library as crates/redis/src/library.rs assembles it
# (under the version "cost"), its functions as crates/engine/src/scripts.rs
# lists them: the header, the prelude, then each function's body inside
# `register(NAME, function(KEYS, ARGV) ... end)`; then the floor under a
# purchase (lua/floor.lua, which `seckill bench --compare` loads beside it)
# and a function that only returns 1, the floor of any call. Whole, because the size of what a
# library keeps moves the cost of every call (Lua's garbage collector marks
# all of it every 50 calls).
{
  sed -e s/__LIBRARY__/seckill_engine_cost/ -e s/__VERSION__/cost/ crates/redis/src/lua/header.lua
  cat "$LUA/prelude.lua"
  for f in create_sale purchase purchase_batch order expire end_sale stock; do
    echo "register('$f', function(KEYS, ARGV)"
    case $f in order | expire) cat "$LUA/lifecycle_common.lua" ;; esac
    cat "$LUA/$f.lua"
    [ "$f" = expire ] && cat "$LUA/expire_due.lua"
    # With the flags crates/engine/src/scripts.rs gives each.
    case $f in
    purchase | purchase_batch | order | expire) echo "end, { 'allow-cross-slot-keys' })" ;;
    *) echo 'end, nil)' ;;
    esac
  done
  echo "register('floor', function(KEYS, ARGV)"
  cat "$LUA/floor.lua"
  echo 'end, nil)'
  echo "register('one', function(KEYS, ARGV) return 1 end, nil)"
} >"$WORK/library.lua"

# cost NAME WHAT CALLS ENTRIES SETUP ARGS...: instructions of CALLS calls
# of WHAT (a function of the library by name, or a script file, sent by
# EVALSHA), each with a new buyer and request id, after as many to warm up.
# ENTRIES: stream entries each call must add, checked so
# that a run whose calls were refused (cheaper) cannot pass for a purchase;
# 0: none may be added (a refusal must refuse). SETUP: fields set in the
# sale's hash first (`-` for none). With ARMED=1, the sale is armed as a
# persister leaves a quiet one (its group made, `n` naming its master's
# ledger), and each purchase must be told there.
cost() {
  local name=$1 what=$2 calls=$3 entries=$4 setup=$5
  shift 5
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  valgrind --tool=callgrind --callgrind-out-file="$WORK/out.$port" \
    redis-server --port "$port" --save '' --appendonly no >/dev/null 2>&1 &
  local pid=$!
  for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
  local r="redis-cli -p $port"
  # As create_sale.lua leaves a sale with no end: the scripts read it.
  $r HSET 'seckill:{sale:b}:sale' gen 123 left 1000000000 end 0 >/dev/null
  $r SET 'seckill:{sale:b}:stock' 1000000000 >/dev/null
  if [ "$setup" != - ]; then
    # shellcheck disable=SC2086 # the fields are words on purpose
    $r HSET 'seckill:{sale:b}:sale' $setup >/dev/null
  fi
  local ledger='seckill:{news:0}:ledger:2'
  if [ "${ARMED:-}" = 1 ]; then
    $r XGROUP CREATE 'seckill:{sale:b}:orders' persister '$' MKSTREAM >/dev/null
    $r XGROUP CREATE "$ledger" persister '$' MKSTREAM >/dev/null
    $r HSET 'seckill:{sale:b}:sale' n "$ledger persister 2" >/dev/null
  fi
  local call
  if [ -f "$what" ]; then
    call=(EVALSHA "$($r SCRIPT LOAD "$(cat "$what")")")
  else
    $r FUNCTION LOAD "$(cat "$WORK/library.lua")" >/dev/null
    call=(FCALL "${what}_cost")
  fi
  # The warm-up buys under other names: two redis-benchmark runs started in
  # the same second draw the same random numbers, and repeated buyers and
  # request ids would make the measured calls cheap refusals.
  local warm=("${@/#u__rand_int__/wu__rand_int__}")
  warm=("${warm[@]/#r__rand_int__/wr__rand_int__}")
  redis-benchmark -p "$port" -c 20 -P 16 -n "$calls" -r 100000000 -q "${call[@]}" "${warm[@]}" >/dev/null
  callgrind_control -z "$pid" >/dev/null 2>&1
  redis-benchmark -p "$port" -c 20 -P 16 -n "$calls" -r 100000000 -q "${call[@]}" "$@" >/dev/null
  callgrind_control -d "$pid" >/dev/null 2>&1
  local added
  added=$($r XLEN 'seckill:{sale:b}:orders')
  # Random buyers may repeat (a refusal under limit 1): allow 1 %.
  if [ $((added * 100)) -lt $((entries * calls * 2 * 99)) ] || { [ "$entries" = 0 ] && [ "$added" != 0 ]; }; then
    echo "error: $name: $added stream entries after $((calls * 2)) calls" >&2
    exit 1
  fi
  if [ "${ARMED:-}" = 1 ] && [ "$($r XLEN "$ledger")" != "$added" ]; then
    echo "error: $name: $($r XLEN "$ledger") purchases told of $added" >&2
    exit 1
  fi
  $r shutdown nosave >/dev/null 2>&1 || true
  wait "$pid" 2>/dev/null || true
  local total
  total=$(cat "$WORK"/out."$port".* | awk '/^(summary|totals):/ {print $2}' | sort -n | tail -1)
  echo "$name $((total / calls))"
  rm -f "$WORK"/out."$port"*
}

KEYS=(2 'seckill:{sale:b}:sale' 'seckill:{sale:b}:orders')
cost return_1_same_arguments one "$N" 0 - "${KEYS[@]}" 123 u__rand_int__ 1 r__rand_int__
cost classic_check_decr "$LUA/classic_decr.lua" "$N" 0 - 1 'seckill:{sale:b}:stock'
FLOOR=(123 u__rand_int__ r:u__rand_int__/r__rand_int__ '1|r__rand_int__' '1795392000123-0-0|1')
cost floor_purchase floor "$N" 1 - "${KEYS[@]}" "${FLOOR[@]}"
cost floor_refusal floor "$N" 0 - "${KEYS[@]}" "${FLOOR[@]}" refusal
cost purchase_no_limit purchase "$N" 1 - "${KEYS[@]}" 123 u__rand_int__ 1 r__rand_int__
cost purchase_limit_1 purchase "$N" 1 - "${KEYS[@]}" 123 u__rand_int__ 1 r__rand_int__ 1
ARMED=1 cost purchase_limit_1_armed purchase "$N" 1 - "${KEYS[@]}" 123 u__rand_int__ 1 r__rand_int__ 1
cost refusal_sold_out purchase "$N" 0 "left 0" "${KEYS[@]}" 123 u__rand_int__ 1 r__rand_int__
cost refusal_over_limit purchase "$N" 0 "u:buyer 1" "${KEYS[@]}" 123 buyer 1 r__rand_int__ 1
cost repeated_request_id purchase "$N" 0 "r:buyer/first 1-0-0|1" "${KEYS[@]}" 123 buyer 1 first
batch=("${KEYS[@]}" 123)
for _ in $(seq 64); do batch+=(u__rand_int__ 1 r__rand_int__); done
per_batch=$(cost batch_64 purchase_batch $((N / 20)) 1 - "${batch[@]}" | awk '{print $2}')
echo "batch_64_per_purchase $((per_batch / 64))"

# The expiry of quiet sales, what spreading purchases over many sales adds
# most (docs/benchmarks.md, "Purchases spread over many sales"): rounds of
# SALES sales, each armed on its master's ledger with one order of one
# unit come due under a limit of 1 (as scripts/spread.sh buys), swept by
# one `FCALL expire` over the due index; instructions of the sweeps alone
# (callgrind zeroed before each, dumped after), per sale, the first round
# left out as a warm-up. FILED=order files each order as a persister
# files a quiet sale's one purchase (expire_order: no read of the stream);
# FILED=sale files the sale's key, as for a sale with more (its stream
# walked from the cursor, expire_sale).
SALES=500
sweep_cost() {
  local name=$1 filed=$2 port pid r
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  valgrind --tool=callgrind --callgrind-out-file="$WORK/sweep.$port" \
    redis-server --port "$port" --save '' --appendonly no >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
  r="redis-cli -p $port"
  $r FUNCTION LOAD "$(cat "$WORK/library.lua")" >/dev/null
  local ledger='seckill:{news:0}:ledger:2'
  $r XGROUP CREATE "$ledger" persister 0 MKSTREAM >/dev/null
  # As a persister leaves an armed sale with one purchase read and filed.
  local setup='
for i = 1, tonumber(ARGV[1]) do
  local base = "seckill:{sale:r" .. ARGV[2] .. "-" .. i .. "}"
  redis.call("HSET", base .. ":sale", "gen", "123", "payment_timeout", "1", "left", "9",
    "limit", "1", "end", "0", "n", KEYS[1] .. " persister 1", "u:u" .. i, "1")
  redis.call("XADD", base .. ":orders", "1000-" .. i, "b", "123", "u" .. i, "1")
  redis.call("XGROUP", "CREATE", base .. ":orders", "persister", "$")
  local member = base .. ":sale"
  if ARGV[3] == "order" then
    member = member .. " 1000-" .. i .. "-0 123 1 u" .. i
  end
  redis.call("ZADD", KEYS[2], 2000, member)
end'
  local round expired
  for round in 1 2 3 4 5; do
    $r EVAL "$setup" 2 "$ledger" 'seckill:{news:0}:due' "$SALES" "$round" "$filed" >/dev/null
    callgrind_control -z "$pid" >/dev/null 2>&1
    expired=$($r FCALL expire_cost 1 'seckill:{news:0}:due' '' "$SALES" 64 '' | head -1)
    callgrind_control -d "$pid" >/dev/null 2>&1
    if [ "$expired" != "$SALES" ] || [ "$($r ZCARD 'seckill:{news:0}:due')" != 0 ]; then
      echo "error: $name: $expired orders expired of $SALES, or some left filed" >&2
      exit 1
    fi
    [ "$round" = 1 ] && rm -f "$WORK"/sweep."$port".*
  done
  local told
  # Expiries told: one per entry, or four values each in a sweep's
  # entry (its first two are its marker).
  told=$($r EVAL "local n = 0
for _, e in ipairs(redis.call('XRANGE', KEYS[1], '-', '+')) do
  n = n + (e[2][1] == '*' and (#e[2] - 2) / 4 or 1)
end
return n" 1 "$ledger")
  if [ "$told" != $((SALES * 5)) ]; then
    echo "error: $name: $told expiries told of $((SALES * 5))" >&2
    exit 1
  fi
  $r shutdown nosave >/dev/null 2>&1 || true
  wait "$pid" 2>/dev/null || true
  local total=0 f
  for f in "$WORK"/sweep."$port".*; do
    total=$((total + $(awk '/^(summary|totals):/ {print $2}' "$f" | sort -n | tail -1)))
  done
  echo "$name $((total / (SALES * 4)))"
}
sweep_cost expire_quiet_sale_in_sweep_per_sale order
sweep_cost expire_walked_sale_in_sweep_per_sale sale
