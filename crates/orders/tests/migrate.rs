//! A database made by an older seckill keeps its data through the schema's
//! changes: each migration is run over rows the ones before it wrote.

use seckill_engine::{Rule, Rules};
use seckill_orders::Store;
use sqlx::migrate::Migrator;
use sqlx::sqlite::SqliteConnectOptions;

/// The sale rules, once three columns, move into one JSON object with
/// their values (SQLite; the same migration exists for each database).
#[tokio::test]
async fn rules_columns_move_into_the_rules_object() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let options = SqliteConnectOptions::new()
        .filename(&path)
        .create_if_missing(true);
    let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
    let mut old = sqlx::migrate!("./migrations/sqlite");
    let before = old
        .migrations
        .iter()
        .position(|m| m.description.contains("sale rules"))
        .expect("the rules migration");
    old.migrations = old.migrations[..before].to_vec().into();
    Migrator::run(&old, &pool).await.unwrap();
    for (id, limit, start) in [("limited", Some(2), None), ("open", None, Some(1_000))] {
        sqlx::query(
            "INSERT INTO sales (id, name, stock, per_user_limit, starts_at_ms, ends_at_ms, \
             payment_timeout_secs, generation) VALUES (?, ?, 10, ?, ?, NULL, 900, 1)",
        )
        .bind(id)
        .bind(id)
        .bind(limit)
        .bind(start)
        .execute(&pool)
        .await
        .unwrap();
    }
    pool.close().await;

    let store = Store::open(path.to_str().unwrap()).await.unwrap();
    let limited = store.sale("limited").await.unwrap().unwrap();
    assert_eq!(
        limited.rules,
        Rules::default().with(Rule::PerUserLimit, Some(2))
    );
    let open = store.sale("open").await.unwrap().unwrap();
    assert_eq!(
        open.rules,
        Rules::default().with(Rule::StartsAt, Some(1_000))
    );
}
