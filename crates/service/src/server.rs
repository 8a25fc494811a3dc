//! Builds the app and runs it with its background work: the order
//! persister, the expiry sweeper and the restock listener.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use futures_util::StreamExt;
use seckill_engine::{Engine, RESTOCK_CHANNEL};
use seckill_orders::{
    Persister, PersisterConfig, Store, archive_forever, sweep_forever, watch_lost_forever,
};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::auth::{Auth, Buyers, Checker};
use crate::error::{ApiError, Code};
use crate::limiter::{Limiter, RateScope, UserLimiter};
use crate::listener::Limits;

use crate::secret::Secret;
use crate::state::AppState;
use crate::{metrics, routes};

/// Largest request body accepted.
pub const BODY_LIMIT: usize = 16 * 1024;

/// How `seckill serve` runs.
#[derive(Clone)]
pub struct Config {
    /// Address to listen on; port 0 picks a free one (see [`Running::addr`]).
    pub listen: SocketAddr,
    /// Where Redis is: one server or a cluster.
    pub redis: seckill_redis::Target,
    /// The order database: a SQLite path or `sqlite:` URL, `postgres://`
    /// or `mysql://`.
    pub database_url: String,
    /// Bearer token of the admin routes; empty refuses them all.
    pub admin_token: Secret,
    /// Who buyers are, and the payment side's credentials.
    pub auth: Auth,
    /// Purchases per second per user (0: no limit).
    pub rate_per_user: f64,
    /// Where the per-user rate is counted: in this instance, or shared by
    /// every instance in Redis.
    pub rate_limit: RateScope,
    /// Purchases one user may make back to back before the rate applies
    /// (at least 1).
    pub burst_per_user: f64,
    /// Purchases per second per client address (0: no limit); behind
    /// [`Auth::trusted_proxies`], the address they forwarded for.
    pub rate_per_ip: f64,
    /// Purchases one address may make back to back before its rate applies.
    pub burst_per_ip: f64,
    /// Run the order persister and expiry sweeper in this process.
    pub background: bool,
    /// How many connections, and how long a slow or idle one is kept.
    pub limits: Limits,
    /// With `background`: how long after its end a sale is archived (once
    /// every order is settled and persisted).
    pub archive_after: Duration,
    /// Rebuild from SQL, without an admin, each sale Redis lost (else it
    /// answers 503 `sale_lost` until restored).
    pub restore_lost_sales: bool,
    /// When a purchase is acknowledged: by the master (the default), or
    /// once every replica in touch with the master has it too.
    pub durability: seckill_engine::Durability,
}

/// Never prints the admin token, nor the URLs, which may hold passwords.
impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("listen", &self.listen)
            .field("admin_token", &self.admin_token)
            .field("auth", &self.auth)
            .field("rate_per_user", &self.rate_per_user)
            .field("rate_limit", &self.rate_limit)
            .field("burst_per_user", &self.burst_per_user)
            .field("rate_per_ip", &self.rate_per_ip)
            .field("burst_per_ip", &self.burst_per_ip)
            .field("background", &self.background)
            .field("limits", &self.limits)
            .field("archive_after", &self.archive_after)
            .field("restore_lost_sales", &self.restore_lost_sales)
            .field("durability", &self.durability)
            .finish_non_exhaustive()
    }
}

/// A running service. Stop it with [`Running::stop`].
pub struct Running {
    /// The address it listens on, with the real port if `listen` asked for 0.
    pub addr: SocketAddr,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running")
            .field("addr", &self.addr)
            .field("tasks", &self.tasks.len())
            .finish_non_exhaustive()
    }
}

