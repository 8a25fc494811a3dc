//! Helpers shared by the service's test binaries.
#![allow(dead_code)]

/// Words that would show a framework's insides in an error message: a
/// serde or axum preamble, a parser position, a Rust type, a crate name.
const INTERNALS: [&str; 8] = [
    "deserializ",
    "Failed to",
    " at line ",
    "u64",
    "u32",
    "serde",
    "sqlx",
    "axum",
];

/// The first of those `message` shows, if any.
pub fn internal_word(message: &str) -> Option<&'static str> {
    INTERNALS.into_iter().find(|w| message.contains(w))
}

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hyper::StatusCode;
use seckill_service::client::Http;
use serde_json::json;

/// The admin token of the services these helpers start.
pub const TOKEN: &str = "drill";

/// The settings of a test service on `redis` and the database `db`: any
/// free port, admin token `token`, buyers named in the body (the tests of
/// credentials are in `auth.rs`), persister and sweeper on, no rate limit.
pub fn config(redis: seckill_redis::Target, db: &str, token: &str) -> seckill_service::Config {
    seckill_service::Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        redis,
        database_url: db.to_owned(),
        admin_token: token.into(),
        auth: seckill_service::Auth::new(seckill_service::Buyers::Body),
        rate_per_user: 0.0,
        burst_per_user: 1.0,
        rate_limit: Default::default(),
        rate_per_ip: 0.0,
        burst_per_ip: 1.0,
        background: true,
        limits: Default::default(),
        archive_after: Duration::from_secs(3600),
        restore_lost_sales: false,
        durability: Default::default(),
    }
}

/// A service as [`config`] makes it, with admin token [`TOKEN`] and
/// `durability`; answers it with a buyer's and an admin's client.
pub async fn serve(
    redis: seckill_redis::Target,
    db: &str,
    durability: seckill_engine::Durability,
) -> (seckill_service::Running, Http, Http) {
    let running = seckill_service::start(seckill_service::Config {
        durability,
        ..config(redis, db, TOKEN)
    })
    .await
    .unwrap();
    let base = format!("http://{}", running.addr);
    (
        running,
        Http::new(&base, None),
        Http::new(&base, Some(TOKEN.into())),
    )
}

/// Waits until `/readyz` answers 200.
pub async fn wait_ready(http: &Http, within: Duration) {
    let deadline = Instant::now() + within;
    while http.get("/readyz").await.unwrap().0 != StatusCode::OK {
        assert!(Instant::now() < deadline, "never ready again");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Eight HTTP buyers buying one unit each per request, each with a fresh
/// user and request id, until told to stop. 503s and `sold_out` answers
/// are counted and followed by a pause; any other refusal or a transport
/// error fails the drill.
pub struct Buyers {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<Bought>>,
}

/// What a group of buyers saw.
#[derive(Default)]
pub struct Bought {
    /// Orders acknowledged (200), with when.
    pub acknowledged: Vec<(String, Instant)>,
    /// 503 answers.
    pub unavailable: u64,
    /// 409 `sold_out` answers.
    pub sold_out: u64,
    /// How long each answer took, in µs, 503s included.
    pub latencies_us: Vec<u64>,
}

impl Bought {
    /// The `q` quantile of the answer times.
    pub fn latency(&mut self, q: f64) -> Duration {
        self.latencies_us.sort_unstable();
        let i = ((self.latencies_us.len() as f64 - 1.0) * q).round() as usize;
        Duration::from_micros(self.latencies_us.get(i).copied().unwrap_or(0))
    }
}

impl Buyers {
    pub fn start(http: &Http, sale: &str) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let tasks = (0..8)
            .map(|b| {
                let (http, stop) = (http.clone(), stop.clone());
                let path = format!("/v1/sales/{sale}/purchase");
                let tag = sale.to_owned();
                tokio::spawn(async move {
                    let mut seen = Bought::default();
                    let mut i = 0;
                    while !stop.load(Ordering::Relaxed) {
                        i += 1;
                        let body = json!({ "user_id": format!("{tag}b{b}u{i}"), "request_id": format!("b{b}r{i}") });
                        let asked = Instant::now();
                        let answer = http.post(&path, &body).await;
                        seen.latencies_us.push(asked.elapsed().as_micros() as u64);
                        match answer {
                            Ok((StatusCode::OK, answer)) => seen.acknowledged.push((
                                answer["order_id"]
                                    .as_str()
                                    .unwrap_or_else(|| panic!("no order_id in {answer}"))
                                    .to_owned(),
                                Instant::now(),
                            )),
                            Ok((StatusCode::SERVICE_UNAVAILABLE, _)) => {
                                seen.unavailable += 1;
                                tokio::time::sleep(Duration::from_millis(10)).await;
                            }
                            Ok((StatusCode::CONFLICT, answer)) if answer["code"] == "sold_out" => {
                                seen.sold_out += 1;
                                tokio::time::sleep(Duration::from_millis(10)).await;
                            }
                            Ok((status, answer)) => panic!("unexpected {status}: {answer}"),
                            Err(e) => panic!("transport: {e}"),
                        }
                    }
                    seen
                })
            })
            .collect();
        Self { stop, tasks }
    }

    /// Stops them; answers what they saw, together.
    pub async fn finish(self) -> Bought {
        self.stop.store(true, Ordering::Relaxed);
        let mut all = Bought::default();
        for task in self.tasks {
            let seen = task.await.unwrap();
            all.acknowledged.extend(seen.acknowledged);
            all.unavailable += seen.unavailable;
            all.sold_out += seen.sold_out;
            all.latencies_us.extend(seen.latencies_us);
        }
        all
    }
}

/// Of the `acknowledged` orders of `sale`, those its Redis no longer has;
/// and the ids of the sale's orders in SQL (a sharded sale's: its shards').
pub async fn forgotten_and_in_sql<'a>(
    engine: &seckill_engine::Engine,
    store: &seckill_orders::Store,
    sale: &str,
    acknowledged: impl IntoIterator<Item = &'a str>,
) -> (Vec<String>, std::collections::HashSet<String>) {
    let in_sql = in_sql(engine, store, sale).await;
    let mut forgotten = Vec::new();
    for order in acknowledged {
        if matches!(
            engine.order(order).await,
            Err(seckill_engine::Error::OrderNotFound(_))
        ) {
            forgotten.push(order.to_owned());
        }
    }
    (forgotten, in_sql)
}

/// The ids of `sale`'s orders in SQL; a sharded sale's are its shards'.
pub async fn in_sql(
    engine: &seckill_engine::Engine,
    store: &seckill_orders::Store,
    sale: &str,
) -> std::collections::HashSet<String> {
    let mut ids = std::collections::HashSet::new();
    for part in engine.parts(sale).await.unwrap() {
        let generation = engine.sale(&part).await.unwrap().generation as i64;
        let orders = store.orders(&part, generation).await.unwrap();
        ids.extend(orders.into_iter().map(|o| o.order_id));
    }
    ids
}

/// Sends one request as raw text on a connection of its own and answers
/// the whole raw answer (status line and headers included).
pub fn raw_text(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() {
        request.push_str(&format!(
            "content-type: application/json\r\ncontent-length: {}\r\n",
            body.len()
        ));
    }
    request.push_str("\r\n");
    request.push_str(body);
    // A server that refuses a huge header may close before reading it all.
    let _ = stream.write_all(request.as_bytes());
    let mut text = Vec::new();
    let _ = stream.read_to_end(&mut text);
    String::from_utf8_lossy(&text).into_owned()
}
