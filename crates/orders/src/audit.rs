//! `seckill audit`: checks a sale's Redis state against itself and against
//! SQL, and rebuilds Redis from SQL when Redis lost its data.

use std::collections::{HashMap, HashSet};

use seckill_engine::{Engine, Event, OrderInfo, OrderState, StreamEntry};
use serde::Serialize;

use crate::backlog::{committed_floor, told, unpersisted};
use crate::error::Result;
use crate::store::{Store, StoredOrder, StoredSale};

/// One thing found wrong.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Finding {
    /// Units left plus units held by live orders is not the sale's stock.
    StockMismatch {
        /// Units the sale was created with.
        stock: u64,
        /// Units left, as Redis counts them.
        remaining: u64,
        /// Units held by live (pending or paid) orders in Redis.
        held: u64,
    },
    /// The sale is in SQL but Redis has none.
    SaleMissingInRedis,
    /// An order Redis has (outside the backlog) that SQL lacks.
    MissingInSql {
        /// The order id.
        order_id: String,
    },
    /// An order SQL has that Redis does not know.
    MissingInRedis {
        /// The order id.
        order_id: String,
        /// Its state in SQL, as [`OrderState::as_str`] spells it.
        sql_state: String,
    },
    /// An order (outside the backlog) whose state differs between Redis and SQL.
    StateMismatch {
        /// The order id.
        order_id: String,
        /// Its state in Redis, as [`OrderState::as_str`] spells it.
        redis: String,
        /// Its state in SQL.
        sql: String,
    },
    /// A buyer count that disagrees with the buyer's live orders.
    BuyerCountMismatch {
        /// The buyer.
        user_id: String,
        /// Units the sale's buyer count says the user holds.
        counted: u64,
        /// Units the user's live orders hold.
        held: u64,
    },
    /// An archived sale's order still awaiting payment.
    PendingInArchive {
        /// The order id.
        order_id: String,
    },
    /// An archived sale whose recorded units sold differ from its paid orders.
    SoldMismatch {
        /// Units sold as recorded when it was archived.
        recorded: u64,
        /// Units its paid orders in SQL hold.
        counted: u64,
    },
    /// A sharded sale whose units do not add up across pool, transfers and
    /// shards, or whose shards' stock is not what its ledger of transfers
    /// gave them.
    ShardBooks {
        /// What does not add up, in plain words.
        problem: String,
    },
    /// A buyer holding more units than the sale's per-user limit.
    OverLimit {
        /// The buyer.
        user_id: String,
        /// Units held: the larger of the buyer count and the live orders.
        units: u64,
        /// The sale's per-user limit.
        limit: u64,
    },
}

/// The result of auditing one sale.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The sale audited.
    pub sale_id: String,
    /// Orders of the sale in Redis.
    pub orders_in_redis: usize,
    /// Orders of the sale's current generation in SQL.
    pub orders_in_sql: usize,
    /// Stream entries not yet persisted (read but not committed, plus
    /// not yet read). Differences explained by them are not findings.
    pub backlog: u64,
    /// Orders whose differences the backlog explains.
    pub in_backlog: usize,
    /// Everything found wrong, sorted.
    pub findings: Vec<Finding>,
    /// Nothing was found wrong.
    pub clean: bool,
    /// The sale is archived: checked in SQL alone.
    pub archived: bool,
}

/// Audits sale `id`.
pub async fn audit(engine: &Engine, store: &Store, id: &str) -> Result<Report> {
    Ok(audit_with_orders(engine, store, id).await?.0)
}

/// Audits sale `id`, answering the orders Redis holds of it too (none for a
/// sale Redis does not have), for callers that look at them next.
pub(crate) async fn audit_with_orders(
    engine: &Engine,
    store: &Store,
    id: &str,
) -> Result<(Report, Vec<OrderInfo>)> {
    let stored_sale = store.sale(id).await?;
    let sale = match engine.sale(id).await {
        Ok(sale) => Some(sale),
        Err(seckill_engine::Error::SaleNotFound(_)) if stored_sale.is_some() => None,
        Err(e) => return Err(e.into()),
    };
    let Some(sale) = sale else {
        if let Some(stored) = stored_sale.filter(|s| s.archived_ms.is_some()) {
            return Ok((audit_archived(store, &stored).await?, Vec::new()));
        }
        let report = Report {
            sale_id: id.to_owned(),
            orders_in_redis: 0,
            orders_in_sql: 0,
            backlog: 0,
            in_backlog: 0,
            findings: vec![Finding::SaleMissingInRedis],
            clean: false,
            archived: false,
        };
        return Ok((report, Vec::new()));
    };
    if sale.sharding.is_some() {
        return audit_sharded(engine, store, &sale).await;
    }
    audit_one(engine, store, id, &sale).await
}

