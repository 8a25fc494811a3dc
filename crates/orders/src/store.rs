//! The SQL copy of the orders: SQLite (a file path) or PostgreSQL (a
//! `postgres://` URL), one schema, migrations in `migrations/`.

use std::time::Duration;

use seckill_engine::{Event, OrderState, Sale};
use sqlx::AnyPool;
use sqlx::any::{AnyPoolOptions, install_default_drivers};

use crate::error::{Error, Result};

/// Several persisters may share one file: wait for the writer instead of
/// failing, and let readers run beside it (WAL). A commit survives a process
/// crash (WAL + NORMAL).
const SQLITE_PRAGMAS: [&str; 3] = [
    "PRAGMA busy_timeout = 10000",
    "PRAGMA journal_mode = WAL",
    "PRAGMA synchronous = NORMAL",
];

/// Rows per multi-row statement: well inside both databases' parameter limits.
const CHUNK: usize = 500;

/// An order as SQL holds it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, sqlx::FromRow)]
pub struct StoredOrder {
    pub order_id: String,
    pub sale_id: String,
    pub generation: i64,
    pub user_id: String,
    pub quantity: i64,
    pub request_id: Option<String>,
    pub state: String,
    pub created_ms: i64,
    pub updated_ms: i64,
}

/// A sale as SQL holds it.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct StoredSale {
    pub id: String,
    pub name: String,
    pub stock: i64,
    pub per_user_limit: Option<i64>,
    pub starts_at_ms: Option<i64>,
    pub ends_at_ms: Option<i64>,
    pub payment_timeout_secs: i64,
    pub generation: i64,
}

/// A pool on the order database. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Store {
    pool: AnyPool,
    postgres: bool,
}

