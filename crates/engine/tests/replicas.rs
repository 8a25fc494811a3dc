//! `Durability::Replica` against a real master and two replicas: a
//! purchase is acknowledged only once every replica the master is in
//! touch with has it. With one frozen (SIGSTOP) the other alone does not
//! confirm: the sentinels choose whom to promote by offsets up to a second
//! old, and could choose the frozen one. Once the master has not heard
//! from it for over two seconds it is no longer waited for.

use std::time::{Duration, Instant};

use seckill_engine::{Durability, Engine, Error, Outcome, PurchaseRequest, SaleSpec, Strategy};
use seckill_testkit::RedisServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purchase_is_acknowledged_once_every_replica_in_touch_has_it() {
    let (master, replicas) = RedisServer::start_with_replicas(2).unwrap();
    let engine = Engine::connect(&master.url())
        .await
        .unwrap()
        .with_durability(Durability::Replica {
            timeout: Duration::from_millis(200),
        });
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
    assert!(matches!(one, Err(Error::NotReplicated(_))), "{one:?}");

    // Unheard of for over two seconds, the frozen replica is not waited
    // for: the same request again answers the order made, now confirmed.
    tokio::time::sleep(Duration::from_millis(3_500).saturating_sub(frozen.elapsed())).await;
    let again = purchaser.purchase(&buy("u1")).await.unwrap();
    assert!(matches!(again, Outcome::Duplicate(_)), "{again:?}");
    let fresh = purchaser.purchase(&buy("u2")).await.unwrap();
    assert!(matches!(fresh, Outcome::Ok(_)), "{fresh:?}");
    replicas[1].resume().unwrap();
}
