#!/usr/bin/env bash
# What an order costs Redis when purchases are spread over many sales
# rather than aimed at one: `seckill serve` (persister, sweeper and
# archiver in-process) on a private redis-server; RATE purchases/s (1,000
# unless given) for SECONDS (30) through the API, into one sale, then
# spread over 100, 1,000 and 10,000 sales (each purchase a random one).
# Orders are left unpaid with a 2 s pay-by time, so each is bought,
# persisted, expired and its expiry persisted within the window.
# redis-server's CPU (ns, from /proc/PID/task/*/schedstat) from the first
# purchase until every order is expired in SQL, per purchase, and how
# long after its answer each order was first seen in SQL (p50, p99; the
# watcher looks every 5 ms). The one sale and the 10,000 again with
# `serve --no-background` and stock enough that no purchase is refused
# (`"background": false`): the purchases alone, over their window, so
# what the background adds per purchase is the difference. Then one sale
# and 10,000 four times more, back to back (cases one-2, spread-2, …,
# one-5, spread-5), three pairs with redis-server on a core of its own
# (one-pinned-1, spread-pinned-1, …), the pair again with Redis's heap on
# transparent huge pages (one-huge, spread-huge), the 10,000 sales with a
# snapshot every 2 s on 4 KB pages and on huge pages (spread-fork,
# spread-fork-huge), and a trickle: 100/s over the 10,000 sales for 20 s.
# One JSON line per case, with each command's Redis time per purchase
# (`by_command`) and the purchases' answer times. Needs redis-server, curl, python3 and, for the
# pinned pairs, taskset and two cores; about thirty minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
. scripts/run.sh
RATE=${RATE:-1000}
SECONDS_RUN=${SECONDS_RUN:-30}