impl Store {
    /// Opens `target` (a `postgres://` URL, a `sqlite:` URL, or a file
    /// path for SQLite, created if missing) and brings its schema up to date.
    pub async fn open(target: &str) -> Result<Self> {
        install_default_drivers();
        let postgres = target.starts_with("postgres://") || target.starts_with("postgresql://");
        let url = if postgres || target.starts_with("sqlite:") {
            target.to_owned()
        } else if target.is_empty() {
            return Err(Error::Invalid {
                what: "database",
                reason: "empty path".to_owned(),
            });
        } else {
            format!("sqlite://{target}?mode=rwc")
        };
        let pool = AnyPoolOptions::new()
            .max_connections(if postgres { 8 } else { 4 })
            .acquire_timeout(Duration::from_secs(5))
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    if !postgres {
                        for pragma in SQLITE_PRAGMAS {
                            sqlx::query(pragma).execute(&mut *conn).await?;
                        }
                    }
                    Ok(())
                })
            })
            .connect(&url)
            .await?;
        migrate(&pool).await?;
        Ok(Self { pool, postgres })
    }

    /// Whether this is PostgreSQL (else SQLite).
    pub fn is_postgres(&self) -> bool {
        self.postgres
    }

    /// Applies order events in one transaction. Idempotent and indifferent
    /// to order: a purchase inserts its order, or fills in its request id and
    /// creation time if a later event got there first, never touching its
    /// state; a pay, cancel or expiry moves a pending order (or inserts it,
    /// if its purchase has not arrived yet) and never an order already settled.
    pub async fn apply(&self, events: &[Event]) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        let (purchases, settled): (Vec<&Event>, Vec<&Event>) = events
            .iter()
            .partition(|e| e.state == OrderState::PendingPayment);
        for (rows, conflict) in [
            // A purchase that arrives after its pay/cancel/expiry (another
            // consumer reclaimed it late) fills in what only it carries.
            (
                purchases,
                "DO UPDATE SET request_id = excluded.request_id, created_ms = excluded.created_ms",
            ),
            (
                settled,
                "DO UPDATE SET state = excluded.state, updated_ms = excluded.updated_ms \
                 WHERE orders.state = 'pending_payment'",
            ),
        ] {
            for chunk in dedup_last(rows).chunks(CHUNK) {
                let mut sql = String::from(
                    "INSERT INTO orders (order_id, sale_id, generation, user_id, quantity, \
                     request_id, state, created_ms, updated_ms) VALUES ",
                );
                for i in 0..chunk.len() {
                    if i > 0 {
                        sql.push(',');
                    }
                    sql.push_str(&self.row_placeholders(i * 9, 9));
                }
                sql.push_str(" ON CONFLICT (order_id) ");
                sql.push_str(conflict);
                let mut query = sqlx::query(&sql);
                for e in chunk {
                    query = query
                        .bind(&e.order_id)
                        .bind(&e.sale_id)
                        .bind(e.generation)
                        .bind(&e.user_id)
                        .bind(e.quantity)
                        .bind(e.request_id.clone())
                        .bind(e.state.as_str())
                        .bind(e.created_ms)
                        .bind(e.at_ms);
                }
                query.execute(&mut *tx).await?;
            }
        }
        tx.commit().await?;
        Ok(())
    }

    /// `(?, ?, …)` for SQLite, `($n, $n+1, …)` for PostgreSQL. SQLite's
    /// numbered parameters get slow in statements with thousands of them.
    fn row_placeholders(&self, first: usize, n: usize) -> String {
        let params: Vec<String> = (first + 1..=first + n)
            .map(|i| {
                if self.postgres {
                    format!("${i}")
                } else {
                    "?".to_owned()
                }
            })
            .collect();
        format!("({})", params.join(", "))
    }

    /// Records a sale (or its new generation, if the id was reused).
    pub async fn upsert_sale(&self, sale: &Sale) -> Result<()> {
        sqlx::query(
            "INSERT INTO sales (id, name, stock, per_user_limit, starts_at_ms, ends_at_ms, \
             payment_timeout_secs, generation) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
             ON CONFLICT (id) DO UPDATE SET name = excluded.name, stock = excluded.stock, \
             per_user_limit = excluded.per_user_limit, starts_at_ms = excluded.starts_at_ms, \
             ends_at_ms = excluded.ends_at_ms, payment_timeout_secs = excluded.payment_timeout_secs, \
             generation = excluded.generation",
        )
        .bind(&sale.id)
        .bind(&sale.name)
        .bind(sale.stock as i64)
        .bind(sale.per_user_limit.map(i64::from))
        .bind(sale.starts_at_ms.map(|v| v as i64))
        .bind(sale.ends_at_ms.map(|v| v as i64))
        .bind(sale.payment_timeout_secs as i64)
        .bind(sale.generation as i64)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn sale(&self, id: &str) -> Result<Option<StoredSale>> {
        Ok(sqlx::query_as(
            "SELECT id, name, stock, per_user_limit, starts_at_ms, ends_at_ms, \
             payment_timeout_secs, generation FROM sales WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Orders of one generation of a sale, by order id.
    pub async fn orders(&self, sale_id: &str, generation: i64) -> Result<Vec<StoredOrder>> {
        Ok(sqlx::query_as(&format!(
            "{SELECT_ORDER} WHERE sale_id = $1 AND generation = $2 ORDER BY order_id"
        ))
        .bind(sale_id)
        .bind(generation)
        .fetch_all(&self.pool)
        .await?)
    }

    /// A page of a sale's orders, optionally of one user, after order id
    /// `after` (exclusive), at most `limit`.
    pub async fn orders_page(
        &self,
        sale_id: &str,
        user_id: Option<&str>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<StoredOrder>> {
        Ok(sqlx::query_as(&format!(
            "{SELECT_ORDER} WHERE sale_id = $1 AND ($2 IS NULL OR user_id = $2) \
             AND ($3 IS NULL OR order_id > $3) ORDER BY order_id LIMIT $4"
        ))
        .bind(sale_id)
        .bind(user_id)
        .bind(after)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?)
    }

    /// Raw access for tests and tools that plant faults.
    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// Reachable now?
    pub async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }
}

/// Brings the schema up to date. SQLite has no migration lock, so two
/// processes opening a fresh file at once can collide; the loser retries and
/// then finds the work done.
async fn migrate(pool: &AnyPool) -> Result<()> {
    let migrator = sqlx::migrate!("./migrations");
    let mut attempt = 0;
    loop {
        match migrator.run(pool).await {
            Ok(()) => return Ok(()),
            Err(e) if attempt < 5 => {
                attempt += 1;
                tracing::debug!(error = %e, attempt, "migration collided; retrying");
                tokio::time::sleep(Duration::from_millis(100 * attempt)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

const SELECT_ORDER: &str = "SELECT order_id, sale_id, generation, user_id, quantity, request_id, \
     state, created_ms, updated_ms FROM orders";

/// The last event per order id: one statement may not touch a row twice.
fn dedup_last(events: Vec<&Event>) -> Vec<&Event> {
    let mut seen = std::collections::HashSet::new();
    let mut kept: Vec<&Event> = events
        .into_iter()
        .rev()
        .filter(|e| seen.insert(e.order_id.as_str()))
        .collect();
    kept.reverse();
    kept
}
