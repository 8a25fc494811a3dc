#!/usr/bin/env bash
# Regenerates the Redis Cluster and sharded-sale rows of
# docs/reliability.md: runs the cluster drills
# (crates/service/tests/cluster_drills.rs, and the lock's in
# crates/lock/tests/cluster.rs), each on a private 3-master + 3-replica
# cluster, and the refiller drill (crates/cli/tests/drills.rs, two `serve`
# processes on one private server), the drills of a redis-server and a
# cluster master restarted empty (crates/service/tests/lost.rs), the
# Sentinel failover (crates/service/tests/sentinel_drills.rs), and writes the figures they print (`drill-figures {…}` lines)
# between the cluster-drills markers of the page. About two minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
cargo nextest run -p seckill-service --test cluster_drills --no-capture >"$OUT" 2>&1 \
  || { cat "$OUT"; exit 1; }
cargo nextest run -p seckill-lock --test cluster --no-capture drill_15 >>"$OUT" 2>&1 \
  || { cat "$OUT"; exit 1; }
cargo nextest run -p seckill --test drills --no-capture drill_16 >>"$OUT" 2>&1 \
  || { cat "$OUT"; exit 1; }
cargo nextest run -p seckill-service --test lost --no-capture drill_ >>"$OUT" 2>&1 \
  || { cat "$OUT"; exit 1; }
cargo nextest run -p seckill-service --test sentinel_drills --no-capture >>"$OUT" 2>&1 \
  || { cat "$OUT"; exit 1; }
python3 scripts/drills_doc.py "$OUT" docs/reliability.md