impl Running {
    /// Stops accepting, lets in-flight requests finish, lets the persister
    /// commit the batch it holds, then returns.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// Starts the service; answers once it listens. Needs the SQL database;
/// does not need Redis yet.
pub async fn start(config: Config) -> Result<Running, crate::Error> {
    metrics::install();
    // Keys and secrets first: a setting that cannot work stops the start
    // before anything is opened.
    let auth = Checker::new(config.auth.clone(), config.admin_token.clone()).await?;
    // Redis may be away at start: the service starts anyway, answers 503
    // (and `/readyz` 503) meanwhile, and recovers when Redis is back.
    let engine = Engine::connect_target_lazy(&config.redis)?.with_durability(config.durability);
    let store = open_store(&config.database_url).await?;
    let redis = engine.connection();
    let (stop, stopped) = watch::channel(false);
    if matches!(config.auth.buyers, Buyers::Body) {
        tracing::warn!(
            "buyer auth is `body`: anyone who can reach this port can buy as any user; \
             use it on a trusted network or for benchmarks only"
        );
    }
    tokio::spawn(crate::redis_settings::check_at_start(
        config.redis.clone(),
        redis.clone(),
    ));
    let (per_user, per_ip) = limiters(&config, &redis);
    let state = Arc::new(AppState::new(
        engine.clone(),
        store.clone(),
        auth,
        per_user,
        per_ip,
        redis,
        config.limits.header_timeout,
        stopped.clone(),
    ));
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    let addr = listener.local_addr()?;
    let mut tasks = Vec::new();
    let app = router(state.clone());
    tasks.push(tokio::spawn(crate::listener::serve(
        listener,
        app,
        config.limits,
        stopped.clone(),
    )));
    tasks.push(tokio::spawn(listen_for_restock(
        config.redis.clone(),
        state.clone(),
        until_stopped(&stopped),
    )));
    // Even without the background work: its answer feeds the dashboard.
    tasks.push(tokio::spawn(watch_lost_forever(
        engine.clone(),
        state.store.clone(),
        config.restore_lost_sales,
        state.lost.clone(),
        until_stopped(&stopped),
    )));
    if config.background {
        tasks.extend(background(&config, engine, store, &stopped).await?);
    }
    Ok(Running { addr, stop, tasks })
}

/// Resolves once `stopped` says the service stops.
fn until_stopped(stopped: &watch::Receiver<bool>) -> impl Future<Output = ()> + Send + 'static {
    let mut stopped = stopped.clone();
    async move {
        let _ = stopped.wait_for(|s| *s).await;
    }
}

/// The persister (committing as `config.durability` acknowledges), the
/// expiry sweeper and the archiver, each a task until `stopped`.
async fn background(
    config: &Config,
    engine: Engine,
    store: Store,
    stopped: &watch::Receiver<bool>,
) -> Result<Vec<JoinHandle<()>>, crate::Error> {
    let persister = Persister::with_target(
        &config.redis,
        store.clone(),
        PersisterConfig::default().with_durability(config.durability),
    )
    .await?;
    Ok(vec![
        tokio::spawn(persister.run(until_stopped(stopped))),
        tokio::spawn(sweep_forever(
            engine.clone(),
            seckill_orders::SWEEP_EVERY,
            until_stopped(stopped),
        )),
        tokio::spawn(archive_forever(
            engine,
            store,
            config.archive_after,
            until_stopped(stopped),
        )),
    ])
}

/// The per-user and per-address rate limits `config` asks for.
fn limiters(
    config: &Config,
    redis: &seckill_redis::Conn,
) -> (UserLimiter, Limiter<std::net::IpAddr>) {
    let per_user = UserLimiter::new(
        config.rate_limit,
        config.rate_per_user,
        config.burst_per_user,
        redis.clone(),
    );
    (
        per_user,
        Limiter::new(config.rate_per_ip, config.burst_per_ip),
    )
}

/// The routes, with metrics, the body limit and JSON 404/405 answers.
pub fn router(state: Arc<AppState>) -> Router {
    routes::table()
        .into_iter()
        .fold(Router::new(), |router, (path, _, handler)| {
            router.route(path, handler)
        })
        .fallback(routes::not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(axum::middleware::from_fn(metrics::track))
        .with_state(state)
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        axum::http::StatusCode::METHOD_NOT_ALLOWED,
        Code::MethodNotAllowed,
        "this route does not take that method",
    )
}

/// The order database at `url`, opened and migrated; an error names it,
/// its password left out.
async fn open_store(url: &str) -> Result<Store, crate::Error> {
    Store::open(url)
        .await
        .map_err(|source| crate::Error::Database {
            at: seckill_orders::redacted(url),
            source,
        })
}

/// Clears this instance's sold-out marks when stock returns to a sale.
/// Re-subscribes after a lost connection; the sold-out marks expire on their
/// own meanwhile, so a missed message costs one trip to Redis, not a sale.
async fn listen_for_restock(
    target: seckill_redis::Target,
    state: Arc<AppState>,
    stopped: impl Future<Output = ()>,
) {
    tokio::pin!(stopped);
    for attempt in 0.. {
        let subscribed = async {
            let client = target.pubsub_client(attempt).await?;
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe(RESTOCK_CHANNEL).await?;
            let mut messages = pubsub.into_on_message();
            while let Some(msg) = messages.next().await {
                if let Ok(sale) = msg.get_payload::<String>() {
                    state.restocked(&sale);
                }
            }
            redis::RedisResult::Ok(())
        };
        tokio::select! {
            () = &mut stopped => return,
            _ = subscribed => {}
        }
        tokio::select! {
            () = &mut stopped => return,
            () = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
    }
}
