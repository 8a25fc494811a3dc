//! [`Engine`]: one connection to Redis, and the sales on it.

use std::collections::HashMap;
use std::time::Duration;

use redis::AsyncCommands;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::error::{Error, Result};
use crate::event::{Event, OrderId, StreamEntry, entry_number, next_entry_id};
use crate::keys::{SALES, SaleKeys};
use crate::lifecycle::{OrderInfo, OrderState, transition};
use crate::records::{self, LedgerEntry};
use crate::sale::{Sale, SaleSpec};
use crate::scripts::SCRIPTS;
use crate::strategy::{CoalescerConfig, Ctx, Purchaser, Strategy, atomic};

fn manager_config() -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(1)))
        .set_response_timeout(Some(Duration::from_secs(2)))
        .set_number_of_retries(0)
        .set_max_delay(Duration::from_millis(200))
}

/// An order to write back with [`Engine::restore_sale`].
#[derive(Clone, Debug)]
pub struct RestoredOrder {
    /// The order, with its current state.
    pub info: OrderInfo,
    /// The purchase's request id, if it had one: restored so a retry is
    /// still answered `Duplicate`.
    pub request_id: Option<String>,
}

/// The sale engine. Cheap to clone.
///
/// ```no_run
/// # async fn run() -> seckill_engine::Result<()> {
/// use seckill_engine::{Engine, SaleSpec};
/// let engine = Engine::connect("redis://127.0.0.1:6379/").await?;
/// engine.create_sale(&SaleSpec::new("drop-1", 100).per_user_limit(1)).await?;
/// println!("{} left", engine.sale("drop-1").await?.remaining);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Engine {
    conn: ConnectionManager,
    client: redis::Client,
    /// Made on first use by the `lock` strategy: it needs a subscription.
    locks: std::sync::Arc<tokio::sync::OnceCell<seckill_lock::Locks>>,
    coalescer: CoalescerConfig,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The address only: the client's full connection info holds the password.
        f.debug_struct("Engine")
            .field(
                "redis",
                &self.client.get_connection_info().addr().to_string(),
            )
            .field("coalescer", &self.coalescer)
            .finish_non_exhaustive()
    }
}

/// A `redis::Client` for `url` with `TCP_NODELAY` on, as every connection
/// of this workspace is made: redis-rs leaves Nagle's algorithm on, which
/// adds up to 40 ms to a small write after a read.
///
/// ```
/// let client = seckill_engine::client("redis://127.0.0.1:6379/").unwrap();
/// # drop(client);
/// ```
pub fn client(url: &str) -> Result<redis::Client> {
    use redis::IntoConnectionInfo;
    let info = url
        .into_connection_info()?
        .set_tcp_settings(redis::io::tcp::TcpSettings::default().set_nodelay(true));
    Ok(redis::Client::open(info)?)
}

impl Engine {
    /// Connects with `TCP_NODELAY`, a 1 s connect and a 2 s response
    /// timeout, and fails if Redis cannot be reached now.
    pub async fn connect(url: &str) -> Result<Self> {
        let engine = Self::connect_lazy(url)?;
        engine.ping().await?;
        Ok(engine)
    }

    /// Like [`Engine::connect`], but does not wait for Redis: every call
    /// (re)connects as needed and fails fast while Redis is away, so a
    /// service can start, and recover, without it.
    pub fn connect_lazy(url: &str) -> Result<Self> {
        let client = client(url)?;
        let conn = ConnectionManager::new_lazy_with_config(client.clone(), manager_config())?;
        Ok(Self {
            conn,
            client,
            locks: std::sync::Arc::default(),
            coalescer: CoalescerConfig::default(),
        })
    }

    /// A connection of the engine's kind, for tools beside it (reconnects
    /// by itself; a 2 s response timeout).
    pub fn connection(&self) -> ConnectionManager {
        self.conn.clone()
    }

    /// Batching bounds for `coalesced` purchasers made from now on.
    pub fn with_coalescer(mut self, config: CoalescerConfig) -> Self {
        self.coalescer = config;
        self
    }

