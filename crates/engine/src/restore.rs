//! Rebuilding a sale in Redis from a durable copy of its orders.

use std::collections::HashMap;

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::keys::SaleKeys;
use crate::lifecycle::OrderInfo;
use crate::order_id::OrderId;
use crate::sale::{Sale, SaleSpec};
use crate::state::OrderState;

/// An order to write back with [`Engine::restore_sale`].
#[derive(Clone, Debug)]
pub struct RestoredOrder {
    /// The order, with its current state.
    pub info: OrderInfo,
    /// The purchase's request id, if it had one: restored so a retry is
    /// still answered `Duplicate`.
    pub request_id: Option<String>,
}

/// One sale of the usual layout to write back: a sale, or one shard or
/// the pool of a sharded sale.
pub(crate) struct Part<'a> {
    pub keys: SaleKeys,
    /// Its settings (name, limit, window, payment timeout, inventory).
    pub spec: &'a SaleSpec,
    pub generation: u64,
    pub stock: u64,
    /// Units left; `None`: its stock less the units its live orders hold.
    pub left: Option<u64>,
    /// Fields only a sharded sale's hashes have.
    pub extra: Vec<(String, String)>,
    pub orders: &'a [RestoredOrder],
}

impl Part<'_> {
    /// The orders checked to be this part's, in the order they were bought.
    fn parsed(&self) -> Result<Vec<(OrderId, &RestoredOrder)>> {
        let mut parsed = Vec::with_capacity(self.orders.len());
        for o in self.orders {
            let id: OrderId = o.info.order_id.parse()?;
            if id.sale != self.keys.id || id.generation != self.generation {
                return Err(Error::Invalid {
                    field: "order_id",
                    reason: format!("{} is not an order of this sale", o.info.order_id),
                });
            }
            parsed.push((id, o));
        }
        parsed.sort_by_key(|(id, _)| (id.ms, id.seq, id.index));
        Ok(parsed)
    }

    /// The transaction that writes it over nothing.
    fn pipe(&self) -> Result<redis::Pipeline> {
        let (keys, spec, generation) = (&self.keys, self.spec, self.generation);
        let parsed = self.parsed()?;
        let live = parsed.iter().filter(|(_, o)| o.info.state.is_live());
        let held: u64 = live.clone().map(|(_, o)| u64::from(o.info.quantity)).sum();
        let mut users: HashMap<&str, u64> = HashMap::new();
        for (_, o) in live {
            *users.entry(o.info.user_id.as_str()).or_default() += u64::from(o.info.quantity);
        }
        let mut pipe = redis::pipe();
        pipe.atomic();
        pipe.del(&keys.all()[..]).ignore();
        let left = self.left.unwrap_or(self.stock.saturating_sub(held));
        let mut fields: Vec<(String, String)> = vec![
            ("id".into(), keys.id.clone()),
            ("name".into(), spec.name.clone()),
            ("stock".into(), self.stock.to_string()),
            ("inventory".into(), spec.inventory.name().to_owned()),
            (
                "payment_timeout".into(),
                spec.payment_timeout_secs.to_string(),
            ),
            ("gen".into(), generation.to_string()),
            ("left".into(), left.to_string()),
        ];
        fields.extend(
            spec.rules
                .fields()
                .map(|(k, v)| (k.to_owned(), v.to_string())),
        );
        fields.extend(self.extra.iter().cloned());
        if spec.rules.per_user_limit().is_some() {
            fields.extend(users.iter().map(|(u, n)| (format!("u:{u}"), n.to_string())));
        }
        for (id, o) in &parsed {
            if let Some(req) = &o.request_id {
                fields.push((
                    format!("r:{}/{req}", o.info.user_id),
                    format!("{}|{}", id.local(), o.info.quantity),
                ));
            }
            if o.info.state != OrderState::PendingPayment {
                let value = format!(
                    "{}|{}|{}",
                    o.info.state.as_str(),
                    o.info.user_id,
                    o.info.quantity
                );
                pipe.hset(&keys.settled, id.local(), value).ignore();
            }
        }
        pipe.hset_multiple(&keys.sale, &fields).ignore();
        // One purchase entry per original entry, orders in their places; a
        // place SQL has no order for is kept with quantity 0, which nothing
        // reads as an order.
        for entry in parsed.chunk_by(|(a, _), (b, _)| (a.ms, a.seq) == (b.ms, b.seq)) {
            let (first, _) = &entry[0];
            let mut xadd = redis::cmd("XADD");
            xadd.arg(&keys.orders)
                .arg(first.entry())
                .arg("b")
                .arg(generation);
            let mut place = 0;
            for (id, o) in entry {
                while place < id.index {
                    xadd.arg("_").arg("0");
                    place += 1;
                }
                xadd.arg(&o.info.user_id);
                match &o.request_id {
                    Some(req) => xadd.arg(format!("{}|{req}", o.info.quantity)),
                    None => xadd.arg(o.info.quantity),
                };
                place += 1;
            }
            pipe.add_command(xadd).ignore();
        }
        Ok(pipe)
    }
}

