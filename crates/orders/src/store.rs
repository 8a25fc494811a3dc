//! The SQL copy of the orders: SQLite (a file path) or PostgreSQL (a
//! `postgres://` URL), one schema, migrations in `migrations/<database>/`.
//!
//! The orders table has one index, its primary key: a sale's orders are a
//! range of it. Writing rows is the persister's largest cost, and each
//! index is paid on every row.

use std::sync::LazyLock;
use std::time::Duration;

use seckill_engine::{Event, OrderId, OrderState, Sale};
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

/// Rows per multi-row statement are powers of two up to this: well inside
/// both databases' parameter limits, and few enough statement shapes that
/// every one stays prepared in the connection's statement cache (sqlx keeps
/// 100): a batch of any size runs as statements already prepared.
const CHUNK_BITS: u32 = 9;

/// What an inserted row does to an order already there, and which values
/// each row binds.
#[derive(Clone, Copy)]
enum Upsert {
    /// A purchase that arrives after its pay/cancel/expiry (another persister
    /// took its batch over late) fills in what only it carries. A statement
    /// holds purchases of one sale generation, bound once, and a purchase
    /// happens when its order is created: a row binds five values, not
    /// nine (binding is most of SQLite's work per row after the insert).
    Purchase,
    /// A pay, cancel or expiry moves a pending order, never a settled one.
    Settle,
}

impl Upsert {
    const ALL: [Self; 2] = [Self::Purchase, Self::Settle];

    /// What `ON CONFLICT (order_id)` does for this kind of row.
    fn conflict(self) -> &'static str {
        match self {
            Self::Purchase => {
                "DO UPDATE SET request_id = excluded.request_id, created_ms = excluded.created_ms"
            }
            Self::Settle => {
                "DO UPDATE SET state = excluded.state, updated_ms = excluded.updated_ms \
                 WHERE orders.state = 'pending_payment'"
            }
        }
    }
}

/// The largest power of two rows, up to 2^CHUNK_BITS, within `n`.
fn chunk_len(n: usize) -> usize {
    let most = 1 << CHUNK_BITS;
    if n >= most { most } else { 1 << n.ilog2() }
}

/// The multi-row upsert of 2^k rows (k ≤ CHUNK_BITS), built once.
fn statement(postgres: bool, upsert: Upsert, rows: usize) -> &'static str {
    type Key = (bool, u8, u32);
    static STATEMENTS: LazyLock<std::collections::HashMap<Key, String>> = LazyLock::new(|| {
        let mut all = std::collections::HashMap::new();
        for postgres in [false, true] {
            for upsert in Upsert::ALL {
                for k in 0..=CHUNK_BITS {
                    let sql = upsert_sql(postgres, upsert, 1 << k);
                    all.insert((postgres, upsert as u8, k), sql);
                }
            }
        }
        all
    });
    &STATEMENTS[&(postgres, upsert as u8, rows.ilog2())]
}

const ORDER_COLUMNS: &str = "order_id, sale_id, generation, user_id, quantity, request_id, \
     state, created_ms, updated_ms";

