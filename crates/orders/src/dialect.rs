//! What differs between the databases: how a target names one, how
//! parameters are written, what an upsert does to a row already there,
//! and the multi-row upserts of orders, built once per size so that every
//! one stays prepared.

use std::sync::LazyLock;

use crate::error::{Error, Result};

/// Rows per multi-row statement are powers of two up to this: well inside
/// both databases' parameter limits, and few enough statement shapes that
/// every one stays prepared in the connection's statement cache (sqlx keeps
/// 100): a batch of any size runs as statements already prepared.
const CHUNK_BITS: u32 = 9;

/// The SQL database behind a [`Store`], where their SQL differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
    Postgres,
    Mysql,
}

impl Dialect {
    const ALL: [Self; 3] = [Self::Sqlite, Self::Postgres, Self::Mysql];

    /// The database a target names: a `postgres://` or `mysql://` (or
    /// `mariadb://`) URL, else SQLite.
    pub(crate) fn of(target: &str) -> Self {
        if target.starts_with("postgres://") || target.starts_with("postgresql://") {
            Self::Postgres
        } else if target.starts_with("mysql://") || target.starts_with("mariadb://") {
            Self::Mysql
        } else {
            Self::Sqlite
        }
    }

    /// The URL sqlx connects to for `target`.
    pub(crate) fn url(self, target: &str) -> Result<String> {
        Ok(match self {
            Self::Sqlite => sqlite_url(target)?,
            // sqlx knows MariaDB by MySQL's scheme.
            Self::Mysql => target.replacen("mariadb://", "mysql://", 1),
            Self::Postgres => target.to_owned(),
        })
    }

    /// `$n` in `sql` as this database numbers parameters: MySQL takes `?`
    /// (every query here uses each parameter once, in order).
    pub(crate) fn params(self, sql: &str) -> String {
        if self != Self::Mysql {
            return sql.to_owned();
        }
        let mut out = String::with_capacity(sql.len());
        let mut chars = sql.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '$' && chars.peek().is_some_and(char::is_ascii_digit) {
                while chars.peek().is_some_and(char::is_ascii_digit) {
                    chars.next();
                }
                out.push('?');
            } else {
                out.push(c);
            }
        }
        out
    }

    /// What an upsert does to the row already there: `columns` take the
    /// inserted values.
    pub(crate) fn update(self, key: &str, columns: &[&str]) -> String {
        if self == Self::Mysql {
            let sets: Vec<String> = columns
                .iter()
                .map(|c| format!("{c} = VALUES({c})"))
                .collect();
            format!(" ON DUPLICATE KEY UPDATE {}", sets.join(", "))
        } else {
            let sets: Vec<String> = columns
                .iter()
                .map(|c| format!("{c} = excluded.{c}"))
                .collect();
            format!(" ON CONFLICT ({key}) DO UPDATE SET {}", sets.join(", "))
        }
    }
}

/// What an inserted row does to an order already there, and which values
/// each row binds.
#[derive(Clone, Copy)]
pub(crate) enum Upsert {
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

    /// Whether a row binds the compact purchase shape: five values, the
    /// sale generation bound once. Not on MySQL, whose `VALUES` lists
    /// cannot be selected from the same way in MariaDB.
    pub(crate) fn compact(self, dialect: Dialect) -> bool {
        matches!(self, Self::Purchase) && dialect != Dialect::Mysql
    }

    /// What the upsert does to an order already there.
    fn tail(self, dialect: Dialect) -> String {
        match (self, dialect) {
            (Self::Purchase, _) => dialect.update("order_id", &["request_id", "created_ms"]),
            // MySQL applies its assignments in order: the time first, while
            // the state still says whether the row moves.
            (Self::Settle, Dialect::Mysql) => " ON DUPLICATE KEY UPDATE \
                 updated_ms = IF(state = 'pending_payment', VALUES(updated_ms), updated_ms), \
                 state = IF(state = 'pending_payment', VALUES(state), state)"
                .to_owned(),
            (Self::Settle, _) => " ON CONFLICT (order_id) DO UPDATE SET state = excluded.state, \
                 updated_ms = excluded.updated_ms WHERE orders.state = 'pending_payment'"
                .to_owned(),
        }
    }
}

/// The largest power of two rows, up to 2^CHUNK_BITS, within `n`.
pub(crate) fn chunk_len(n: usize) -> usize {
    let most = 1 << CHUNK_BITS;
    if n >= most { most } else { 1 << n.ilog2() }
}