    /// Creates a sale; `SaleExists` if the id is taken.
    pub async fn create_sale(&self, spec: &SaleSpec) -> Result<Sale> {
        spec.validate()?;
        let keys = SaleKeys::new(&spec.id)?;
        let generation: u64 = SCRIPTS
            .create_sale
            .key(&keys.sale)
            .key(&keys.stock)
            .key(&keys.tokens)
            .arg(&spec.id)
            .arg(&spec.name)
            .arg(spec.stock)
            .arg(spec.per_user_limit.unwrap_or(0))
            .arg(spec.starts_at_ms.unwrap_or(0))
            .arg(spec.ends_at_ms.unwrap_or(0))
            .arg(spec.inventory.name())
            .arg(spec.payment_timeout_secs)
            .invoke_async(&mut self.conn.clone())
            .await?;
        if generation == 0 {
            return Err(Error::SaleExists(spec.id.clone()));
        }
        let _: i64 = self.conn.clone().sadd(SALES, &spec.id).await?;
        self.sale(&spec.id).await
    }

    /// A sale with its live counts; `SaleNotFound` if there is none.
    pub async fn sale(&self, id: &str) -> Result<Sale> {
        let keys = SaleKeys::new(id)?;
        let (values, stock, tokens): (Vec<Option<String>>, Option<i64>, i64) = redis::pipe()
            .hmget(&keys.sale, &META[..])
            .get(&keys.stock)
            .llen(&keys.tokens)
            .query_async(&mut self.conn.clone())
            .await?;
        let meta: HashMap<&str, String> = META
            .into_iter()
            .zip(values)
            .filter_map(|(k, v)| Some((k, v?)))
            .collect();
        let remaining = match meta.get("inventory").map(String::as_str) {
            Some("list") => tokens,
            Some("counter") => stock.unwrap_or(0),
            _ => meta.get("left").and_then(|v| v.parse().ok()).unwrap_or(0),
        };
        Sale::from_meta(&meta, remaining).ok_or_else(|| Error::SaleNotFound(id.to_owned()))
    }

    /// Deletes a sale and everything recorded under it. `false` if none.
    pub async fn delete_sale(&self, id: &str) -> Result<bool> {
        let keys = SaleKeys::new(id)?;
        let mut conn = self.conn.clone();
        let days: Vec<String> = conn.smembers(&keys.days).await?;
        let mut all: Vec<String> = keys.all().iter().map(|k| (*k).to_owned()).collect();
        all.extend(days.iter().map(|d| keys.day(d)));
        // UNLINK: a big sale's hash and stream are freed off Redis's thread.
        let deleted: u64 = redis::cmd("UNLINK").arg(all).query_async(&mut conn).await?;
        let _: i64 = conn.srem(SALES, id).await?;
        Ok(deleted > 0)
    }

    /// Whether Redis answers.
    pub async fn ping(&self) -> Result<()> {
        let () = redis::cmd("PING")
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(())
    }

    /// Ids of all sales, in no particular order.
    pub async fn sale_ids(&self) -> Result<Vec<String>> {
        Ok(self.conn.clone().smembers(SALES).await?)
    }

    /// An order of the production path (`atomic`, `coalesced`).
    pub async fn order(&self, order_id: &str) -> Result<OrderInfo> {
        let id: OrderId = order_id.parse()?;
        let keys = SaleKeys::new(&id.sale)?;
        let entry = id.entry();
        let ((generation, timeout), settled, found): (
            (Option<u64>, Option<u64>),
            Option<String>,
            redis::Value,
        ) = redis::pipe()
            .hmget(&keys.sale, &["gen", "payment_timeout"])
            .hget(&keys.settled, id.local())
            .xrange(&keys.orders, &entry, &entry)
            .query_async(&mut self.conn.clone())
            .await?;
        let not_found = || Error::OrderNotFound(order_id.to_owned());
        if generation != Some(id.generation) {
            return Err(not_found());
        }
        let timeout_ms = timeout.unwrap_or(0) * 1000;
        if let Some(value) = settled {
            return OrderInfo::settled(&id, &value, timeout_ms).ok_or_else(not_found);
        }
        StreamEntry::list(found)?
            .iter()
            .flat_map(|e| Event::decode(&id.sale, e))
            .find(|e| e.order_id == order_id && e.state == OrderState::PendingPayment)
            .map(|e| pending(&id, &e, timeout_ms))
            .ok_or_else(not_found)
    }