/// The upsert of `rows` rows: `?` parameters for SQLite (its numbered
/// parameters get slow in statements with thousands of them), `$n` for
/// PostgreSQL, whose first row casts the numbers (a `VALUES` list in a
/// `SELECT` takes its column types from it).
///
/// - Purchases: `INSERT … SELECT` from a `VALUES` list of (order id,
///   user, quantity, request id, created) with the sale and generation
///   bound once and the state a constant.
/// - Settlements: `INSERT … VALUES` of all nine columns.
fn upsert_sql(postgres: bool, upsert: Upsert, rows: usize) -> String {
    let mut n = 0;
    let mut param = |cast: &str| {
        n += 1;
        if postgres {
            format!("${n}{cast}")
        } else {
            "?".to_owned()
        }
    };
    let mut sql = format!("INSERT INTO orders ({ORDER_COLUMNS}) ");
    let casts: &[&str] = match upsert {
        Upsert::Purchase => {
            let (sale, generation) = (param("::text"), param("::bigint"));
            let c = if postgres {
                ["v.o", "v.u", "v.q", "v.r", "v.c"]
            } else {
                ["column1", "column2", "column3", "column4", "column5"]
            };
            sql.push_str(&format!(
                "SELECT {}, {sale}, {generation}, {}, {}, {}, 'pending_payment', {}, {} FROM (VALUES ",
                c[0], c[1], c[2], c[3], c[4], c[4]
            ));
            &["", "", "::bigint", "", "::bigint"]
        }
        Upsert::Settle => {
            sql.push_str("VALUES ");
            &[
                "", "", "::bigint", "", "::bigint", "", "", "::bigint", "::bigint",
            ]
        }
    };
    for row in 0..rows {
        sql.push_str(if row > 0 { ",(" } else { "(" });
        for (i, cast) in casts.iter().enumerate() {
            if i > 0 {
                sql.push(',');
            }
            sql.push_str(&param(if row == 0 { cast } else { "" }));
        }
        sql.push(')');
    }
    if let Upsert::Purchase = upsert {
        // SQLite needs the WHERE to tell the upsert clause from a join's ON.
        sql.push_str(if postgres {
            ") AS v (o, u, q, r, c)"
        } else {
            ") WHERE true"
        });
    }
    sql.push_str(" ON CONFLICT (order_id) ");
    sql.push_str(upsert.conflict());
    sql
}

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
    /// The order's state, as [`OrderState::as_str`] spells it.
    pub state: String,
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
    /// Units one user may buy; `None` for no limit.
    pub per_user_limit: Option<i64>,
    /// Start, ms since the Unix epoch; `None` if open from creation.
    pub starts_at_ms: Option<i64>,
    /// End, ms since the Unix epoch; `None` for "until sold out".
    pub ends_at_ms: Option<i64>,
    /// How long a buyer has to pay before the order expires.
    pub payment_timeout_secs: i64,
    /// The latest generation recorded (creation time in ms): a reused id
    /// overwrites the row.
    pub generation: i64,
}

/// A pool on the order database. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Store {
    pool: AnyPool,
    postgres: bool,
}