/// Units held by the live orders (pending or paid) of `orders`.
pub(crate) fn live_units(orders: &[RestoredOrder]) -> u64 {
    orders
        .iter()
        .filter(|o| o.info.state.is_live())
        .map(|o| u64::from(o.info.quantity))
        .sum()
}

impl Engine {
    /// Rebuilds sale `spec` in Redis from a durable copy of its orders (for
    /// a Redis that lost its data): the sale, its units left (stock minus
    /// units held by live orders), buyer counts, request ids, settled states,
    /// and the purchase entries of its orders under their original ids, so
    /// pending orders can still be paid and still expire on time. Only over
    /// nothing: `SaleExists` if Redis holds the sale, even if it appeared
    /// while this ran (made or restored by another process), as its orders
    /// may not be in the durable copy yet. A sharded sale is rebuilt with
    /// [`Engine::restore_sharded`].
    ///
    /// ```no_run
    /// # async fn run(engine: seckill_engine::Engine) -> seckill_engine::Result<()> {
    /// let spec = seckill_engine::SaleSpec::new("drop-1", 100);
    /// // Its orders as SQL keeps them; none here.
    /// let sale = engine.restore_sale(&spec, 1_700_000_000_000, &[]).await?;
    /// assert_eq!(sale.remaining, 100);
    /// # Ok(()) }
    /// ```
    pub async fn restore_sale(
        &self,
        spec: &SaleSpec,
        generation: u64,
        orders: &[RestoredOrder],
    ) -> Result<Sale> {
        spec.validate()?;
        self.write_part(&Part {
            keys: SaleKeys::new(&spec.id)?,
            spec,
            generation,
            stock: spec.stock,
            left: None,
            extra: Vec::new(),
            orders,
        })
        .await?;
        self.sale(&spec.id).await
    }

    /// Writes `part` if Redis holds nothing of it, and registers it;
    /// `SaleExists` if it does, even if it appeared while this ran.
    pub(crate) async fn write_part(&self, part: &Part<'_>) -> Result<()> {
        self.write_part_with(part, |_| {}).await
    }

    /// [`Engine::write_part`], with more commands on its keys in the same
    /// transaction.
    pub(crate) async fn write_part_with(
        &self,
        part: &Part<'_>,
        more: impl FnOnce(&mut redis::Pipeline),
    ) -> Result<()> {
        let keys = &part.keys;
        let mut pipe = part.pipe()?;
        more(&mut pipe);
        // WATCH takes a connection of its own, to the master of the sale's
        // keys (one slot): the shared one interleaves other callers.
        let master = self.target().master_of(&keys.sale).await?;
        let mut conn = master.client()?.get_multiplexed_async_connection().await?;
        let exists = || Error::SaleExists(keys.id.clone());
        let () = redis::cmd("WATCH")
            .arg(&keys.sale)
            .query_async(&mut conn)
            .await?;
        let held: bool = redis::AsyncCommands::exists(&mut conn, &keys.sale).await?;
        if held {
            let () = redis::cmd("UNWATCH").query_async(&mut conn).await?;
            return Err(exists());
        }
        // Nil: the sale appeared between the look and the rebuild.
        let done: Option<Vec<redis::Value>> = pipe.query_async(&mut conn).await?;
        if done.is_none() {
            return Err(exists());
        }
        // The registry is in another slot on a cluster: not in the MULTI.
        self.register(&keys.id).await
    }
}
