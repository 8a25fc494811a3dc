//! [`Engine`]: one connection to Redis and what it is made with. What it
//! does is in the modules above this one, each an `impl Engine` of its own
//! concern: `sales` (admin), `lifecycle` (orders after purchase), `inspect`
//! (reading a sale back), `restore` (rebuilding from SQL), `shard`
//! (sharded sales), `purchaser` (buying).

use seckill_redis::{Conn, Target};

use crate::durability::Durability;
use crate::error::Result;
use crate::keys::SaleKeys;
use crate::strategy::CoalescerConfig;

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
    pub(crate) conn: Conn,
    /// For the classic `watch` strategy, which needs connections of its
    /// own to one server; `None` on a cluster.
    pub(crate) client: Option<redis::Client>,
    target: Target,
    /// Made on first use by the `lock` strategy: it needs a subscription.
    locks: std::sync::Arc<tokio::sync::OnceCell<seckill_lock::Locks>>,
    pub(crate) coalescer: CoalescerConfig,
    pub(crate) durability: Durability,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The target's Display: addresses only, never a password.
        f.debug_struct("Engine")
            .field("redis", &self.target.to_string())
            .field("coalescer", &self.coalescer)
            .field("durability", &self.durability)
            .finish_non_exhaustive()
    }
}

/// A `redis::Client` for `url` with `TCP_NODELAY` on, as the engine, the
/// persister and the tools make theirs (see [`seckill_redis::client`]).
pub use seckill_redis::client;

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
        Self::connect_target_lazy(&Target::server(url))
    }

    /// Connects to `target`, one server or a cluster, and fails if it
    /// cannot be reached now.
    ///
    /// ```no_run
    /// # async fn run() -> seckill_engine::Result<()> {
    /// let target = seckill_redis::Target::cluster("127.0.0.1:7000,127.0.0.1:7001")?;
    /// let engine = seckill_engine::Engine::connect_target(&target).await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect_target(target: &Target) -> Result<Self> {
        let engine = Self::connect_target_lazy(target)?;
        engine.ping().await?;
        Ok(engine)
    }

    /// Like [`Engine::connect_target`], without waiting for Redis.
    pub fn connect_target_lazy(target: &Target) -> Result<Self> {
        let client = target.server_client()?;
        Ok(Self {
            conn: target.connect_lazy()?,
            client,
            target: target.clone(),
            locks: std::sync::Arc::default(),
            coalescer: CoalescerConfig::default(),
            durability: Durability::default(),
        })
    }

    /// Where this engine's Redis is.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// A connection of the engine's kind, for tools beside it (reconnects
    /// by itself; a 2 s response timeout).
    pub fn connection(&self) -> Conn {
        self.conn.clone()
    }

    /// Batching bounds for `coalesced` purchasers made from now on.
    pub fn with_coalescer(mut self, config: CoalescerConfig) -> Self {
        self.coalescer = config;
        self
    }

    /// When purchases made by purchasers from now on, and payments and
    /// cancellations, are acknowledged.
    pub fn with_durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Whether Redis answers (on a cluster, any one node: see
    /// [`Conn::ping`]).
    pub async fn ping(&self) -> Result<()> {
        Ok(self.conn.clone().ping().await?)
    }

    /// The engine's locks, made on first use: they need a subscription.
    pub(crate) async fn locks(&self) -> Result<seckill_lock::Locks> {
        Ok(self
            .locks
            .get_or_try_init(|| seckill_lock::Locks::new(&self.target))
            .await?
            .clone())
    }

    /// The hash of sale `id`: its settings, its units left and, once a
    /// persister armed it, where its events are told (field `n`).
    pub fn sale_key(id: &str) -> Result<String> {
        Ok(SaleKeys::new(id)?.sale)
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
}