    /// Pays an order. Paying twice is a no-op; an expired or cancelled order
    /// is refused with `OrderConflict`.
    pub async fn pay(&self, order_id: &str) -> Result<OrderState> {
        self.settle(order_id, "pay").await
    }

    /// Cancels an unpaid order, returning its units to the stock and to the
    /// buyer's allowance. Cancelling twice is a no-op; a paid or expired
    /// order is refused with `OrderConflict`.
    pub async fn cancel(&self, order_id: &str) -> Result<OrderState> {
        self.settle(order_id, "cancel").await
    }

    async fn settle(&self, order_id: &str, op: &str) -> Result<OrderState> {
        let id: OrderId = order_id.parse()?;
        let keys = SaleKeys::new(&id.sale)?;
        let answer: String = SCRIPTS
            .order
            .key(&keys.lifecycle()[..])
            .arg(&id.sale)
            .arg(id.generation)
            .arg(id.local())
            .arg(op)
            .invoke_async(&mut self.conn.clone())
            .await?;
        transition(order_id, &answer)
    }

    /// Expires every unpaid order of sale `id` past its pay-by time,
    /// returning its units; answers how many. Each script call looks at no
    /// more than `per_call` stream entries, so Redis is never held long.
    /// Safe to run from any number of processes at once: each order expires
    /// exactly once.
    pub async fn expire_due(&self, id: &str, per_call: u32) -> Result<u64> {
        let keys = SaleKeys::new(id)?;
        let mut expired = 0;
        loop {
            let (n, more): (u64, u8) = SCRIPTS
                .expire
                .key(&keys.lifecycle()[..])
                .arg(id)
                .arg(per_call.max(1))
                .invoke_async(&mut self.conn.clone())
                .await?;
            expired += n;
            if more == 0 {
                return Ok(expired);
            }
        }
    }

    /// All orders of the production path of sale `id`, as Redis holds them:
    /// the settled ones, and the pending ones from the stream past the
    /// expiry cursor.
    pub async fn orders(&self, id: &str) -> Result<Vec<OrderInfo>> {
        let keys = SaleKeys::new(id)?;
        let mut conn = self.conn.clone();
        type Head = (Option<u64>, Option<u64>, Option<String>);
        let ((generation, timeout, swept), settled): (Head, HashMap<String, String>) =
            redis::pipe()
                .hmget(&keys.sale, &["gen", "payment_timeout", "swept"])
                .hgetall(&keys.settled)
                .query_async(&mut conn)
                .await?;
        let Some(generation) = generation else {
            return Ok(Vec::new());
        };
        let timeout_ms = timeout.unwrap_or(0) * 1000;
        let mut orders: Vec<OrderInfo> = settled
            .iter()
            .filter_map(|(local, value)| {
                let order = OrderId::from_local(id, generation, local)?;
                OrderInfo::settled(&order, value, timeout_ms)
            })
            .collect();
        let from = swept.map_or_else(|| "-".to_owned(), |s| format!("({s}"));
        for event in stream_events(&mut conn, &keys, &from).await? {
            if event.state != OrderState::PendingPayment || event.generation as u64 != generation {
                continue;
            }
            let order: OrderId = event.order_id.parse()?;
            if !settled.contains_key(&order.local()) {
                orders.push(pending(&order, &event, timeout_ms));
            }
        }
        Ok(orders)
    }

    /// A purchaser of sale `id` with `strategy`. Reads the sale once: the
    /// baselines check its window against this snapshot.
    pub async fn purchaser(&self, strategy: Strategy, id: &str) -> Result<Purchaser> {
        let sale = self.sale(id).await?;
        let ctx = Ctx {
            conn: self.conn.clone(),
            keys: SaleKeys::new(id)?,
            sale,
        };
        let locks = match strategy {
            Strategy::Lock => Some(
                self.locks
                    .get_or_try_init(|| seckill_lock::Locks::new(self.client.clone()))
                    .await?
                    .clone(),
            ),
            _ => None,
        };
        Purchaser::new(strategy, ctx, locks, &self.client, self.coalescer)
    }

