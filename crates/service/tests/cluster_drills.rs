//! Drills 11–14, 17 and 18 of docs/reliability.md: `serve` on a real Redis
//! Cluster (3 masters, 1 replica each) under HTTP load while a master is
//! killed, failed over, loses the sale's slot or freezes; 17 and 18 kill a
//! shard's master or move a shard's slot under a sharded sale. (Drill 15, a lock holder's
//! master failing over, is in `crates/lock/tests/cluster.rs`.) Each prints
//! one `drill-figures {…}` line; `scripts/drills.sh` puts them in the doc.

use std::time::{Duration, Instant};

use hyper::StatusCode;
use seckill_engine::{Durability, Engine};
use seckill_orders::{Finding, Store, audit, wait_drained};
use seckill_redis::Target;
use seckill_service::client::Http;
use seckill_testkit::RedisCluster;
use serde_json::json;

mod common;

use common::{Bought, Buyers, forgotten_and_in_sql, serve, wait_ready};

/// One drill at a time: `cargo test` runs a file's tests on parallel
/// threads, and five clusters of six servers with their buyers on two
/// cores would measure the machine, not the drill.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// How long a buyer may wait for any answer, a 503 included: the cluster
/// client gives up after 2 s; the rest is HTTP and scheduling on a busy
/// 2-core machine.
const ANSWER_BOUND: Duration = Duration::from_millis(2_500);

struct Drill {
    /// `None` only while a blocking operation holds it.
    cluster: Option<RedisCluster>,
    target: Target,
    _dir: tempfile::TempDir,
    db: String,
    running: seckill_service::Running,
    http: Http,
    admin: Http,
    /// Connected before any fault: connecting anew while a master is
    /// frozen can time out on the frozen node, which is not what a drill
    /// checks.
    engine: Engine,
}

