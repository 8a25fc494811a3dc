//! The order pipeline on a real local Redis Cluster: one persister drains
//! sales that live on different masters into SQLite, and each audits clean.

use std::time::{Duration, Instant};

use seckill_engine::bench::race;
use seckill_engine::{Engine, PurchaseRequest, SaleSpec, Strategy};
use seckill_orders::{Persister, PersisterConfig, Store, audit};
use seckill_redis::Target;
use seckill_testkit::RedisCluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persister_drains_sales_on_every_master_and_each_audits_clean() {
    let cluster = RedisCluster::start(3, 1).unwrap();
    let target = Target::cluster(&cluster.addresses().join(",")).unwrap();
    let engine = Engine::connect_target(&target).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("orders.db").to_str().unwrap())
        .await
        .unwrap();

    let sales = cluster
        .one_id_per_master((0..1000).map(|i| format!("p{i}")), |id| {
            format!("seckill:{{sale:{id}}}:sale")
        })
        .unwrap();
    assert_eq!(sales.len(), 3);
    for id in &sales {
        engine.create_sale(&SaleSpec::new(id, 300)).await.unwrap();
        let purchaser = engine.purchaser(Strategy::Coalesced, id).await.unwrap();
        let buyers = (0..400)
            .map(|i| PurchaseRequest::new(&format!("u{i}")).request_id(&format!("{id}-{i}")))
            .collect();
        let race = race(&purchaser, buyers, 64, |_| {}).await;
        assert_eq!(race.outcomes.get("ok"), Some(&300), "{:?}", race.outcomes);
    }

    let config = PersisterConfig {
        consumer: "p1".to_owned(),
        housekeeping: Duration::from_millis(50),
        ..PersisterConfig::default()
    };
    let mut persister = Persister::with_target(&target, store.clone(), config)
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    for id in &sales {
        loop {
            persister.round().await.unwrap();
            let report = audit(&engine, &store, id).await.unwrap();
            if report.backlog == 0 {
                assert!(report.clean, "{report:?}");
                assert_eq!(report.orders_in_sql, 300);
                assert_eq!(report.orders_in_redis, 300);
                break;
            }
            assert!(Instant::now() < deadline, "{id} never drained: {report:?}");
        }
    }
}
