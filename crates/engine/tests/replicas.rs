//! `Durability::Replica` against a real master and two replicas: a
//! purchase is acknowledged only once every replica the master is in
//! touch with has it. With one frozen (SIGSTOP) the other alone does not
//! confirm: the sentinels choose whom to promote by offsets up to a second
//! old, and could choose the frozen one. Once the master has not heard
//! from it for over two seconds it is no longer waited for. A request
//! answered again, and a payment or cancellation, wait alike, whichever
//! connection they come on.

use std::time::{Duration, Instant};

use seckill_engine::{
    Durability, Engine, Error, OrderState, Outcome, PurchaseRequest, Purchaser, SaleSpec, Strategy,
    home_shard,
};
use seckill_testkit::RedisServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purchase_is_acknowledged_once_every_replica_in_touch_has_it() {
    let (master, replicas) = RedisServer::start_with_replicas(2).unwrap();
    let engine = durable(&master).await;
    engine.create_sale(&SaleSpec::new("d", 100)).await.unwrap();
    let purchaser = engine.purchaser(Strategy::Atomic, "d").await.unwrap();
    let buy = |user: &str| PurchaseRequest::new(user).request_id(&format!("req-{user}"));

    let both = purchaser.purchase(&buy("u0")).await.unwrap();
    assert!(matches!(both, Outcome::Ok(_)), "{both:?}");

    replicas[1].pause().unwrap();
    let frozen = Instant::now();
    let one = purchaser.purchase(&buy("u1")).await;
    assert!(
        frozen.elapsed() < Duration::from_secs(1),
        "the purchase took {:?}: the master may have stopped waiting for the frozen replica already",
        frozen.elapsed()
    );
    assert!(matches!(one, Err(Error::NotReplicated { .. })), "{one:?}");

    // Unheard of for over two seconds, the frozen replica is not waited
    // for: the same request again answers the order made, now confirmed.
    tokio::time::sleep(Duration::from_millis(3_500).saturating_sub(frozen.elapsed())).await;
    let again = purchaser.purchase(&buy("u1")).await.unwrap();
    assert!(matches!(again, Outcome::Duplicate(_)), "{again:?}");
    let fresh = purchaser.purchase(&buy("u2")).await.unwrap();
    assert!(matches!(fresh, Outcome::Ok(_)), "{fresh:?}");
    replicas[1].resume().unwrap();
}

/// An engine with `Durability::Replica` (500 ms) on `master`.
async fn durable(master: &RedisServer) -> Engine {
    Engine::connect(&master.url())
        .await
        .unwrap()
        // Not 200 ms: a live replica on a loaded test machine (the full
        // suite runs two tests at once on two cores) once took longer to
        // confirm a purchase. Under 1 s, which the frozen-replica test
        // needs its refusal within.
        .with_durability(Durability::Replica {
            timeout: Duration::from_millis(500),
        })
}