    /// Every order recorded for a sale (stream and per-day records).
    pub async fn ledger(&self, id: &str) -> Result<Vec<LedgerEntry>> {
        let keys = SaleKeys::new(id)?;
        let mut entries: Vec<LedgerEntry> = self
            .orders(id)
            .await?
            .into_iter()
            .filter(|o| o.state.is_live())
            .map(|o| LedgerEntry {
                order_id: o.order_id,
                user_id: o.user_id,
                quantity: o.quantity,
            })
            .collect();
        entries.extend(records::day_records(&mut self.conn.clone(), &keys).await?);
        Ok(entries)
    }

    /// Units each user holds, as the engine counts them for its per-user
    /// limit: kept by the production path for sales with a limit, and by
    /// the baselines.
    pub async fn buyers(&self, id: &str) -> Result<HashMap<String, u64>> {
        let keys = SaleKeys::new(id)?;
        let mut conn = self.conn.clone();
        let mut buyers: HashMap<String, u64> = conn.hgetall(&keys.users).await?;
        let mut held: redis::AsyncIter<(String, u64)> = conn.hscan_match(&keys.sale, "u:*").await?;
        while let Some(item) = held.next_item().await {
            let (field, units) = item?;
            if let Some(user) = field.strip_prefix("u:") {
                *buyers.entry(user.to_owned()).or_default() += units;
            }
        }
        Ok(buyers)
    }

    /// Order events in the sale's stream now (purchases, payments,
    /// cancellations, expiries), however many each entry carries.
    pub async fn stream_events(&self, id: &str) -> Result<u64> {
        let keys = SaleKeys::new(id)?;
        Ok(stream_events(&mut self.conn.clone(), &keys, "-")
            .await?
            .len() as u64)
    }

    /// The command line (for `redis-benchmark`) that runs exactly what one
    /// `atomic` purchase of sale `id` runs: the purchase script by SHA with
    /// the engine's own keys and arguments, one unit, by `user` with
    /// `request_id` (`redis-benchmark` makes `__rand_int__` in them random).
    /// Loads the script first.
    pub async fn purchase_command(
        &self,
        id: &str,
        user: &str,
        request_id: &str,
    ) -> Result<Vec<String>> {
        let sale = self.sale(id).await?;
        let keys = SaleKeys::new(id)?;
        let sha = self.load(&SCRIPTS.purchase).await?;
        let mut command = vec!["EVALSHA".to_owned(), sha, "2".to_owned()];
        command.extend(keys.purchase().map(str::to_owned));
        atomic::SaleArgs::new(&sale).each(user, "1", request_id, |arg| {
            command.push(arg.to_owned());
        });
        Ok(command)
    }

    /// The command line that runs the classic check-and-decrement script
    /// on sale `id`'s stock (a counter-inventory sale). Loads the script.
    pub async fn classic_decr_command(&self, id: &str) -> Result<Vec<String>> {
        let keys = SaleKeys::new(id)?;
        let sha = self.load(&SCRIPTS.classic_decr).await?;
        Ok(vec!["EVALSHA".to_owned(), sha, "1".to_owned(), keys.stock])
    }

    async fn load(&self, script: &redis::Script) -> Result<String> {
        Ok(script
            .prepare_invoke()
            .load_async(&mut self.conn.clone())
            .await?)
    }

    /// The order-event stream of sale `id`.
    pub fn stream_key(id: &str) -> Result<String> {
        Ok(SaleKeys::new(id)?.orders)
    }

    /// The hash in which persisters record what they read of sale `id`'s
    /// stream and have not yet committed; same hash slot as the stream.
    pub fn persisting_key(id: &str) -> Result<String> {
        Ok(SaleKeys::new(id)?.persisting)
    }

    /// Trims sale `id`'s stream below entry `floor` (entries every reader
    /// is done with), but never past the expiry cursor: entries after it
    /// are where pending orders live.
    pub async fn trim_stream(&self, id: &str, floor: &str) -> Result<()> {
        let keys = SaleKeys::new(id)?;
        let mut conn = self.conn.clone();
        let swept: Option<String> = conn.hget(&keys.sale, "swept").await?;
        let Some(swept) = swept else {
            return Ok(());
        };
        let keep_from = next_entry_id(&swept);
        let floor = if entry_number(floor) < entry_number(&keep_from) {
            floor.to_owned()
        } else {
            keep_from
        };
        let _: i64 = redis::cmd("XTRIM")
            .arg(&keys.orders)
            .arg("MINID")
            .arg(floor)
            .query_async(&mut conn)
            .await?;
        Ok(())
    }