impl Store {
    /// Opens `target` (a `postgres://` URL; for SQLite a file path,
    /// `sqlite:PATH` or `sqlite://PATH`, the file created if missing) and
    /// brings its schema up to date.
    pub async fn open(target: &str) -> Result<Self> {
        install_default_drivers();
        let postgres = target.starts_with("postgres://") || target.starts_with("postgresql://");
        let url = if postgres {
            target.to_owned()
        } else {
            sqlite_url(target)?
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
        migrate(&pool, postgres).await?;
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
        for (rows, upsert) in [(purchases, Upsert::Purchase), (settled, Upsert::Settle)] {
            let rows = dedup_last(rows);
            // A purchase statement binds its sale generation once.
            let same = |a: &&Event, b: &&Event| {
                matches!(upsert, Upsert::Settle)
                    || (a.sale_id == b.sale_id && a.generation == b.generation)
            };
            for run in rows.chunk_by(same) {
                let mut rest = run;
                while let Some(first) = rest.first() {
                    let n = chunk_len(rest.len());
                    let (chunk, tail) = rest.split_at(n);
                    rest = tail;
                    let mut query = sqlx::query(statement(self.postgres, upsert, n));
                    if let Upsert::Purchase = upsert {
                        query = query.bind(&first.sale_id).bind(first.generation);
                    }
                    for e in chunk {
                        query = query.bind(&e.order_id);
                        query = match upsert {
                            Upsert::Purchase => query
                                .bind(&e.user_id)
                                .bind(e.quantity)
                                .bind(e.request_id.as_deref())
                                .bind(e.created_ms),
                            Upsert::Settle => query
                                .bind(&e.sale_id)
                                .bind(e.generation)
                                .bind(&e.user_id)
                                .bind(e.quantity)
                                .bind(e.request_id.as_deref())
                                .bind(e.state.as_str())
                                .bind(e.created_ms)
                                .bind(e.at_ms),
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

    /// Sale `id` as last recorded; `None` if SQL has never seen it.
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
        // A range of the primary key: the table has no other index.
        let (low, high) = OrderId::bounds(sale_id, u64::try_from(generation).ok());
        Ok(sqlx::query_as(&format!(
            "{SELECT_ORDER} WHERE order_id > $1 AND order_id < $2 AND sale_id = $3 \
             AND generation = $4 ORDER BY order_id"
        ))
        .bind(low)
        .bind(high)
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
        let (low, high) = OrderId::bounds(sale_id, None);
        let low = after.map_or(low.clone(), |a| a.max(low.as_str()).to_owned());
        Ok(sqlx::query_as(&format!(
            "{SELECT_ORDER} WHERE order_id > $1 AND order_id < $2 AND sale_id = $3 \
             AND ($4 IS NULL OR user_id = $4) ORDER BY order_id LIMIT $5"
        ))
        .bind(low)
        .bind(high)
        .bind(sale_id)
        .bind(user_id)
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

/// The sqlx URL of a SQLite target given as a plain path, `sqlite:PATH` or
/// `sqlite://PATH` (query parameters kept), with the file and its folder
/// created when missing, as an operator expects of every form.
fn sqlite_url(target: &str) -> Result<String> {
    let rest = target
        .strip_prefix("sqlite://")
        .or_else(|| target.strip_prefix("sqlite:"))
        .unwrap_or(target);
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    if path.is_empty() {
        return Err(Error::Invalid {
            what: "database",
            reason: "empty path".to_owned(),
        });
    }
    if path != ":memory:"
        && let Some(folder) = std::path::Path::new(path).parent()
        && !folder.as_os_str().is_empty()
    {
        std::fs::create_dir_all(folder).map_err(|e| Error::Invalid {
            what: "database",
            reason: format!("cannot create the folder {}: {e}", folder.display()),
        })?;
    }
    let mut params: Vec<&str> = query.split('&').filter(|p| !p.is_empty()).collect();
    if !params.iter().any(|p| p.starts_with("mode=")) {
        params.push("mode=rwc");
    }
    Ok(format!("sqlite://{path}?{}", params.join("&")))
}

/// Brings the schema up to date. SQLite has no migration lock, so two
/// processes opening a fresh file at once can collide; the loser retries and
/// then finds the work done.
async fn migrate(pool: &AnyPool, postgres: bool) -> Result<()> {
    // One set per database: the schemas differ where each is fastest.
    let migrator = if postgres {
        sqlx::migrate!("./migrations/postgres")
    } else {
        sqlx::migrate!("./migrations/sqlite")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_batch_splits_into_the_few_prepared_statement_sizes() {
        for n in [1, 2, 3, 7, 511, 512, 513, 1_600, 2_000] {
            let mut rest = n;
            let mut sizes = Vec::new();
            while rest > 0 {
                let k = chunk_len(rest);
                assert!(k.is_power_of_two() && k <= 1 << CHUNK_BITS, "{n}: {k}");
                sizes.push(k);
                rest -= k;
            }
            assert!(
                sizes.len() <= n / 512 + CHUNK_BITS as usize + 1,
                "{n}: {sizes:?}"
            );
        }
    }

    #[test]
    fn each_statement_binds_its_rows_in_its_dialect() {
        for k in 0..=CHUNK_BITS {
            let rows = 1 << k;
            for upsert in Upsert::ALL {
                let params = match upsert {
                    Upsert::Purchase => 2 + 5 * rows,
                    Upsert::Settle => 9 * rows,
                };
                let sqlite = statement(false, upsert, rows);
                assert_eq!(sqlite.matches('?').count(), params);
                let postgres = statement(true, upsert, rows);
                assert!(postgres.contains(&format!("${params}")));
                assert!(!postgres.contains(&format!("${}", params + 1)));
            }
            let settle = statement(false, Upsert::Settle, rows);
            assert!(settle.ends_with("WHERE orders.state = 'pending_payment'"));
            let purchase = statement(true, Upsert::Purchase, rows);
            assert!(purchase.ends_with("created_ms = excluded.created_ms"));
        }
    }
}
