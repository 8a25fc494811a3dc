//! Rebuilding a sale Redis lost from its orders in SQL, and the gap the
//! rebuild can see.

use seckill_engine::{Engine, OrderInfo, RestoredOrder, SaleSpec};

use crate::audit::backlog;
use crate::error::{Error, Result};
use crate::store::{Store, StoredSale};

/// What [`repair_from_sql`] rebuilt, and the gap it can see.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restored {
    /// Orders SQL held, all written back.
    pub orders: usize,
    /// When the newest of them was bought (ms since the Unix epoch): an
    /// order acknowledged after it, before Redis lost the sale, never
    /// reached SQL and could not be rebuilt.
    pub newest_order_ms: Option<i64>,
}

/// Rebuilds sale `id` in Redis from SQL, a sharded sale's lost parts
/// included. Refuses while a stream holds events SQL has not received:
/// rebuilding then would drop them.
pub async fn repair_from_sql(engine: &Engine, store: &Store, id: &str) -> Result<Restored> {
    let mut conn = engine.connection();
    refuse_backlog(&mut conn, id).await?;
    let sale = store
        .sale(id)
        .await?
        .ok_or_else(|| Error::SaleNotInSql(id.to_owned()))?;
    if sale.archived_ms.is_some() {
        return Err(Error::Invalid {
            what: "sale",
            reason: format!("`{id}` is archived: it answers from SQL and needs no Redis"),
        });
    }
    let shards: Vec<String> = match &sale.shards {
        Some(list) => list.split(',').map(str::to_owned).collect(),
        None => Vec::new(),
    };
    // A sharded sale recorded before SQL kept its shards: its layout is
    // not known, and rebuilt as one sale it would sell again what its
    // shards sold.
    let prefix = format!("{id}~");
    if shards.is_empty()
        && store
            .live_sales()
            .await?
            .iter()
            .any(|(other, generation)| other.starts_with(&prefix) && *generation == sale.generation)
    {
        return Err(Error::Invalid {
            what: "sale",
            reason: format!(
                "SQL does not hold the shards of `{id}` (recorded by an older version); create it \
                 anew with \"replace\": true (its orders stay in SQL)"
            ),
        });
    }
    for shard in &shards {
        refuse_backlog(&mut conn, shard).await?;
    }
    let spec = spec_of(&sale, id, shards.len());
    let (restored, mut parts) = orders_of(store, &sale, id, &shards).await?;
    let (_, own) = parts.pop().unwrap_or_default();
    match parts.is_empty() {
        true => {
            engine
                .restore_sale(&spec, sale.generation as u64, &own)
                .await?
        }
        false => {
            engine
                .restore_sharded(&spec, sale.generation as u64, &parts)
                .await?
        }
    };
    Ok(restored)
}

/// The sale's settings as SQL recorded them, over `shards` shards (none:
/// not sharded).
fn spec_of(sale: &StoredSale, id: &str, shards: usize) -> SaleSpec {
    let mut spec = SaleSpec::new(id, sale.stock as u64)
        .name(&sale.name)
        .payment_timeout_secs(sale.payment_timeout_secs as u64);
    if shards > 0 {
        spec = spec.shards(shards as u32);
    }
    spec.rules = sale.rules;
    spec
}

/// The orders SQL holds of each shard, then of the sale itself (last), as
/// they are written back; a row Redis cannot hold is left out.
async fn orders_of(
    store: &Store,
    sale: &StoredSale,
    id: &str,
    shards: &[String],
) -> Result<(Restored, Vec<(String, Vec<RestoredOrder>)>)> {
    let mut restored = Restored {
        orders: 0,
        newest_order_ms: None,
    };
    let mut parts = Vec::new();
    for part in shards.iter().map(String::as_str).chain([id]) {
        let rows = store.orders(part, sale.generation).await?;
        restored.newest_order_ms = restored
            .newest_order_ms
            .max(rows.iter().map(|o| o.created_ms).max());
        let orders: Vec<RestoredOrder> = rows
            .into_iter()
            .filter_map(|row| {
                Some(RestoredOrder {
                    info: OrderInfo {
                        order_id: row.order_id,
                        sale_id: row.sale_id,
                        user_id: row.user_id,
                        quantity: u32::try_from(row.quantity).ok()?,
                        state: row.state,
                        pay_by_ms: (row.created_ms + sale.payment_timeout_secs * 1000) as u64,
                    },
                    request_id: row.request_id,
                })
            })
            .collect();
        restored.orders += orders.len();
        parts.push((part.to_owned(), orders));
    }
    Ok((restored, parts))
}

/// `Backlog` while sale `sale`'s stream holds events SQL has not received.
async fn refuse_backlog(conn: &mut seckill_redis::Conn, sale: &str) -> Result<()> {
    let (backlog, _) = backlog(conn, sale).await?;
    if backlog > 0 {
        return Err(Error::Backlog {
            sale: sale.to_owned(),
            backlog,
        });
    }
    Ok(())
}