/// Waits until the replica has acknowledged every write `engine`'s
/// connection made: a `WAIT` on it answers at once from then on, however
/// far the master has gone since, until the connection sends another
/// command (Redis 7.0; later versions: another write).
async fn synced(engine: &Engine) {
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(5_000)
        .query_async(&mut engine.connection())
        .await
        .unwrap();
    assert_eq!(acked, 1, "the replica did not acknowledge");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_answered_again_on_another_connection_waits_for_the_replicas() {
    let (master, replicas) = RedisServer::start_with_replicas(1).unwrap();
    let (first, second) = (durable(&master).await, durable(&master).await);
    let strategies = [Strategy::Atomic, Strategy::Coalesced];
    let mut purchasers = Vec::new();
    for (i, strategy) in strategies.into_iter().enumerate() {
        let sale = format!("d{i}");
        first.create_sale(&SaleSpec::new(&sale, 100)).await.unwrap();
        purchasers.push((
            strategy,
            first.purchaser(strategy, &sale).await.unwrap(),
            second.purchaser(strategy, &sale).await.unwrap(),
        ));
    }

    // The buyer is told to retry; the retry reaches another instance,
    // whose connection wrote nothing since. Redis 7.0 counts for a `WAIT`
    // what the master held after the connection's last command, whatever
    // it was; later versions only after its last write, and there the
    // retry's `WAIT` would confirm at once an order no replica has, unless
    // the retry writes (its record again). On 7.0 this passes either way.
    synced(&second).await;
    replicas[0].pause().unwrap();
    for (strategy, one, other) in &purchasers {
        let req = PurchaseRequest::new("u0").request_id("req-u0");
        let made = one.purchase(&req).await;
        assert!(
            matches!(made, Err(Error::NotReplicated { .. })),
            "{strategy:?}: {made:?}"
        );
        let again = other.purchase(&req).await;
        assert!(
            matches!(again, Err(Error::NotReplicated { .. })),
            "{strategy:?}: {again:?}"
        );
    }
    // Sent with no request id, a purchase is made under one made for it,
    // which the refusal names: the buyer can retry too.
    let mut made_for = Vec::new();
    for (strategy, one, _) in &purchasers {
        match one.purchase(&PurchaseRequest::new("u1")).await {
            Err(Error::NotReplicated {
                request_id: Some(id),
                ..
            }) => made_for.push(id),
            other => panic!("{strategy:?}: {other:?}"),
        }
    }

    // Running again, the replica has them (once caught up): each retry
    // answers its order.
    replicas[0].resume().unwrap();
    for ((strategy, _, other), id) in purchasers.iter().zip(&made_for) {
        for req in [
            PurchaseRequest::new("u0").request_id("req-u0"),
            PurchaseRequest::new("u1").request_id(id),
        ] {
            let again = until_confirmed(|| other.purchase(&req)).await;
            assert!(
                matches!(again, Outcome::Duplicate(_)),
                "{strategy:?}: {again:?}"
            );
        }
    }
}

/// A sale of 100 units per production strategy, `<prefix>0` for `Atomic`
/// and `<prefix>1` for `Coalesced`, with its purchaser.
async fn a_sale_each(engine: &Engine, prefix: &str) -> Vec<(Strategy, String, Purchaser)> {
    let mut sales = Vec::new();
    for (i, strategy) in [Strategy::Atomic, Strategy::Coalesced]
        .into_iter()
        .enumerate()
    {
        let sale = format!("{prefix}{i}");
        engine
            .create_sale(&SaleSpec::new(&sale, 100))
            .await
            .unwrap();
        let purchaser = engine.purchaser(strategy, &sale).await.unwrap();
        sales.push((strategy, sale, purchaser));
    }
    sales
}

/// `call` again until no replica-wait refusal, at most 10 s: a replica
/// resumed from SIGSTOP takes a moment to catch up and answer.
async fn until_confirmed<T: std::fmt::Debug, F: Future<Output = seckill_engine::Result<T>>>(
    mut call: impl FnMut() -> F,
) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match call().await {
            Err(e @ (Error::NotReplicated { .. } | Error::SettlementNotReplicated(_)))
                if Instant::now() < deadline =>
            {
                eprintln!("{e}; again");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            answer => return answer.unwrap(),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payment_or_cancellation_is_acknowledged_once_every_replica_in_touch_has_it() {
    let (master, replicas) = RedisServer::start_with_replicas(1).unwrap();
    let (first, second) = (durable(&master).await, durable(&master).await);
    first.create_sale(&SaleSpec::new("p", 100)).await.unwrap();
    let purchaser = first.purchaser(Strategy::Atomic, "p").await.unwrap();
    let mut orders = Vec::new();
    for user in ["u0", "u1"] {
        // What is tested comes after: on a loaded machine a live replica
        // once missed the 500 ms here, so the same request is asked again.
        let req = PurchaseRequest::new(user).request_id(&format!("req-{user}"));
        let made = until_confirmed(|| purchaser.purchase(&req)).await;
        orders.push(made.order().expect("bought").order_id.clone());
    }
    assert_eq!(
        second.order(&orders[0]).await.unwrap().state,
        OrderState::PendingPayment
    );
    synced(&second).await;
    replicas[0].pause().unwrap();
    // The second time through another connection: done already, its state
    // is written again, the same, and the answer waits for the replica.
    for engine in [&first, &second] {
        let paid = engine.pay(&orders[0]).await;
        assert!(
            matches!(paid, Err(Error::SettlementNotReplicated(_))),
            "{paid:?}"
        );
        let cancelled = engine.cancel(&orders[1]).await;
        assert!(
            matches!(cancelled, Err(Error::SettlementNotReplicated(_))),
            "{cancelled:?}"
        );
    }

    replicas[0].resume().unwrap();
    let paid = until_confirmed(|| second.pay(&orders[0])).await;
    assert_eq!(paid, OrderState::Paid);
    let cancelled = until_confirmed(|| second.cancel(&orders[1])).await;
    assert_eq!(cancelled, OrderState::Cancelled);
}

/// The master's replication offset: it moves when something is written.
async fn written(engine: &Engine) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("replication")
        .query_async(&mut engine.connection())
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("master_repl_offset:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("an offset")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_answered_from_what_was_done_writes_it_again() {
    // What the test above leans on, and Redis 7.0 alone does not show
    // (its `WAIT` counts a connection's last command, write or not): a
    // retry answered from a record writes something, so a `WAIT` after it
    // covers the record on every version.
    let (master, _replicas) = RedisServer::start_with_replicas(1).unwrap();
    let engine = Engine::connect(&master.url()).await.unwrap();
    for (strategy, _, purchaser) in a_sale_each(&engine, "w").await {
        let req = PurchaseRequest::new("u0").request_id("again");
        purchaser.purchase(&req).await.unwrap();
        let before = written(&engine).await;
        let again = purchaser.purchase(&req).await.unwrap();
        assert!(
            matches!(again, Outcome::Duplicate(_)),
            "{strategy:?}: {again:?}"
        );
        assert!(
            written(&engine).await > before,
            "{strategy:?}: nothing written"
        );
    }
    let purchaser = engine.purchaser(Strategy::Atomic, "w0").await.unwrap();
    let order = |user: &str| {
        let purchaser = &purchaser;
        let req = PurchaseRequest::new(user);
        async move {
            let made = purchaser.purchase(&req).await.unwrap();
            made.order().expect("bought").order_id.clone()
        }
    };
    let (paid, cancelled) = (order("u1").await, order("u2").await);
    assert_eq!(engine.pay(&paid).await.unwrap(), OrderState::Paid);
    assert_eq!(
        engine.cancel(&cancelled).await.unwrap(),
        OrderState::Cancelled
    );
    for (order, done) in [
        (&paid, OrderState::Paid),
        (&cancelled, OrderState::Cancelled),
    ] {
        let before = written(&engine).await;
        let again = if done == OrderState::Paid {
            engine.pay(order).await
        } else {
            engine.cancel(order).await
        };
        assert_eq!(again.unwrap(), done);
        assert!(written(&engine).await > before, "{done:?}: nothing written");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_unit_returns_to_a_sharded_sale_though_no_replica_confirmed_it() {
    let (master, replicas) = RedisServer::start_with_replicas(1).unwrap();
    let engine = durable(&master).await;
    let id = "sharded";
    engine
        .create_sale(&SaleSpec::new(id, 4).shards(2))
        .await
        .unwrap();
    let purchaser = engine.purchaser(Strategy::Atomic, id).await.unwrap();
    let mut orders = Vec::new();
    for user in (0..)
        .map(|i| format!("b{i}"))
        .filter(|u| home_shard(u, 2) == 0)
    {
        match purchaser
            .purchase(&PurchaseRequest::new(&user))
            .await
            .unwrap()
        {
            Outcome::Ok(order) => orders.push(order),
            Outcome::SoldOut => break,
            other => panic!("{user}: {other:?}"),
        }
    }
    assert_eq!(orders.len(), 4);
    // How many times units came back (shard_restock.lua): what lets the
    // sale stop answering "sold out" to the other shard's buyers.
    let returns = || async {
        let n: Option<u64> = redis::cmd("HGET")
            .arg(format!("seckill:{{sale:{id}}}:sale"))
            .arg("returns")
            .query_async(&mut engine.connection())
            .await
            .unwrap();
        n.unwrap_or(0)
    };
    let before = returns().await;

    // The cancel is made on the master, unconfirmed: the caller hears 503,
    // but the unit is back, and the sale is told.
    replicas[0].pause().unwrap();
    let cancelled = engine.cancel(&orders[0].order_id).await;
    let after = returns().await;
    replicas[0].resume().unwrap();
    assert!(
        matches!(cancelled, Err(Error::SettlementNotReplicated(_))),
        "{cancelled:?}"
    );
    assert_eq!(after, before + 1, "the sale was not told of the unit back");
}

/// A purchase sent with no request id that Redis did not answer in time
/// (paused longer than the engine waits) still runs once Redis does: the
/// error names the id made for it, and a retry with that id answers the
/// order made, not a second one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purchase_redis_did_not_answer_names_the_id_to_retry_with() {
    let (master, _replicas) = RedisServer::start_with_replicas(1).unwrap();
    let engine = durable(&master).await;
    for (strategy, sale, purchaser) in a_sale_each(&engine, "q").await {
        let paused = Instant::now();
        let pause = seckill_redis::RESPONSE_TIMEOUT + Duration::from_secs(1);
        let () = redis::cmd("CLIENT")
            .arg("PAUSE")
            .arg(pause.as_millis() as u64)
            .arg("ALL")
            .query_async(&mut engine.connection())
            .await
            .unwrap();
        let id = match purchaser.purchase(&PurchaseRequest::new("u")).await {
            Err(Error::Unanswered { request_id, .. }) => request_id,
            other => panic!("{strategy:?}: {other:?}"),
        };
        tokio::time::sleep(pause.saturating_sub(paused.elapsed())).await;
        let again = PurchaseRequest::new("u").request_id(&id);
        let answered = until_confirmed(|| purchaser.purchase(&again)).await;
        assert!(
            matches!(answered, Outcome::Duplicate(_)),
            "{strategy:?}: {answered:?}"
        );
        let sold = engine.sale(&sale).await.unwrap().sold;
        assert_eq!(sold, 1, "{strategy:?}: bought twice");
    }
}
