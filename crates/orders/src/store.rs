//! The SQL copy of the orders: SQLite (a file path or `sqlite:` URL),
//! PostgreSQL (`postgres://`) or MySQL 8 / MariaDB (`mysql://`), one
//! schema, migrations in `migrations/<database>/`.
//!
//! The orders table has one index, its primary key: a sale's orders are a
//! range of it. Writing rows is the persister's largest cost, and each
//! index is paid on every row.

use std::time::Duration;

use seckill_engine::{Event, OrderId, OrderState, Rules, Sale};
use sqlx::AnyPool;
use sqlx::any::{AnyPoolOptions, install_default_drivers};

use crate::dialect::{Dialect, Upsert, chunk_len, statement};
use crate::error::Result;

/// Several persisters may share one file: wait for the writer instead of
/// failing, and let readers run beside it (WAL). A commit survives a process
/// crash (WAL + NORMAL).
const SQLITE_PRAGMAS: [&str; 3] = [
    "PRAGMA busy_timeout = 10000",
    "PRAGMA journal_mode = WAL",
    "PRAGMA synchronous = NORMAL",
];

/// An order as SQL holds it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, sqlx::FromRow)]
pub struct StoredOrder {
    /// The order id, as [`OrderId`] formats it; the primary key.
    pub order_id: String,
    /// The sale it belongs to.
    pub sale_id: String,
    /// The sale's generation (creation time in ms) it was bought in.
    pub generation: i64,
    /// The buyer.
    pub user_id: String,
    /// Units of the order.
    pub quantity: i64,
    /// The purchase's request id; `None` if it had none, or if its purchase
    /// event has not been persisted yet.
    pub request_id: Option<String>,
    /// The order's state (stored as [`OrderState::as_str`] spells it).
    #[sqlx(try_from = "String")]
    pub state: OrderState,
    /// When the order was bought, ms since the Unix epoch.
    pub created_ms: i64,
    /// When its latest persisted event happened, ms since the Unix epoch.
    pub updated_ms: i64,
}

/// A sale as SQL holds it.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct StoredSale {
    /// The sale id.
    pub id: String,
    /// Display name.
    pub name: String,
    /// Units the sale was created with.
    pub stock: i64,
    /// Its purchase rules (stored as the JSON of [`Rules::to_json`]).
    #[sqlx(try_from = "String")]
    pub rules: Rules,
    /// How long a buyer has to pay before the order expires.
    pub payment_timeout_secs: i64,
    /// The latest generation recorded (creation time in ms): a reused id
    /// overwrites the row.
    pub generation: i64,
    /// When the sale was archived (its Redis keys removed); `None` while it
    /// lives in Redis.
    pub archived_ms: Option<i64>,
    /// Units sold (paid for) when it was archived.
    pub archived_sold: Option<i64>,
    /// A sharded sale's shards' ids, comma-separated, in order; `None` for
    /// a sale that is not sharded.
    pub shards: Option<String>,
}

/// A pool on the order database. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Store {
    pool: AnyPool,
    dialect: Dialect,
}

