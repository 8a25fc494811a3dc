//! [`Engine`]: one connection to Redis, and the sales on it.

use std::collections::HashMap;
use std::time::Duration;

use redis::AsyncCommands;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::error::{Error, Result};
use crate::keys::{SALES, SaleKeys};
use crate::lifecycle::{OrderInfo, OrderState, sale_of, transition};
use crate::records::{self, LedgerEntry};
use crate::sale::{Inventory, Sale, SaleSpec};
use crate::scripts::SCRIPTS;
use crate::strategy::{CoalescerConfig, Ctx, Purchaser, Strategy};

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
    pub info: OrderInfo,
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
    url: String,
    coalescer: CoalescerConfig,
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
        let client = seckill_lock::client(url)?;
        let conn = ConnectionManager::new_lazy_with_config(client.clone(), manager_config())?;
        Ok(Self {
            conn,
            client,
            locks: std::sync::Arc::default(),
            url: url.to_owned(),
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
        let inventory = match spec.inventory {
            Inventory::Counter => "counter",
            Inventory::List => "list",
        };
        let generation: u64 = SCRIPTS
            .create_sale
            .key(&keys.meta)
            .key(&keys.stock)
            .key(&keys.tokens)
            .arg(&spec.id)
            .arg(&spec.name)
            .arg(spec.stock)
            .arg(spec.per_user_limit.unwrap_or(0))
            .arg(spec.starts_at_ms.unwrap_or(0))
            .arg(spec.ends_at_ms.unwrap_or(0))
            .arg(inventory)
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
        let (meta, stock, tokens): (HashMap<String, String>, Option<i64>, i64) = redis::pipe()
            .hgetall(&keys.meta)
            .get(&keys.stock)
            .llen(&keys.tokens)
            .query_async(&mut self.conn.clone())
            .await?;
        let remaining = match meta.get("inventory").map(String::as_str) {
            Some("list") => tokens,
            _ => stock.unwrap_or(0),
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
        let deleted: u64 = conn.del(all).await?;
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
        let sale = sale_of(order_id)?;
        let keys = SaleKeys::new(sale)?;
        let value: Option<String> = self.conn.clone().hget(&keys.states, order_id).await?;
        value
            .and_then(|v| OrderInfo::parse(sale, order_id, &v))
            .ok_or_else(|| Error::OrderNotFound(order_id.to_owned()))
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
        let sale = sale_of(order_id)?;
        let keys = SaleKeys::new(sale)?;
        let answer: String = SCRIPTS
            .order
            .key(&keys.lifecycle()[..])
            .arg(sale)
            .arg(order_id)
            .arg(op)
            .invoke_async(&mut self.conn.clone())
            .await?;
        transition(order_id, &answer)
    }

    /// Expires up to `max` unpaid orders of sale `id` past their pay-by
    /// time, returning their units; answers how many. Safe to run from any
    /// number of processes at once: each order expires exactly once.
    pub async fn expire_due(&self, id: &str, max: u32) -> Result<u64> {
        let keys = SaleKeys::new(id)?;
        Ok(SCRIPTS
            .expire
            .key(&keys.lifecycle()[..])
            .arg(id)
            .arg(max)
            .invoke_async(&mut self.conn.clone())
            .await?)
    }

    /// All orders of the production path of sale `id`, as Redis holds them.
    pub async fn orders(&self, id: &str) -> Result<Vec<OrderInfo>> {
        let keys = SaleKeys::new(id)?;
        let states: HashMap<String, String> = self.conn.clone().hgetall(&keys.states).await?;
        Ok(states
            .iter()
            .filter_map(|(order, value)| OrderInfo::parse(id, order, value))
            .collect())
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
                    .get_or_try_init(|| seckill_lock::Locks::connect(&self.url))
                    .await?
                    .clone(),
            ),
            _ => None,
        };
        Purchaser::new(strategy, ctx, locks, &self.client, self.coalescer)
    }

    /// Every order recorded for a sale (stream and per-day records).
    pub async fn ledger(&self, id: &str) -> Result<Vec<LedgerEntry>> {
        records::ledger(&mut self.conn.clone(), &SaleKeys::new(id)?).await
    }

    /// Units each user has bought, as the engine counts them.
    pub async fn buyers(&self, id: &str) -> Result<HashMap<String, u64>> {
        let keys = SaleKeys::new(id)?;
        Ok(self.conn.clone().hgetall(&keys.users).await?)
    }

    /// Length of the sale's order-event stream.
    pub async fn stream_len(&self, id: &str) -> Result<u64> {
        let keys = SaleKeys::new(id)?;
        Ok(self.conn.clone().xlen(&keys.orders).await?)
    }

    /// Events ever appended to the sale's stream, trimmed ones included
    /// (0 if it has none): one per purchase and one per settled order.
    pub async fn stream_events_added(&self, id: &str) -> Result<u64> {
        let keys = SaleKeys::new(id)?;
        let info: redis::RedisResult<HashMap<String, redis::Value>> = redis::cmd("XINFO")
            .arg("STREAM")
            .arg(&keys.orders)
            .query_async(&mut self.conn.clone())
            .await;
        match info {
            Ok(info) => Ok(info
                .get("entries-added")
                .and_then(|v| redis::from_redis_value_ref(v).ok())
                .unwrap_or(0)),
            Err(e) if e.to_string().contains("no such key") => Ok(0),
            Err(e) => Err(e.into()),
        }
    }

    /// The command line (for `redis-benchmark`) that runs exactly what one
    /// `atomic` purchase of sale `id` runs: the purchase script by SHA with
    /// the engine's own keys, one unit, and a user and request id made
    /// random by `__rand_int__`. Loads the script first.
    pub async fn purchase_command(&self, id: &str) -> Result<Vec<String>> {
        let keys = SaleKeys::new(id)?;
        let sha = self.load(&SCRIPTS.purchase).await?;
        let keys = keys.purchase();
        let mut command = vec!["EVALSHA".to_owned(), sha, keys.len().to_string()];
        command.extend(keys.iter().map(|k| (*k).to_owned()));
        command.extend(["u__rand_int__", "1", "r__rand_int__"].map(str::to_owned));
        Ok(command)
    }

    /// The command line that runs the classic check-and-decrement script
    /// on sale `id`'s stock (a counter-inventory sale). Loads the script.
    pub async fn seed_command(&self, id: &str) -> Result<Vec<String>> {
        let keys = SaleKeys::new(id)?;
        let sha = self.load(&SCRIPTS.seed_decr).await?;
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

    /// Rebuilds sale `spec` in Redis from a durable copy of its orders (for
    /// a Redis that lost its data): the sale, its stock (total minus units
    /// held by live orders), buyer counts, order states, unpaid deadlines,
    /// request ids and order numbering. Replaces whatever Redis held for it.
    pub async fn restore_sale(
        &self,
        spec: &SaleSpec,
        generation: u64,
        orders: &[RestoredOrder],
    ) -> Result<Sale> {
        spec.validate()?;
        let keys = SaleKeys::new(&spec.id)?;
        let live: Vec<&RestoredOrder> = orders.iter().filter(|o| o.info.state.is_live()).collect();
        let held: u64 = live.iter().map(|o| u64::from(o.info.quantity)).sum();
        let mut users: HashMap<&str, u64> = HashMap::new();
        for o in &live {
            *users.entry(o.info.user_id.as_str()).or_default() += u64::from(o.info.quantity);
        }
        let last = orders
            .iter()
            .filter_map(|o| o.info.order_id.rsplit('-').next()?.parse::<u64>().ok())
            .max()
            .unwrap_or(0);
        let inventory = match spec.inventory {
            Inventory::Counter => "counter",
            Inventory::List => "list",
        };
        let mut pipe = redis::pipe();
        pipe.atomic();
        pipe.del(&keys.all()[..]).ignore();
        pipe.hset_multiple(
            &keys.meta,
            &[
                ("id", spec.id.clone()),
                ("name", spec.name.clone()),
                ("stock", spec.stock.to_string()),
                ("limit", spec.per_user_limit.unwrap_or(0).to_string()),
                ("start", spec.starts_at_ms.unwrap_or(0).to_string()),
                ("end", spec.ends_at_ms.unwrap_or(0).to_string()),
                ("inventory", inventory.to_owned()),
                ("payment_timeout", spec.payment_timeout_secs.to_string()),
                ("gen", generation.to_string()),
            ],
        )
        .ignore();
        pipe.set(&keys.stock, spec.stock.saturating_sub(held))
            .ignore();
        pipe.set(&keys.seq, last).ignore();
        for (user, units) in &users {
            pipe.hset(&keys.users, *user, *units).ignore();
        }
        for o in orders {
            let i = &o.info;
            let value = format!(
                "{}|{}|{}|{}",
                i.state.as_str(),
                i.user_id,
                i.quantity,
                i.pay_by_ms
            );
            pipe.hset(&keys.states, &i.order_id, value).ignore();
            if i.state == OrderState::PendingPayment {
                pipe.zadd(&keys.pending, &i.order_id, i.pay_by_ms).ignore();
            }
            if let Some(req) = &o.request_id {
                pipe.hset(
                    &keys.requests,
                    req,
                    format!("{}|{}", i.order_id, i.quantity),
                )
                .ignore();
            }
        }
        pipe.sadd(SALES, &spec.id).ignore();
        let () = pipe.query_async(&mut self.conn.clone()).await?;
        self.sale(&spec.id).await
    }
}