/// Audits a sharded sale: each shard as a sale of its own, the books of
/// the units across pool, transfers and shards, and each buyer's units
/// over all shards against the limit.
async fn audit_sharded(
    engine: &Engine,
    store: &Store,
    sale: &seckill_engine::Sale,
) -> Result<(Report, Vec<OrderInfo>)> {
    let id = sale.id.as_str();
    let check = engine.sharding_check(id).await?;
    let mut findings: Vec<Finding> = check
        .problems
        .into_iter()
        .map(|problem| Finding::ShardBooks { problem })
        .collect();
    let mut report = Report {
        sale_id: id.to_owned(),
        orders_in_redis: 0,
        orders_in_sql: 0,
        backlog: 0,
        in_backlog: 0,
        findings: Vec::new(),
        clean: false,
        archived: false,
    };
    let mut orders = Vec::new();
    for shard in &check.sharding.shards {
        let shard_sale = engine.sale(&shard.id).await?;
        let (one, mut of_shard) = audit_one(engine, store, &shard.id, &shard_sale).await?;
        report.orders_in_redis += one.orders_in_redis;
        report.orders_in_sql += one.orders_in_sql;
        report.backlog += one.backlog;
        report.in_backlog += one.in_backlog;
        findings.extend(one.findings);
        orders.append(&mut of_shard);
    }
    // A buyer buys on one home shard only, so no buyer's units may add up
    // over the limit across shards.
    if let Some(limit) = sale.rules.per_user_limit() {
        let mut held: HashMap<&str, u64> = HashMap::new();
        for o in orders.iter().filter(|o| o.state.is_live()) {
            *held.entry(&o.user_id).or_default() += u64::from(o.quantity);
        }
        for (user, units) in held.into_iter().filter(|&(_, units)| units > limit) {
            let finding = Finding::OverLimit {
                user_id: user.to_owned(),
                units,
                limit,
            };
            if !findings.contains(&finding) {
                findings.push(finding);
            }
        }
    }
    findings.sort_by_key(|f| format!("{f:?}"));
    report.clean = findings.is_empty();
    report.findings = findings;
    Ok((report, orders))
}

/// Audits one unsharded sale (or one shard), `sale` as just read.
async fn audit_one(
    engine: &Engine,
    store: &Store,
    id: &str,
    sale: &seckill_engine::Sale,
) -> Result<(Report, Vec<OrderInfo>)> {
    let mut findings = Vec::new();
    let mut conn = engine.connection();
    let (backlog, backlog_orders) = backlog(&mut conn, id).await?;

    let redis_orders = engine.orders(id).await?;
    let held: u64 = live_units(redis_orders.iter().map(|o| (o.state, o.quantity)));
    if sale.remaining + held != sale.stock {
        findings.push(Finding::StockMismatch {
            stock: sale.stock,
            remaining: sale.remaining,
            held,
        });
    }

    let sql_orders = store.orders(id, sale.generation as i64).await?;
    let in_backlog = compare_orders(&redis_orders, &sql_orders, &backlog_orders, &mut findings);
    let limit = sale.rules.per_user_limit();
    check_buyers(engine, id, limit, &redis_orders, &mut findings).await?;
    findings.sort_by_key(|f| format!("{f:?}"));
    let report = Report {
        sale_id: id.to_owned(),
        orders_in_redis: redis_orders.len(),
        orders_in_sql: sql_orders.len(),
        backlog,
        in_backlog: in_backlog.len(),
        clean: findings.is_empty(),
        findings,
        archived: false,
    };
    Ok((report, redis_orders))
}

/// Orders that Redis and SQL disagree on, either way; a difference the
/// backlog explains is no finding (the persister has yet to write it), and
/// those orders are answered instead.
fn compare_orders(
    redis_orders: &[OrderInfo],
    sql_orders: &[StoredOrder],
    backlog_orders: &HashSet<String>,
    findings: &mut Vec<Finding>,
) -> HashSet<String> {
    let sql: HashMap<&str, &StoredOrder> = sql_orders
        .iter()
        .map(|o| (o.order_id.as_str(), o))
        .collect();
    let redis: HashMap<&str, &OrderInfo> = redis_orders
        .iter()
        .map(|o| (o.order_id.as_str(), o))
        .collect();
    let mut in_backlog = HashSet::new();
    for order in redis_orders {
        let found = match sql.get(order.order_id.as_str()) {
            None => Some(Finding::MissingInSql {
                order_id: order.order_id.clone(),
            }),
            Some(row) if row.state != order.state => Some(Finding::StateMismatch {
                order_id: order.order_id.clone(),
                redis: order.state.as_str().to_owned(),
                sql: row.state.as_str().to_owned(),
            }),
            Some(_) => None,
        };
        if let Some(finding) = found {
            if backlog_orders.contains(&order.order_id) {
                in_backlog.insert(order.order_id.clone());
            } else {
                findings.push(finding);
            }
        }
    }
    for row in sql_orders {
        if !redis.contains_key(row.order_id.as_str()) {
            findings.push(Finding::MissingInRedis {
                order_id: row.order_id.clone(),
                sql_state: row.state.as_str().to_owned(),
            });
        }
    }
    in_backlog
}

