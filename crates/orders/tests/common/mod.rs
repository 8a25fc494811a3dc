//! Helpers shared by the test binaries: throwaway databases on the local
//! PostgreSQL and MySQL/MariaDB servers, and buyers.
#![allow(dead_code)]

use std::time::Duration;

use seckill_engine::bench::race;
use seckill_engine::{Engine, PurchaseRequest, Strategy};
use seckill_orders::{Error, PersisterConfig, Store, wait_drained};
use seckill_testkit::RedisServer;

/// A private redis-server, an engine on it and a SQLite store in a
/// throwaway folder.
pub struct Rig {
    pub server: RedisServer,
    pub engine: Engine,
    pub store: Store,
    _dir: tempfile::TempDir,
}

pub async fn rig() -> Rig {
    let server = RedisServer::start().unwrap();
    let engine = Engine::connect(&server.url()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("orders.db").to_str().unwrap())
        .await
        .unwrap();
    Rig {
        server,
        engine,
        store,
        _dir: dir,
    }
}

/// A persister named `consumer` that takes over what another left after
/// 200 ms, looking every 50 ms, in batches of 500.
pub fn persister_config(consumer: &str) -> PersisterConfig {
    PersisterConfig {
        consumer: consumer.to_owned(),
        batch: 500,
        claim_idle: Duration::from_millis(200),
        housekeeping: Duration::from_millis(50),
        ..PersisterConfig::default()
    }
}

/// `buyers` purchases of `sale` with `strategy`, by users u0, u1, …, each
/// with a request id never used before; answers the order ids.
pub async fn buy(engine: &Engine, strategy: Strategy, sale: &str, buyers: usize) -> Vec<String> {
    let purchaser = engine.purchaser(strategy, sale).await.unwrap();
    let batch = rand::random::<u32>();
    let requests = (0..buyers)
        .map(|i| PurchaseRequest::new(&format!("u{i}")).request_id(&format!("r{batch}-{i}")))
        .collect();
    let race = race(&purchaser, requests, 256, |_| {}).await;
    race.demand
        .acknowledged
        .into_iter()
        .map(|o| o.order_id)
        .collect()
}

/// A database server the tests may use: PostgreSQL or MySQL/MariaDB.
#[derive(Clone, Copy)]
pub enum Server {
    Postgres,
    Mysql,
}

impl Server {
    /// The admin URL: `DATABASE_URL` / `MYSQL_URL` if set, else the local
    /// server's test database.
    fn base(self) -> String {
        let (var, scheme, local) = match self {
            Self::Postgres => (
                "DATABASE_URL",
                "postgres",
                "postgres://postgres@127.0.0.1:5432/test",
            ),
            Self::Mysql => ("MYSQL_URL", "mysql", "mysql://root@127.0.0.1:3306/test"),
        };
        std::env::var(var)
            .ok()
            .filter(|u| u.starts_with(scheme))
            .unwrap_or_else(|| local.to_owned())
    }
}

/// A fresh database on `server` for one test, dropped with the guard;
/// `None` (the test says it is skipped) when the server is not reachable.
pub async fn server_database(server: Server) -> Option<(Store, ServerDatabase)> {
    let base = server.base();
    sqlx::any::install_default_drivers();
    let skipped = || {
        let (name, var) = match server {
            Server::Postgres => ("PostgreSQL", "DATABASE_URL"),
            Server::Mysql => ("MySQL/MariaDB", "MYSQL_URL"),
        };
        eprintln!("skipped: {name} not reachable (set {var})");
    };
    let Ok(Ok(admin)) =
        tokio::time::timeout(Duration::from_secs(3), sqlx::AnyPool::connect(&base)).await
    else {
        skipped();
        return None;
    };
    let name = format!("seckill_test_{:08x}", rand::random::<u32>());
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&admin)
        .await
        .ok()?;
    let (prefix, _) = base.rsplit_once('/')?;
    let store = Store::open(&format!("{prefix}/{name}")).await.ok()?;
    let drop = match server {
        Server::Postgres => format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
        Server::Mysql => format!("DROP DATABASE IF EXISTS {name}"),
    };
    admin.close().await;
    Some((store, ServerDatabase { base, drop }))
}

pub struct ServerDatabase {
    base: String,
    drop: String,
}

/// Drops the database on a thread and runtime of its own: the test's
/// runtime is shutting down when this runs, and would never run a task.
impl Drop for ServerDatabase {
    fn drop(&mut self) {
        let (base, drop) = (self.base.clone(), self.drop.clone());
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                if let Ok(admin) = sqlx::AnyPool::connect(&base).await {
                    let _ = sqlx::query(&drop).execute(&admin).await;
                    admin.close().await;
                }
            });
        });
        let _ = dropped.join();
    }
}

/// Asserts where what sale `sale` has not yet put in SQL waits, as a drain
/// given up at once reports it: `in_stream` entries of its own stream,
/// `told` through its master's ledgers.
pub async fn assert_left(engine: &Engine, sale: &str, in_stream: u64, told: u64) {
    match wait_drained(&mut engine.connection(), sale, Duration::ZERO).await {
        Err(Error::NotDrained {
            in_stream: s,
            told: t,
            ..
        }) => assert_eq!((s, t), (in_stream, told), "(in its stream, told)"),
        other => panic!("expected entries left, got {other:?}"),
    }
}