# run NAME SALES RATE SECONDS [alone]: a fresh redis-server and serve,
# SALES sales, RATE purchases/s for SECONDS; with `alone`, serve runs no
# background and nothing is waited for after the purchases.
run() {
  local name=$1 sales=$2 rate=$3 seconds=$4 alone=${5:-} rport web rpid background=()
  local huge=() huge_flags=() pin_redis=() pin_rest=()
  rport=$(free_port)
  # A case named *-pinned-*: redis-server on the second core, serve and the
  # buyers on the first, as a Redis with a host of its own runs.
  if [[ $name == *-pinned-* ]]; then pin_redis=(taskset -c 1) pin_rest=(taskset -c 0); fi
  # A case named *-huge: Redis's heap on transparent huge pages (jemalloc
  # asks for them; Redis turns them off for itself unless told not to).
  if [[ $name == *-huge ]]; then huge=(MALLOC_CONF=thp:always) huge_flags=(--disable-thp no); fi
  # A case named *-fork*: the script asks for snapshots (BGSAVE) during the
  # purchases, written to $OUT.
  "${pin_redis[@]}" env "${huge[@]}" redis-server --port "$rport" --save '' --appendonly no "${huge_flags[@]}" \
    --dir "$OUT" --dbfilename "$name.rdb" --logfile "$OUT/redis-$name.log" &
  rpid=$!
  PIDS+=($rpid)
  for _ in $(seq 50); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.1; done
  [ "$alone" = alone ] && background=(--no-background)
  web=$(free_port)
  "${pin_rest[@]}" $S serve --listen 127.0.0.1:$web --redis-url redis://127.0.0.1:$rport/ --database-url "$OUT/$name.db" \
    --admin-token tok --buyer-auth body --rate-per-user 0 --rate-per-ip 0 "${background[@]}" >"$OUT/serve-$name.log" 2>&1 &
  local spid=$!
  PIDS+=($spid)
  for _ in $(seq 100); do curl -sf http://127.0.0.1:$web/healthz >/dev/null && break; sleep 0.1; done
  "${pin_rest[@]}" python3 - "$web" "$sales" "$rate" "$seconds" "$rpid" "$OUT/$name.db" "$name" "$rport" "$alone" <<'PY'
import http.client, json, os, random, sqlite3, subprocess, sys, threading, time
web, sales, rate, seconds, rpid, db, name, rport, alone = sys.argv[1:10]
sales, rate, seconds, rpid, alone = int(sales), int(rate), int(seconds), int(rpid), alone == "alone"
forks = "-fork" in name
H = {"Authorization": "Bearer tok", "Content-Type": "application/json"}
c = http.client.HTTPConnection("127.0.0.1", int(web))
stock = rate * seconds
# Without the background no unit comes back from an expiry: each sale
# holds the whole stock, so no purchase is refused.
per_sale = stock if alone else -(-stock // sales)
for i in range(sales):
    body = {"id": f"s{i}", "name": "s", "stock": per_sale, "per_user_limit": 1, "payment_timeout_secs": 2}
    c.request("POST", "/v1/sales", json.dumps(body), H)
    r = c.getresponse(); r.read()
    assert r.status == 201, r.status
# Each sale's purchaser made in serve before the clock (its first use
# reads the sale, once per sale and instance): a purchase of 2 units, over
# the per-user limit of 1, is refused before it reaches Redis.
for i in range(sales):
    c.request("POST", f"/v1/sales/s{i}/purchase", json.dumps({"user_id": "warm", "quantity": 2}),
              {"Content-Type": "application/json"})
    r = c.getresponse(); r.read()
    assert r.status == 409, r.status
def info(section):
    out = subprocess.run(["redis-cli", "-p", rport, "info", section], capture_output=True, text=True).stdout
    return dict(line.split(":", 1) for line in out.split() if ":" in line)

def commands():
    return int(info("stats")["total_commands_processed"])

# The background's start-up work (each new sale read once by the
# persister, the archiver and the watch for lost sales) done before the
# clock: Redis back to its idle rate, under 100 commands in a second,
# for two seconds running (at most two minutes).
time.sleep(2)
quiet, last, deadline = 0, commands(), time.monotonic() + 120
while quiet < 2 and time.monotonic() < deadline:
    time.sleep(1)
    now = commands()
    quiet = quiet + 1 if now - last < 100 else 0
    last = now

def commandstats():
    stats = {}
    for key, fields in info("commandstats").items():
        if key.startswith("cmdstat_"):
            f = dict(kv.split("=") for kv in fields.split(","))
            stats[key[len("cmdstat_"):]] = (int(f["calls"]), int(f["usec"]))
    return stats

# How much of Redis's memory sits on huge pages (the *-huge cases), KB.
def huge_kb():
    for line in open(f"/proc/{rpid}/smaps_rollup"):
        if line.startswith("AnonHugePages:"):
            return int(line.split()[1])
    return 0

def cpu_ns():
    import glob
    return sum(int(open(f).read().split()[0]) for f in glob.glob(f"/proc/{rpid}/task/*/schedstat"))

total = rate * seconds
threads = 16
ok = [0] * threads
took_ms = [[] for _ in range(threads)]
# Every order's answer time, and when it was first seen in SQL.
answered, seen, lock = {}, {}, threading.Lock()
done = threading.Event()
def watch():
    sql = sqlite3.connect(db)
    while not done.is_set() or len(seen) < len(answered):
        with lock:
            waiting = [o for o in answered if o not in seen][:500]
        if waiting:
            marks = ",".join("?" * len(waiting))
            now = time.monotonic()
            for (o,) in sql.execute(f"SELECT order_id FROM orders WHERE order_id IN ({marks})", waiting):
                seen[o] = now
        if done.is_set() and time.monotonic() > stop_watch:
            break
        time.sleep(0.005)
stop_watch = float("inf")
watcher = threading.Thread(target=watch)
watcher.start()
start = time.monotonic()
huge_at_start = huge_kb()
before = cpu_ns()
stats_before = commandstats()
def buy(t):
    conn = http.client.HTTPConnection("127.0.0.1", int(web))
    rnd = random.Random(t)
    n = t
    while n < total:
        due = start + n / rate
        pause = due - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        sale = rnd.randrange(sales)
        sent = time.monotonic()
        conn.request("POST", f"/v1/sales/s{sale}/purchase", json.dumps({"user_id": f"u{n}"}),
                     {"Content-Type": "application/json"})
        r = conn.getresponse()
        body = r.read()
        took_ms[t].append((time.monotonic() - sent) * 1000)
        if r.status in (200, 201):
            ok[t] += 1
            with lock:
                answered[json.loads(body)["order_id"]] = time.monotonic()
        n += threads
# The *-fork* cases: a snapshot every 2 s while purchases come, each
# one's fork time and the memory Redis copied while its child wrote
# (copy-on-write, INFO persistence), one at a time.
# A save that has not ended within 30 s ends the loop, not the run.
saves = []
def save():
    while not bought_all.wait(2):
        subprocess.run(["redis-cli", "-p", rport, "bgsave"], capture_output=True)
        give_up = time.monotonic() + 30
        while (done_save := info("persistence")).get("rdb_bgsave_in_progress") != "0":
            if time.monotonic() > give_up:
                return
            time.sleep(0.01)
        saves.append((int(info("stats")["latest_fork_usec"]), int(done_save["rdb_last_cow_size"])))
bought_all = threading.Event()
saver = threading.Thread(target=save)
if forks:
    saver.start()
workers = [threading.Thread(target=buy, args=(t,)) for t in range(threads)]
for w in workers: w.start()
for w in workers: w.join()
took = time.monotonic() - start
bought_all.set()
if forks:
    saver.join()
answers = sorted(x for ts in took_ms for x in ts)
bought = sum(ok)
stop_watch = time.monotonic() + (0 if alone else 30)
done.set()
watcher.join()
lags = sorted((seen[o] - answered[o]) * 1000 for o in answered if o in seen)
p99 = lags[int(len(lags) * 0.99)] if lags else None
# Until every order is expired in SQL: bought, persisted, expired, persisted.
sql = sqlite3.connect(db)
deadline = time.monotonic() + (0 if alone else 60)
while True:
    n = sql.execute("SELECT COUNT(*) FROM orders WHERE state = 'expired'").fetchone()[0]
    if n >= bought or time.monotonic() > deadline:
        break
    time.sleep(0.05)
after = cpu_ns()
stats_after = commandstats()
# Redis time inside each command (INFO commandstats), per purchase: where
# the difference between the cases is spent.
by_command = {}
for cmd, (calls, usec) in stats_after.items():
    c0, u0 = stats_before.get(cmd, (0, 0))
    if usec - u0 > 0:
        by_command[cmd] = {"calls_per_purchase": round((calls - c0) / max(bought, 1), 3),
                           "us_per_purchase": round((usec - u0) / max(bought, 1), 2)}
by_command = dict(sorted(by_command.items(), key=lambda kv: -kv[1]["us_per_purchase"]))
print(json.dumps({"case": name, "sales": sales, "background": not alone, "purchases": bought,
                  "expired_in_sql": n,
                  "purchases_per_s": round(bought / took), "window_s": round(time.monotonic() - start, 1),
                  "redis_cpu_us_per_purchase": round((after - before) / 1000 / max(bought, 1), 2),
                  "to_sql_p50_ms": round(lags[len(lags) // 2], 1) if lags else None,
                  "to_sql_p99_ms": round(p99, 1) if p99 is not None else None,
                  "redis_huge_pages_kb_at_start": huge_at_start,
                  "redis_huge_pages_kb": huge_kb(),
                  "answer_p50_ms": round(answers[len(answers) // 2], 1),
                  "answer_p99_ms": round(answers[int(len(answers) * 0.99)], 1),
                  "kernel": os.uname().release,
                  "saves": len(saves),
                  "fork_ms_max": round(max((f for f, _ in saves), default=0) / 1000, 2),
                  "cow_mb_per_save": round(sum(c for _, c in saves) / max(len(saves), 1) / 2**20, 2),
                  "redis_command_us_per_purchase": round(sum(v["us_per_purchase"] for v in by_command.values()), 2),
                  "by_command": by_command}))
PY
  kill "$spid" "$rpid" 2>/dev/null || true
  wait "$spid" "$rpid" 2>/dev/null || true
}

run one 1 "$RATE" "$SECONDS_RUN"
# Between the two: where the cost rises as fewer of a sale's orders
# share each step of the background (the purchases a sale gets a second),
# and whether it goes on rising with the number of sales.
run sales-100 100 "$RATE" "$SECONDS_RUN"
run sales-1000 1000 "$RATE" "$SECONDS_RUN"
run spread 10000 "$RATE" "$SECONDS_RUN"
run one-alone 1 "$RATE" "$SECONDS_RUN" alone
run spread-alone 10000 "$RATE" "$SECONDS_RUN" alone
# One sale and 10,000 four times more, back to back: runs of one case
# differ by up to a sixth on this machine, as much as the difference
# measured, so the ratio is read as the median of five pairs, not one.
for i in 2 3 4 5; do
  run one-$i 1 "$RATE" "$SECONDS_RUN"
  run spread-$i 10000 "$RATE" "$SECONDS_RUN"
done
# Three pairs more with redis-server on a core of its own and the rest on
# the other: on a shared core, what else runs there takes from the caches
# and the time of both cases, so the two kinds of pair need not agree.
if [ "$(nproc)" -ge 2 ]; then
  for i in 1 2 3; do
    run one-pinned-$i 1 "$RATE" "$SECONDS_RUN"
    run spread-pinned-$i 10000 "$RATE" "$SECONDS_RUN"
  done
fi
# The pair once more with Redis's heap on huge pages: how much of what
# spreading adds is the processor finding 10,000 sales' memory through
# 4 KB pages (its address translation) rather than work done.
run one-huge 1 "$RATE" "$SECONDS_RUN"
run spread-huge 10000 "$RATE" "$SECONDS_RUN"
# What huge pages cost a Redis that forks: the 10,000 sales snapshotted
# every 2 s while purchases come, on 4 KB pages and on huge pages.
run spread-fork 10000 "$RATE" "$SECONDS_RUN"
run spread-fork-huge 10000 "$RATE" "$SECONDS_RUN"
# A trickle: how long an order takes to reach SQL when purchases are few
# and far between, each in another sale.
run trickle 10000 100 20