/// Each buyer's units in live orders against the sale's count of them and
/// against the limit `limit`, if the sale has one.
async fn check_buyers(
    engine: &Engine,
    id: &str,
    limit: Option<u64>,
    redis_orders: &[OrderInfo],
    findings: &mut Vec<Finding>,
) -> Result<()> {
    let mut held_by: HashMap<&str, u64> = HashMap::new();
    for o in redis_orders.iter().filter(|o| o.state.is_live()) {
        *held_by.entry(&o.user_id).or_default() += u64::from(o.quantity);
    }
    // Buyers' counts are kept only for sales with a limit.
    let counted = match limit {
        Some(_) => engine.buyers(id).await?,
        None => HashMap::new(),
    };
    let users: HashSet<&str> = held_by
        .keys()
        .copied()
        .chain(counted.keys().map(String::as_str))
        .collect();
    for user in users {
        let held = held_by.get(user).copied().unwrap_or(0);
        let count = counted.get(user).copied().unwrap_or(0);
        if limit.is_some() && held != count {
            findings.push(Finding::BuyerCountMismatch {
                user_id: user.to_owned(),
                counted: count,
                held,
            });
        }
        if let Some(limit) = limit
            && held.max(count) > limit
        {
            findings.push(Finding::OverLimit {
                user_id: user.to_owned(),
                units: held.max(count),
                limit,
            });
        }
    }
    Ok(())
}

/// An archived sale, in SQL alone: every order settled, the units sold as
/// recorded, within the stock, and no buyer over the limit.
async fn audit_archived(store: &Store, sale: &StoredSale) -> Result<Report> {
    let orders = store.orders(&sale.id, sale.generation).await?;
    let mut findings = Vec::new();
    let mut paid_by: HashMap<&str, u64> = HashMap::new();
    for o in &orders {
        match o.state {
            OrderState::Paid => *paid_by.entry(&o.user_id).or_default() += o.quantity.max(0) as u64,
            OrderState::PendingPayment => findings.push(Finding::PendingInArchive {
                order_id: o.order_id.clone(),
            }),
            _ => {}
        }
    }
    let paid: u64 = paid_by.values().sum();
    let recorded = sale.archived_sold.unwrap_or(0).max(0) as u64;
    if recorded != paid {
        findings.push(Finding::SoldMismatch {
            recorded,
            counted: paid,
        });
    }
    let stock = sale.stock.max(0) as u64;
    if paid > stock {
        findings.push(Finding::StockMismatch {
            stock,
            remaining: 0,
            held: paid,
        });
    }
    if let Some(limit) = sale.rules.per_user_limit() {
        for (user, units) in paid_by {
            if units > limit {
                findings.push(Finding::OverLimit {
                    user_id: user.to_owned(),
                    units,
                    limit,
                });
            }
        }
    }
    findings.sort_by_key(|f| format!("{f:?}"));
    Ok(Report {
        sale_id: sale.id.clone(),
        orders_in_redis: 0,
        orders_in_sql: orders.len(),
        backlog: 0,
        in_backlog: 0,
        clean: findings.is_empty(),
        findings,
        archived: true,
    })
}

fn live_units(orders: impl Iterator<Item = (OrderState, u32)>) -> u64 {
    orders
        .filter(|(s, _)| s.is_live())
        .map(|(_, q)| u64::from(q))
        .sum()
}

/// Entries not yet persisted, and the orders they concern.
pub(crate) async fn backlog(
    conn: &mut seckill_redis::Conn,
    sale: &str,
) -> Result<(u64, HashSet<String>)> {
    let key = &Engine::stream_key(sale)?;
    let start = match committed_floor(conn, sale).await? {
        Some(floor) => floor,
        None => "-".to_owned(),
    };
    let count = unpersisted(conn, sale).await?;
    let mut orders = HashSet::new();
    if count > 0 {
        let told = told(conn, sale).await?;
        for entry in StreamEntry::read(conn, key, &start)
            .await?
            .iter()
            .chain(&told)
        {
            orders.extend(Event::decode(sale, entry).into_iter().map(|e| e.order_id));
        }
    }
    Ok((count, orders))
}