async fn start(durability: Durability) -> Drill {
    let cluster = RedisCluster::start(3, 1).unwrap();
    let target = Target::cluster(&cluster.addresses().join(",")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("o.db").to_string_lossy().into_owned();
    let (running, http, admin) = serve(target.clone(), &db, durability).await;
    let engine = Engine::connect_target(&target).await.unwrap();
    Drill {
        cluster: Some(cluster),
        target,
        _dir: dir,
        db,
        running,
        http,
        admin,
        engine,
    }
}

impl Drill {
    fn cluster(&self) -> &RedisCluster {
        self.cluster.as_ref().expect("the cluster is back")
    }

    /// Creates one sale per master (a large stock, a limit of 3) and
    /// answers their ids and masters.
    async fn sales(&self) -> Vec<(String, u16)> {
        let ids = self
            .cluster()
            .one_id_per_master((0..1000).map(|i| format!("s{i}")), |id| {
                format!("{{sale:{id}}}")
            })
            .unwrap();
        let mut sales = Vec::new();
        for id in ids {
            let sale =
                json!({ "id": id, "name": "drill", "stock": 1_000_000, "per_user_limit": 3 });
            let (status, body) = self.admin.post("/v1/sales", &sale).await.unwrap();
            assert_eq!(status, StatusCode::CREATED, "{body}");
            let master = self.master_of(&id);
            sales.push((id, master));
        }
        sales
    }

    /// Creates sale `hot` of [`SHARDED_STOCK`] units over 3 shards, one per
    /// master; answers each shard's id and master.
    async fn sharded_sale(&self) -> Vec<(String, u16)> {
        let body = json!({ "id": "hot", "name": "drill", "stock": SHARDED_STOCK,
            "per_user_limit": 3, "shards": 3 });
        let (status, sale) = self.admin.post("/v1/sales", &body).await.unwrap();
        assert_eq!(status, StatusCode::CREATED, "{sale}");
        let shards = sale["sharding"]["shards"].as_array().unwrap().iter();
        let shards: Vec<(String, u16)> = shards
            .map(|s| {
                let id = s["id"].as_str().unwrap().to_owned();
                let master = self.master_of(&id);
                (id, master)
            })
            .collect();
        let mut masters: Vec<u16> = shards.iter().map(|s| s.1).collect();
        masters.sort_unstable();
        masters.dedup();
        assert_eq!(masters.len(), 3, "shards not one per master: {shards:?}");
        shards
    }

    /// The books of sharded sale `sale` once its buyers stopped: the
    /// problems found, the transfers made, and whether every unit sold.
    async fn books(&self, sale: &str, seen: &Bought) -> Books {
        let engine = Engine::connect_target(&self.target).await.unwrap();
        let check = engine.sharding_check(sale).await.unwrap();
        let state = engine.sale(sale).await.unwrap();
        // "Sold out" is answered only once pool and shards are empty, and
        // nothing is ever given back in a drill.
        if seen.sold_out > 0 {
            assert_eq!(state.sold, state.stock, "sold_out answered early");
        }
        Books {
            problems: check.problems,
            transfers: check.transfers.len(),
            sold: state.sold,
            sold_out_answers: seen.sold_out,
        }
    }

    /// Lets the buyers go on until the refiller of sharded sale `sale` has
    /// moved units beyond the first stocking of its `shards`: a loaded
    /// machine sells too slowly for a fixed time to reach a refill. At
    /// most 20 s; the books say then whether it ran.
    async fn until_refilled(&self, sale: &str, shards: usize) {
        let engine = Engine::connect_target(&self.target).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            match engine.sharding_check(sale).await {
                Ok(check) if check.transfers.len() > shards => return,
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    fn slot_of(&self, sale: &str) -> u16 {
        self.cluster().slot_of(&format!("{{sale:{sale}}}")).unwrap()
    }

    fn master_of(&self, sale: &str) -> u16 {
        self.cluster().master_of(self.slot_of(sale)).unwrap()
    }

    /// Runs a blocking cluster operation off the runtime, so the buyers
    /// keep going meanwhile.
    async fn operate<T: Send + 'static>(
        &mut self,
        op: impl FnOnce(&mut RedisCluster) -> T + Send + 'static,
    ) -> T {
        let mut cluster = self.cluster.take().expect("the cluster is back");
        let (cluster, answer) = tokio::task::spawn_blocking(move || {
            let answer = op(&mut cluster);
            (cluster, answer)
        })
        .await
        .unwrap();
        self.cluster = Some(cluster);
        answer
    }

    /// How many orders of `sale` are in SQL now.
    async fn in_sql(&self, sale: &str) -> usize {
        let store = Store::open(&self.db).await.unwrap();
        common::in_sql(&self.engine, &store, sale).await.len()
    }

    /// After the buyers stopped: waits for the persister, then compares
    /// every acknowledged order with Redis, SQL and the audit.
    async fn settle(&self, sale: &str, seen: &Bought) -> Outcome {
        wait_ready(&self.http, Duration::from_secs(20)).await;
        let engine = Engine::connect_target(&self.target).await.unwrap();
        for part in engine.parts(sale).await.unwrap() {
            wait_drained(&mut engine.connection(), &part, Duration::from_secs(30))
                .await
                .unwrap();
        }
        let store = Store::open(&self.db).await.unwrap();
        let state = engine.sale(sale).await.unwrap();
        let orders = seen.acknowledged.iter().map(|(o, _)| o.as_str());
        let (forgotten, in_sql) = forgotten_and_in_sql(&engine, &store, sale, orders).await;
        let reported_expected = forgotten.iter().filter(|o| in_sql.contains(*o)).count();
        let report = audit(&engine, &store, sale).await.unwrap();
        let flagged = report
            .findings
            .iter()
            .filter(|f| matches!(f, Finding::MissingInRedis { .. }))
            .count();
        // Every purchase Redis forgot and SQL has is reported, none hidden.
        assert_eq!(flagged, reported_expected, "{report:#?}");
        Outcome {
            acknowledged: seen.acknowledged.len(),
            forgotten: forgotten.len(),
            reported: flagged,
            lost: forgotten.len() - reported_expected,
            oversold: state.sold.saturating_sub(state.stock),
            audit_clean: report.clean,
        }
    }
}

/// A sharded sale's stock: half goes out over 3 shards at once (1,333
/// each), and a shard is refilled when down to about 667, so transfers run
/// even when a loaded machine sells slowly (about 2,500 in a drill); and a
/// fast machine (about 6,500 in a drill) does not sell out before the fault
/// (a drill may sell out later; `sold_out` is then checked).
const SHARDED_STOCK: u64 = 8_000;

/// What a sharded drill found of its sale's books.
#[derive(Debug, serde::Serialize)]
struct Books {
    problems: Vec<String>,
    transfers: usize,
    sold: u64,
    sold_out_answers: u64,
}

impl Books {
    /// Nothing made or lost across pool, transfers and shards, and the
    /// refiller moved units beyond the first stocking of the `shards`.
    fn assert_balanced(&self, shards: usize) {
        assert!(self.problems.is_empty(), "{self:?}");
        assert!(self.transfers > shards, "no refill ran: {self:?}");
    }
}

/// What one drill found, per sale.
#[derive(Debug, serde::Serialize)]
struct Outcome {
    acknowledged: usize,
    /// Acknowledged orders the sale's Redis no longer has.
    forgotten: usize,
    /// Of those, the ones in SQL, which the audit reports.
    reported: usize,
    /// Of those, the ones in neither: lost without a trace.
    lost: usize,
    oversold: u64,
    audit_clean: bool,
}

impl Outcome {
    /// No acknowledged purchase forgotten, nothing oversold, audit clean.
    fn assert_nothing_lost(&self) {
        assert_eq!(self.forgotten, 0, "{self:?}");
        assert_eq!(self.oversold, 0, "{self:?}");
        assert!(self.audit_clean, "{self:?}");
    }
}

/// Prints the figures `scripts/drills.sh` collects.
fn figures(drill: &str, value: serde_json::Value) {
    println!(
        "drill-figures {}",
        json!({ "drill": drill, "figures": value })
    );
}

/// Purchases acknowledged after `after`.
fn acknowledged_after(seen: &Bought, after: Instant) -> usize {
    seen.acknowledged
        .iter()
        .filter(|(_, at)| *at > after)
        .count()
}

/// What buyers saw while a cluster operation ran 1 s into their sale.
struct MidSale {
    seen: Bought,
    /// How long the operation took.
    took: Duration,
    /// Purchases acknowledged after it.
    resumed: usize,
    outcome: Outcome,
}

/// Buyers on `sale`; after 1 s the blocking cluster operation `op`; 1 s
/// more of buying (for a sale of `shards` shards, until its refiller has
/// run too); then everything compared with SQL and the audit.
async fn mid_sale(
    drill: &mut Drill,
    sale: &str,
    shards: Option<usize>,
    op: impl FnOnce(&mut RedisCluster) -> std::io::Result<()> + Send + 'static,
) -> MidSale {
    let buyers = Buyers::start(&drill.http, sale);
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let asked = Instant::now();
    drill.operate(op).await.unwrap();
    let took = asked.elapsed();
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    if let Some(shards) = shards {
        drill.until_refilled(sale, shards).await;
    }
    let seen = buyers.finish().await;
    let resumed = acknowledged_after(&seen, asked + took);
    let outcome = drill.settle(sale, &seen).await;
    MidSale {
        seen,
        took,
        resumed,
        outcome,
    }
}

/// Drill 11: the master that owns the sale's slot is SIGKILLed mid-sale
/// and its replica takes over. Run with the default durability and with
/// `--durability replica`.
async fn kill_the_sales_master(durability: Durability) -> (Outcome, serde_json::Value) {
    let mut drill = start(durability).await;
    let (sale, master) = drill.sales().await.remove(0);
    let buyers = Buyers::start(&drill.http, &sale);
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let killed = Instant::now();
    let promoted = drill.operate(move |c| c.kill_master(master)).await.unwrap();
    let took_over = killed.elapsed();
    assert_ne!(promoted, master);
    // With replica durability the promoted master has no replica left to
    // confirm purchases until the killed node is back: it rejoins as one
    // (an operator's restart; nothing of seckill is restarted).
    let rejoined = match durability {
        Durability::Primary => None,
        Durability::Replica { .. } => {
            drill.operate(move |c| c.rejoin(master)).await.unwrap();
            Some(killed.elapsed())
        }
    };
    let selling_again = killed + rejoined.unwrap_or(took_over);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let mut seen = buyers.finish().await;
    let resumed = acknowledged_after(&seen, selling_again);
    let outcome = drill.settle(&sale, &seen).await;
    assert!(seen.unavailable > 0, "the buyers never saw the master gone");
    assert!(resumed > 0, "selling did not resume after the failover");
    assert_eq!(outcome.oversold, 0);
    let slowest = seen.latency(1.0);
    assert!(
        slowest < ANSWER_BOUND,
        "an answer took {slowest:?} while the slot had no master"
    );
    let value = json!({
        "durability": format!("{durability:?}"),
        "replica_took_over_ms": took_over.as_millis() as u64,
        "killed_node_rejoined_ms": rejoined.map(|d| d.as_millis() as u64),
        "unavailable_503": seen.unavailable,
        "slowest_answer_ms": slowest.as_millis() as u64,
        "acknowledged_after_recovery": resumed,
        "outcome": outcome,
    });
    drill.running.stop().await;
    (outcome, value)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drill_11_sigkill_of_the_sales_master_with_the_default_durability() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let (outcome, value) = kill_the_sales_master(Durability::Primary).await;
    figures("11 default", value);
    // Losses are possible here; each one is counted, and any that reached
    // SQL is reported by the audit (checked in `settle`).
    assert_eq!(outcome.audit_clean, outcome.reported == 0, "{outcome:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drill_11_sigkill_of_the_sales_master_with_replica_durability() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let durability = Durability::Replica {
        timeout: Duration::from_millis(250),
    };
    let (outcome, value) = kill_the_sales_master(durability).await;
    figures("11 replica", value);
    outcome.assert_nothing_lost();
}

/// Drill 12: `CLUSTER FAILOVER` on the sale's replica mid-sale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drill_12_manual_failover_mid_sale_loses_nothing() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let mut drill = start(Durability::Primary).await;
    let (sale, master) = drill.sales().await.remove(0);
    let replica = drill.cluster().replicas_of(master).unwrap()[0];
    let MidSale {
        mut seen,
        took,
        resumed,
        outcome,
    } = mid_sale(&mut drill, &sale, None, move |c| c.failover(replica)).await;
    let slowest = seen.latency(1.0);
    figures(
        "12",
        json!({
            "failover_ms": took.as_millis() as u64,
            "unavailable_503": seen.unavailable,
            "p99_ms": seen.latency(0.99).as_millis() as u64,
            "slowest_answer_ms": slowest.as_millis() as u64,
            "acknowledged_after_failover": resumed,
            "outcome": outcome,
        }),
    );
    assert_eq!(drill.master_of(&sale), replica);
    assert!(resumed > 0, "selling did not resume after the failover");
    outcome.assert_nothing_lost();
    assert!(slowest < ANSWER_BOUND, "an answer took {slowest:?}");
    drill.running.stop().await;
}

/// Drill 13: the sale's slot moved to another master mid-sale
/// (`SETSLOT IMPORTING/MIGRATING`, `MIGRATE`, `SETSLOT NODE`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drill_13_the_sales_slot_moves_mid_sale() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let mut drill = start(Durability::Primary).await;
    let sales = drill.sales().await;
    let (sale, from) = sales[0].clone();
    let to = sales[1].1;
    let slot = drill.slot_of(&sale);
    let MidSale {
        mut seen,
        took,
        resumed,
        outcome,
    } = mid_sale(&mut drill, &sale, None, move |c| c.move_slot(slot, to)).await;
    figures(
        "13",
        json!({
            "move_ms": took.as_millis() as u64,
            "unavailable_503": seen.unavailable,
            "p99_ms": seen.latency(0.99).as_millis() as u64,
            "slowest_answer_ms": seen.latency(1.0).as_millis() as u64,
            "acknowledged_after_move": resumed,
            "outcome": outcome,
        }),
    );
    assert_ne!(from, to);
    assert_eq!(drill.master_of(&sale), to);
    assert!(resumed > 0, "selling did not go on after the move");
    outcome.assert_nothing_lost();
    drill.running.stop().await;
}