impl Store {
    /// Opens `target` (a `postgres://` URL; for SQLite a file path,
    /// `sqlite:PATH` or `sqlite://PATH`, the file created if missing) and
    /// brings its schema up to date.
    pub async fn open(target: &str) -> Result<Self> {
        install_default_drivers();
        let dialect = Dialect::of(target);
        let url = dialect.url(target)?;
        let sqlite = dialect == Dialect::Sqlite;
        let pool = AnyPoolOptions::new()
            // SQLite has one writer; the servers take a few in parallel.
            .max_connections(if sqlite { 4 } else { 8 })
            .acquire_timeout(Duration::from_secs(5))
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    if sqlite {
                        for pragma in SQLITE_PRAGMAS {
                            sqlx::query(pragma).execute(&mut *conn).await?;
                        }
                    }
                    Ok(())
                })
            })
            .connect(&url)
            .await?;
        migrate(&pool, dialect).await?;
        Ok(Self { pool, dialect })
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
        for (rows, upsert) in [(purchases, Upsert::Purchase), (settled, Upsert::Settle)] {
            let rows = dedup_last(rows);
            // A compact purchase statement binds its sale generation once.
            let compact = upsert.compact(self.dialect);
            let same = |a: &&Event, b: &&Event| {
                !compact || (a.sale_id == b.sale_id && a.generation == b.generation)
            };
            for run in rows.chunk_by(same) {
                let mut rest = run;
                while let Some(first) = rest.first() {
                    let n = chunk_len(rest.len());
                    let (chunk, tail) = rest.split_at(n);
                    rest = tail;
                    let mut query = sqlx::query(statement(self.dialect, upsert, n));
                    if compact {
                        query = query.bind(&first.sale_id).bind(first.generation);
                    }
                    for e in chunk {
                        query = query.bind(&e.order_id);
                        query = if compact {
                            query
                                .bind(&e.user_id)
                                .bind(e.quantity)
                                .bind(e.request_id.as_deref())
                                .bind(e.created_ms)
                        } else {
                            query
                                .bind(&e.sale_id)
                                .bind(e.generation)
                                .bind(&e.user_id)
                                .bind(e.quantity)
                                .bind(e.request_id.as_deref())
                                .bind(e.state.as_str())
                                .bind(e.created_ms)
                                .bind(e.at_ms)
                        };
                    }
                    query.execute(&mut *tx).await?;
                }
            }
        }
        tx.commit().await?;
        Ok(())
    }

    /// Records a sale (or its new generation, if the id was reused).
    pub async fn upsert_sale(&self, sale: &Sale) -> Result<()> {
        // A new generation of an id is live in Redis: not archived. The
        // same generation stays as it was: an admin change or a persister
        // recording it may race the archive of that very generation.
        let keep = |column: &str| match self.dialect {
            Dialect::Mysql => {
                format!("{column} = IF(generation = VALUES(generation), {column}, NULL)")
            }
            _ => format!(
                "{column} = CASE WHEN sales.generation = excluded.generation \
                 THEN sales.{column} END"
            ),
        };
        let generation = match self.dialect {
            Dialect::Mysql => "generation = VALUES(generation)",
            _ => "generation = excluded.generation",
        };
        // MySQL assigns in order: the archived columns read the old
        // generation before it is replaced.
        let sql = format!(
            "INSERT INTO sales (id, name, stock, rules, \
             payment_timeout_secs, generation, shards, archived_ms, archived_sold) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, NULL, NULL){}, {}, {}, {generation}",
            self.dialect.update(
                "id",
                &["name", "stock", "rules", "payment_timeout_secs", "shards",],
            ),
            keep("archived_ms"),
            keep("archived_sold"),
        );
        sqlx::query(&self.dialect.params(&sql))
            .bind(&sale.id)
            .bind(&sale.name)
            .bind(sale.stock as i64)
            .bind(sale.rules.to_json())
            .bind(sale.payment_timeout_secs as i64)
            .bind(sale.generation as i64)
            .bind(sale.sharding.as_ref().map(|s| {
                s.shards
                    .iter()
                    .map(|k| k.id.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            }))
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Sale `id` as last recorded; `None` if SQL has never seen it.
    pub async fn sale(&self, id: &str) -> Result<Option<StoredSale>> {
        Ok(
            sqlx::query_as(&self.dialect.params(&format!("{SELECT_SALE} WHERE id = $1")))
                .bind(id)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    /// Every sale SQL holds as live (not archived): id and generation.
    pub async fn live_sales(&self) -> Result<Vec<(String, i64)>> {
        Ok(
            sqlx::query_as("SELECT id, generation FROM sales WHERE archived_ms IS NULL")
                .fetch_all(&self.pool)
                .await?,
        )
    }

    /// Every archived sale, by id.
    pub async fn archived_sales(&self) -> Result<Vec<StoredSale>> {
        Ok(sqlx::query_as(&format!(
            "{SELECT_SALE} WHERE archived_ms IS NOT NULL ORDER BY id"
        ))
        .fetch_all(&self.pool)
        .await?)
    }

    /// Records generation `generation` of sale `id` as archived at `at_ms`
    /// having sold `sold` units; `false` if SQL holds another generation.
    pub async fn mark_archived(
        &self,
        id: &str,
        generation: i64,
        at_ms: i64,
        sold: i64,
    ) -> Result<bool> {
        let done = sqlx::query(&self.dialect.params(
            "UPDATE sales SET archived_ms = $1, archived_sold = $2 WHERE id = $3 AND generation = $4",
        ))
        .bind(at_ms)
        .bind(sold)
        .bind(id)
        .bind(generation)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// The order buyer `user_id` bought with request id `request_id` in
    /// generation `generation` of sale `sale_id`; `None` if none did. A
    /// scan of the sale's orders: for archived sales, whose retries are
    /// rare.
    pub async fn order_by_request(
        &self,
        sale_id: &str,
        generation: i64,
        user_id: &str,
        request_id: &str,
    ) -> Result<Option<StoredOrder>> {
        let (low, high) = OrderId::bounds(sale_id, u64::try_from(generation).ok());
        Ok(sqlx::query_as(&self.dialect.params(&format!(
            "{SELECT_ORDER} WHERE order_id > $1 AND order_id < $2 AND sale_id = $3 \
             AND user_id = $4 AND request_id = $5 LIMIT 1"
        )))
        .bind(low)
        .bind(high)
        .bind(sale_id)
        .bind(user_id)
        .bind(request_id)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// One order by id; `None` if SQL has none.
    pub async fn order(&self, order_id: &str) -> Result<Option<StoredOrder>> {
        Ok(sqlx::query_as(
            &self
                .dialect
                .params(&format!("{SELECT_ORDER} WHERE order_id = $1")),
        )
        .bind(order_id)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Records the payment side's reference for paid order `order_id`; the
    /// first one recorded stays (a webhook delivered twice changes nothing).
    pub async fn record_payment(&self, order_id: &str, reference: &str) -> Result<()> {
        let sql = match self.dialect {
            Dialect::Mysql => {
                "INSERT IGNORE INTO payments (order_id, payment_ref, paid_ms) VALUES (?, ?, ?)"
            }
            _ => {
                "INSERT INTO payments (order_id, payment_ref, paid_ms) VALUES ($1, $2, $3) \
                 ON CONFLICT (order_id) DO NOTHING"
            }
        };
        let now = crate::clock::now_ms() as i64;
        sqlx::query(sql)
            .bind(order_id)
            .bind(reference)
            .bind(now)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The payment reference recorded for `order_id`, if any.
    pub async fn payment_ref(&self, order_id: &str) -> Result<Option<String>> {
        Ok(sqlx::query_scalar(
            &self
                .dialect
                .params("SELECT payment_ref FROM payments WHERE order_id = $1"),
        )
        .bind(order_id)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Orders of one generation of a sale, by order id.
    pub async fn orders(&self, sale_id: &str, generation: i64) -> Result<Vec<StoredOrder>> {
        // A range of the primary key: the table has no other index.
        let (low, high) = OrderId::bounds(sale_id, u64::try_from(generation).ok());
        Ok(sqlx::query_as(&self.dialect.params(&format!(
            "{SELECT_ORDER} WHERE order_id > $1 AND order_id < $2 AND sale_id = $3 \
             AND generation = $4 ORDER BY order_id"
        )))
        .bind(low)
        .bind(high)
        .bind(sale_id)
        .bind(generation)
        .fetch_all(&self.pool)
        .await?)
    }

    /// How many orders of one generation of a sale SQL holds in each state
    /// (`pending_payment`, `paid`, `cancelled`, `expired`).
    ///
    /// ```no_run
    /// # async fn run(store: seckill_orders::Store) -> seckill_orders::Result<()> {
    /// let states = store.order_states("drop-1", 1_700_000_000_000).await?;
    /// println!("{} paid", states.get("paid").unwrap_or(&0));
    /// # Ok(()) }
    /// ```
    pub async fn order_states(
        &self,
        sale_id: &str,
        generation: i64,
    ) -> Result<std::collections::BTreeMap<String, u64>> {
        let (low, high) = OrderId::bounds(sale_id, u64::try_from(generation).ok());
        let rows: Vec<(String, i64)> = sqlx::query_as(&self.dialect.params(
            "SELECT state, COUNT(*) FROM orders WHERE order_id > $1 AND order_id < $2 \
             AND sale_id = $3 AND generation = $4 GROUP BY state",
        ))
        .bind(low)
        .bind(high)
        .bind(sale_id)
        .bind(generation)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(state, n)| (state, n.max(0) as u64))
            .collect())
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
        let (low, high) = OrderId::bounds(sale_id, None);
        let low = after.map_or(low.clone(), |a| a.max(low.as_str()).to_owned());
        let (user, limit_param) = match user_id {
            Some(_) => (" AND user_id = $4", "$5"),
            None => ("", "$4"),
        };
        let sql = format!(
            "{SELECT_ORDER} WHERE order_id > $1 AND order_id < $2 AND sale_id = $3{user} \
             ORDER BY order_id LIMIT {limit_param}"
        );
        let sql = self.dialect.params(&sql);
        let mut query = sqlx::query_as(&sql)
            .bind(low)
            .bind(high)
            .bind(sale_id.to_owned());
        if let Some(user) = user_id {
            query = query.bind(user.to_owned());
        }
        Ok(query.bind(i64::from(limit)).fetch_all(&self.pool).await?)
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
async fn migrate(pool: &AnyPool, dialect: Dialect) -> Result<()> {
    // One set per database: the schemas differ where each is fastest.
    let migrator = match dialect {
        Dialect::Postgres => sqlx::migrate!("./migrations/postgres"),
        Dialect::Mysql => sqlx::migrate!("./migrations/mysql"),
        Dialect::Sqlite => sqlx::migrate!("./migrations/sqlite"),
    };
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

const SELECT_SALE: &str = "SELECT id, name, stock, rules, payment_timeout_secs, generation, \
     archived_ms, archived_sold, shards FROM sales";

const SELECT_ORDER: &str = "SELECT order_id, sale_id, generation, user_id, quantity, request_id, \
     state, created_ms, updated_ms FROM orders";

/// The last event per order id: one statement may not touch a row twice.
fn dedup_last(events: Vec<&Event>) -> Vec<&Event> {
    // A persister's batch never repeats an order, and SipHash over its
    // thousands of ids was a tenth of the persister's own CPU.
    let mut seen = std::collections::HashSet::with_capacity_and_hasher(
        events.len(),
        foldhash::fast::RandomState::default(),
    );
    let mut kept: Vec<&Event> = events
        .into_iter()
        .rev()
        .filter(|e| seen.insert(e.order_id.as_str()))
        .collect();
    kept.reverse();
    kept
}