/// The multi-row upsert of 2^k rows (k ≤ CHUNK_BITS), built once.
pub(crate) fn statement(dialect: Dialect, upsert: Upsert, rows: usize) -> &'static str {
    type Key = (u8, u8, u32);
    static STATEMENTS: LazyLock<std::collections::HashMap<Key, String>> = LazyLock::new(|| {
        let mut all = std::collections::HashMap::new();
        for dialect in Dialect::ALL {
            for upsert in Upsert::ALL {
                for k in 0..=CHUNK_BITS {
                    let sql = upsert_sql(dialect, upsert, 1 << k);
                    all.insert((dialect as u8, upsert as u8, k), sql);
                }
            }
        }
        all
    });
    &STATEMENTS[&(dialect as u8, upsert as u8, rows.ilog2())]
}

const ORDER_COLUMNS: &str = "order_id, sale_id, generation, user_id, quantity, request_id, \
     state, created_ms, updated_ms";

/// The upsert of `rows` rows: `?` parameters for SQLite (its numbered
/// parameters get slow in statements with thousands of them) and MySQL,
/// `$n` for PostgreSQL, whose first row casts the numbers (a `VALUES` list
/// in a `SELECT` takes its column types from it).
///
/// - Purchases, compact: `INSERT … SELECT` from a `VALUES` list of (order
///   id, user, quantity, request id, created) with the sale and generation
///   bound once and the state a constant.
/// - Otherwise: `INSERT … VALUES` of all nine columns.
fn upsert_sql(dialect: Dialect, upsert: Upsert, rows: usize) -> String {
    let postgres = dialect == Dialect::Postgres;
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
    let casts: &[&str] = if upsert.compact(dialect) {
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
    } else {
        sql.push_str("VALUES ");
        &[
            "", "", "::bigint", "", "::bigint", "", "", "::bigint", "::bigint",
        ]
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
    if upsert.compact(dialect) {
        // SQLite needs the WHERE to tell the upsert clause from a join's ON.
        sql.push_str(if postgres {
            ") AS v (o, u, q, r, c)"
        } else {
            ") WHERE true"
        });
    }
    sql.push_str(&upsert.tail(dialect));
    sql
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

/// `target` (a database URL or path) fit for a message or a log: any
/// password, in its user part or a `password=` parameter, as `***`.
///
/// ```
/// use seckill_orders::redacted;
/// assert_eq!(redacted("postgres://app:s3cret@db:5432/shop"), "postgres://app:***@db:5432/shop");
/// assert_eq!(redacted("mysql://db/shop?password=s3cret&ssl-mode=REQUIRED"),
///            "mysql://db/shop?password=***&ssl-mode=REQUIRED");
/// assert_eq!(redacted("orders.db"), "orders.db");
/// ```
pub fn redacted(target: &str) -> String {
    let mut out = target.to_owned();
    if let Some((scheme, rest)) = target.split_once("://") {
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        if let Some((user, host)) = rest[..end].rsplit_once('@')
            && let Some((name, _)) = user.split_once(':')
        {
            out = format!("{scheme}://{name}:***@{host}{}", &rest[end..]);
        }
    }
    let Some((base, query)) = out.split_once('?') else {
        return out;
    };
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
            _ => pair.to_owned(),
        })
        .collect();
    format!("{base}?{}", query.join("&"))
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
            for dialect in Dialect::ALL {
                for upsert in Upsert::ALL {
                    let params = if upsert.compact(dialect) {
                        2 + 5 * rows
                    } else {
                        9 * rows
                    };
                    let sql = statement(dialect, upsert, rows);
                    if dialect == Dialect::Postgres {
                        assert!(sql.contains(&format!("${params}")));
                        assert!(!sql.contains(&format!("${}", params + 1)));
                    } else {
                        assert_eq!(sql.matches('?').count(), params, "{dialect:?}");
                    }
                }
            }
            let settle = statement(Dialect::Sqlite, Upsert::Settle, rows);
            assert!(settle.ends_with("WHERE orders.state = 'pending_payment'"));
            let purchase = statement(Dialect::Postgres, Upsert::Purchase, rows);
            assert!(purchase.ends_with("created_ms = excluded.created_ms"));
            let mysql = statement(Dialect::Mysql, Upsert::Purchase, rows);
            assert!(mysql.ends_with("created_ms = VALUES(created_ms)"));
        }
    }

    #[test]
    fn mysql_takes_question_marks_in_order() {
        assert_eq!(
            Dialect::Mysql.params("a = $1 AND b = $2 AND c = $10"),
            "a = ? AND b = ? AND c = ?"
        );
        assert_eq!(Dialect::Postgres.params("a = $1"), "a = $1");
    }
}