/// Drill 14: one master SIGSTOPped for 5 s. Sales on the other masters
/// keep selling fast; the frozen one's buyers get 503s, then buy again
/// (its replica may take over meanwhile: the node timeout is 2 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drill_14_a_frozen_master_stalls_only_its_own_sales() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let mut drill = start(Durability::Primary).await;
    let sales = drill.sales().await;
    let (frozen_sale, frozen_master) = sales[0].clone();
    let (other_sale, _) = sales[1].clone();
    // The persister has learned of the other sale before the freeze: the
    // registry of sales lives on one master, perhaps the frozen one, and a
    // sale created during its outage waits for it to be persisted.
    let (status, body) = drill
        .http
        .post(
            &format!("/v1/sales/{other_sale}/purchase"),
            &json!({ "user_id": "first", "request_id": "first" }),
        )
        .await
        .unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while drill.in_sql(&other_sale).await == 0 {
        assert!(
            Instant::now() < deadline,
            "the first order never reached SQL"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let frozen_buyers = Buyers::start(&drill.http, &frozen_sale);
    tokio::time::sleep(Duration::from_millis(500)).await;
    drill
        .cluster
        .as_mut()
        .unwrap()
        .node(frozen_master)
        .pause()
        .unwrap();
    let paused = Instant::now();
    // The other sale's buyers run while the master is frozen; then, still
    // frozen, its orders must reach SQL: the persister goes on with the
    // sales it can reach.
    let other_buyers = Buyers::start(&drill.http, &other_sale);
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    let mut other = other_buyers.finish().await;
    let thaw = paused + Duration::from_secs(5);
    let persisted_while_frozen = loop {
        let n = drill.in_sql(&other_sale).await;
        if n > other.acknowledged.len() || Instant::now() + Duration::from_millis(100) > thaw {
            break n;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // The instance stays ready: the other masters' sales are being served.
    let (ready, _) = drill.http.get("/readyz").await.unwrap();
    tokio::time::sleep(thaw.saturating_duration_since(Instant::now())).await;
    drill
        .cluster
        .as_mut()
        .unwrap()
        .node(frozen_master)
        .resume()
        .unwrap();
    let resumed_at = Instant::now();
    drill.operate(|c| c.wait_ok()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let mut frozen = frozen_buyers.finish().await;
    let recovered = acknowledged_after(&frozen, resumed_at);
    let other_p99 = other.latency(0.99);
    let other_outcome = drill.settle(&other_sale, &other).await;
    let frozen_outcome = drill.settle(&frozen_sale, &frozen).await;
    figures(
        "14",
        json!({
            "paused_ms": (resumed_at - paused).as_millis() as u64,
            "other_sale_acknowledged": other.acknowledged.len(),
            "other_sale_p50_ms": other.latency(0.5).as_secs_f64() * 1e3,
            "other_sale_p99_ms": other_p99.as_secs_f64() * 1e3,
            "other_sale_unavailable_503": other.unavailable,
            "other_sale_in_sql_while_frozen": persisted_while_frozen,
            "frozen_sale_unavailable_503": frozen.unavailable,
            "frozen_sale_slowest_answer_ms": frozen.latency(1.0).as_millis() as u64,
            "frozen_sale_acknowledged_after_resume": recovered,
            "other_outcome": other_outcome,
            "frozen_outcome": frozen_outcome,
        }),
    );
    assert!(
        other_p99 < Duration::from_millis(50),
        "the other master's sale had p99 {other_p99:?}"
    );
    assert_eq!(other.unavailable, 0, "the other sale answered 503s");
    assert_eq!(
        ready,
        StatusCode::OK,
        "/readyz failed while one master was frozen"
    );
    assert_eq!(
        persisted_while_frozen,
        other.acknowledged.len() + 1,
        "the other sale's orders did not reach SQL while a master was frozen"
    );
    assert!(frozen.unavailable > 0, "the frozen sale never answered 503");
    assert!(recovered > 0, "the frozen sale did not recover");
    for outcome in [&other_outcome, &frozen_outcome] {
        assert_eq!(outcome.oversold, 0);
        assert_eq!(outcome.audit_clean, outcome.reported == 0, "{outcome:?}");
    }
    assert!(
        frozen.latency(1.0) < ANSWER_BOUND,
        "an answer took {:?}",
        frozen.latency(1.0)
    );
    drill.running.stop().await;
}

/// Drill 17: a shard's master SIGKILLed mid-sale with `--durability
/// replica`; its replica takes over and the killed node rejoins. Buyers of
/// the other shards go on; the refiller goes on once it can read every
/// shard again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drill_17_a_shards_master_killed_with_replica_durability() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let durability = Durability::Replica {
        timeout: Duration::from_millis(250),
    };
    let mut drill = start(durability).await;
    let shards = drill.sharded_sale().await;
    let (shard, master) = shards[0].clone();
    let buyers = Buyers::start(&drill.http, "hot");
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let killed = Instant::now();
    let promoted = drill.operate(move |c| c.kill_master(master)).await.unwrap();
    drill.operate(move |c| c.rejoin(master)).await.unwrap();
    let back = killed.elapsed();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    drill.until_refilled("hot", shards.len()).await;
    let mut seen = buyers.finish().await;
    let resumed = acknowledged_after(&seen, killed + back);
    let outcome = drill.settle("hot", &seen).await;
    let books = drill.books("hot", &seen).await;
    let slowest = seen.latency(1.0);
    figures(
        "17",
        json!({
            "killed_node_rejoined_ms": back.as_millis() as u64,
            "unavailable_503": seen.unavailable,
            "slowest_answer_ms": slowest.as_millis() as u64,
            "acknowledged_after_recovery": resumed,
            "outcome": outcome,
            "books": books,
        }),
    );
    assert_ne!(promoted, master);
    assert_eq!(drill.master_of(&shard), promoted);
    assert!(resumed > 0, "selling did not resume after the failover");
    outcome.assert_nothing_lost();
    books.assert_balanced(shards.len());
    assert!(slowest < ANSWER_BOUND, "an answer took {slowest:?}");
    drill.running.stop().await;
}

/// Drill 18: a shard's slot moved to another master mid-sale, while the
/// refiller moves units to and from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drill_18_a_shards_slot_moves_mid_sale() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let mut drill = start(Durability::Primary).await;
    let shards = drill.sharded_sale().await;
    let (shard, from) = shards[0].clone();
    let to = shards[1].1;
    let slot = drill.slot_of(&shard);
    let MidSale {
        mut seen,
        took,
        resumed,
        outcome,
    } = mid_sale(&mut drill, "hot", Some(shards.len()), move |c| {
        c.move_slot(slot, to)
    })
    .await;
    let books = drill.books("hot", &seen).await;
    figures(
        "18",
        json!({
            "move_ms": took.as_millis() as u64,
            "unavailable_503": seen.unavailable,
            "p99_ms": seen.latency(0.99).as_millis() as u64,
            "slowest_answer_ms": seen.latency(1.0).as_millis() as u64,
            "acknowledged_after_move": resumed,
            "outcome": outcome,
            "books": books,
        }),
    );
    assert_ne!(from, to);
    assert_eq!(drill.master_of(&shard), to);
    assert!(resumed > 0, "selling did not go on after the move");
    outcome.assert_nothing_lost();
    books.assert_balanced(shards.len());
    drill.running.stop().await;
}