    /// Rebuilds sale `spec` in Redis from a durable copy of its orders (for
    /// a Redis that lost its data): the sale, its units left (stock minus
    /// units held by live orders), buyer counts, request ids, settled states,
    /// and the purchase entries of its orders under their original ids, so
    /// pending orders can still be paid and still expire on time. Replaces
    /// whatever Redis held for it.
    pub async fn restore_sale(
        &self,
        spec: &SaleSpec,
        generation: u64,
        orders: &[RestoredOrder],
    ) -> Result<Sale> {
        spec.validate()?;
        let keys = SaleKeys::new(&spec.id)?;
        let mut parsed = Vec::with_capacity(orders.len());
        for o in orders {
            let id: OrderId = o.info.order_id.parse()?;
            if id.sale != spec.id || id.generation != generation {
                return Err(Error::Invalid {
                    field: "order_id",
                    reason: format!("{} is not an order of this sale", o.info.order_id),
                });
            }
            parsed.push((id, o));
        }
        parsed.sort_by_key(|(id, _)| (id.ms, id.seq, id.index));
        let live = parsed.iter().filter(|(_, o)| o.info.state.is_live());
        let held: u64 = live.clone().map(|(_, o)| u64::from(o.info.quantity)).sum();
        let mut users: HashMap<&str, u64> = HashMap::new();
        for (_, o) in live {
            *users.entry(o.info.user_id.as_str()).or_default() += u64::from(o.info.quantity);
        }
        let mut pipe = redis::pipe();
        pipe.atomic();
        pipe.del(&keys.all()[..]).ignore();
        let mut fields: Vec<(String, String)> = vec![
            ("id".into(), spec.id.clone()),
            ("name".into(), spec.name.clone()),
            ("stock".into(), spec.stock.to_string()),
            ("limit".into(), spec.per_user_limit.unwrap_or(0).to_string()),
            ("start".into(), spec.starts_at_ms.unwrap_or(0).to_string()),
            ("end".into(), spec.ends_at_ms.unwrap_or(0).to_string()),
            ("inventory".into(), spec.inventory.name().to_owned()),
            (
                "payment_timeout".into(),
                spec.payment_timeout_secs.to_string(),
            ),
            ("gen".into(), generation.to_string()),
            ("left".into(), spec.stock.saturating_sub(held).to_string()),
        ];
        if spec.per_user_limit.is_some() {
            fields.extend(users.iter().map(|(u, n)| (format!("u:{u}"), n.to_string())));
        }
        for (id, o) in &parsed {
            if let Some(req) = &o.request_id {
                fields.push((
                    format!("r:{req}"),
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
        pipe.sadd(SALES, &spec.id).ignore();
        let () = pipe.query_async(&mut self.conn.clone()).await?;
        self.sale(&spec.id).await
    }
}

/// The fields of a sale's hash that describe it (the rest are per buyer,
/// per request and the expiry cursor).
const META: [&str; 10] = [
    "id",
    "name",
    "stock",
    "limit",
    "start",
    "end",
    "inventory",
    "payment_timeout",
    "gen",
    "left",
];

/// A pending order from its purchase event.
fn pending(order: &OrderId, event: &Event, timeout_ms: u64) -> OrderInfo {
    OrderInfo::new(
        order,
        event.user_id.clone(),
        u32::try_from(event.quantity).unwrap_or(u32::MAX),
        OrderState::PendingPayment,
        timeout_ms,
    )
}

/// The order events of the sale's stream from entry `from` on.
async fn stream_events(
    conn: &mut ConnectionManager,
    keys: &SaleKeys,
    from: &str,
) -> Result<Vec<Event>> {
    let entries = StreamEntry::read(conn, &keys.orders, from).await?;
    Ok(entries
        .iter()
        .flat_map(|e| Event::decode(&keys.id, e))
        .collect())
}
