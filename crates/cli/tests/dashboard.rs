//! The live dashboard of `seckill serve` in a real browser: headless
//! Chromium (Debian's `chromium`; `.ci/run` installs it) driven over the
//! DevTools protocol while buyers load the service over HTTP.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use seckill_service::client::Http;
use seckill_testkit::RedisServer;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

mod common;

/// A headless Chromium showing one page, driven over the DevTools protocol.
struct Browser {
    child: Child,
    page: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    next_id: u64,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Browser {
    /// Opens `url`; `None` where no Chromium is installed (outside CI).
    async fn open(url: &str) -> Option<Self> {
        let Some(binary) = ["chromium", "chromium-browser", "google-chrome"]
            .into_iter()
            .find(|b| Command::new(b).arg("--version").output().is_ok())
        else {
            assert!(
                std::env::var_os("CI").is_none(),
                "no Chromium: .ci/run installs Debian's `chromium`"
            );
            eprintln!("skipped: no Chromium here (apt-get install chromium)");
            return None;
        };
        let profile = tempfile::tempdir().unwrap();
        let mut child = Command::new(binary)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--remote-debugging-port=0",
                "--window-size=1400,1100",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg(url)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // "DevTools listening on ws://127.0.0.1:PORT/devtools/browser/…"
        let stderr = BufReader::new(child.stderr.take().unwrap());
        let port = stderr
            .lines()
            .map_while(Result::ok)
            .find_map(|l| {
                let rest = l.split("ws://127.0.0.1:").nth(1)?;
                rest.split('/').next()?.parse::<u16>().ok()
            })
            .expect("Chromium printed no DevTools address");
        let devtools = Http::new(&format!("http://127.0.0.1:{port}"), None);
        let deadline = Instant::now() + Duration::from_secs(10);
        let socket = loop {
            let (_, targets) = devtools.get("/json/list").await.unwrap();
            let page = targets.as_array().and_then(|t| {
                t.iter()
                    .find(|t| t["type"] == "page" && t["url"].as_str() == Some(url))
            });
            if let Some(ws) = page.and_then(|p| p["webSocketDebuggerUrl"].as_str()) {
                break ws.to_owned();
            }
            assert!(Instant::now() < deadline, "no page target: {targets}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let (page, _) = tokio_tungstenite::connect_async(socket.as_str())
            .await
            .unwrap();
        Some(Self {
            child,
            page,
            next_id: 0,
            _profile: profile,
        })
    }

    /// Sends one DevTools command and answers its result.
    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let message = json!({ "id": id, "method": method, "params": params });
        self.page
            .send(Message::Text(message.to_string().into()))
            .await
            .unwrap();
        loop {
            let answer = self.page.next().await.expect("DevTools closed").unwrap();
            let Message::Text(text) = answer else {
                continue;
            };
            let answer: Value = serde_json::from_str(&text).unwrap();
            if answer["id"] == id {
                assert!(answer.get("error").is_none(), "{method}: {answer}");
                return answer["result"].clone();
            }
        }
    }

    /// The value of JavaScript `expression` in the page.
    async fn eval(&mut self, expression: &str) -> Value {
        let result = self
            .call(
                "Runtime.evaluate",
                json!({ "expression": expression, "returnByValue": true }),
            )
            .await;
        assert!(
            result.get("exceptionDetails").is_none(),
            "{expression}: {result}"
        );
        result["result"]["value"].clone()
    }

    /// Text of the first element matching `selector` ("" if none).
    async fn text(&mut self, selector: &str) -> String {
        let js = format!(
            "(document.querySelector({}) || {{textContent: ''}}).textContent",
            json!(selector)
        );
        self.eval(&js).await.as_str().unwrap_or_default().to_owned()
    }

    /// A number the page shows (`1,234` → 1234); `None` if not shown.
    async fn number(&mut self, selector: &str) -> Option<f64> {
        self.text(selector).await.replace(',', "").parse().ok()
    }

    /// Waits up to `within` for `expression` to be true in the page.
    async fn wait_for(&mut self, expression: &str, within: Duration) {
        let deadline = Instant::now() + within;
        while self.eval(expression).await != json!(true) {
            if Instant::now() > deadline {
                let page = self.eval("document.body.innerText").await;
                panic!("never true: {expression}\nthe page shows: {page}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn log_in(&mut self, token: &str) {
        let js = format!(
            "document.querySelector('#token').value = {}; \
             document.querySelector('#login').requestSubmit(); true",
            json!(token)
        );
        self.eval(&js).await;
    }

    async fn screenshot(&mut self, path: &std::path::Path) {
        use base64::Engine as _;
        let shot = self
            .call(
                "Page.captureScreenshot",
                json!({ "format": "png", "captureBeyondViewport": true }),
            )
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap())
            .unwrap();
        std::fs::write(path, png).unwrap();
    }
}

const STOCK: u64 = 4_000;

/// The oldest data the page may show: one frame period (a second) and
/// half a second to build, send and draw a frame.
const FRAME_AGE: Duration = Duration::from_millis(1_500);

/// Where the screenshots go: cargo's scratch folder for tests.
fn target_tmp(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name)
}

/// Buyers at a bounded pace (so the sale lasts a few seconds) until `stop`.
fn buy_until(
    base: &str,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..8)
        .map(|t| {
            let (http, stop) = (Http::new(base, None), stop.clone());
            tokio::spawn(async move {
                for i in 0..20_000 {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        break;
                    }
                    let body = json!({ "user_id": format!("t{t}u{i}") });
                    let _ = http.post("/v1/sales/dash/purchase", &body).await;
                    tokio::time::sleep(Duration::from_millis(8)).await;
                }
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_follows_a_sale_in_a_real_browser() {
    let redis = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (mut serve, base) = common::start_serve(
        &redis.url(),
        &dir.path().join("o.db"),
        &["--rate-per-user", "0"],
    );
    let admin = Http::new(&base, Some("t".into()));
    for sale in [
        json!({ "id": "dash", "name": "Dashboard drop", "stock": STOCK, "per_user_limit": 1 }),
        json!({ "id": "hot", "name": "Sharded", "stock": 100, "per_user_limit": 1, "shards": 2 }),
    ] {
        let (status, body) = admin.post("/v1/sales", &sale).await.unwrap();
        assert_eq!(status.as_u16(), 201, "{body}");
    }

    // Nothing sale-specific without the token.
    let (status, body) = Http::new(&base, Some("wrong".into()))
        .get("/v1/dashboard/stream")
        .await
        .unwrap();
    assert_eq!(
        (status.as_u16(), body["code"].as_str()),
        (401, Some("unauthorized"))
    );

    let url = format!("{base}/dashboard");
    let Some(mut browser) = Browser::open(&url).await else {
        return;
    };
    browser
        .wait_for(
            "!!document.body && document.body.dataset.ready === '1'",
            Duration::from_secs(10),
        )
        .await;

    // A wrong token shows an error, not data.
    browser.log_in("wrong").await;
    browser
        .wait_for(
            "document.querySelector('#error').textContent.length > 0",
            Duration::from_secs(5),
        )
        .await;
    let error = browser.text("#error").await;
    assert!(error.contains("refused"), "{error}");
    let shown = browser
        .eval("document.querySelectorAll('[data-sale]').length")
        .await;
    assert_eq!(shown, json!(0));

    // The right one shows every live sale, and each shard of the sharded one.
    browser.log_in("t").await;
    browser
        .wait_for(
            "!!document.querySelector('[data-sale=\"dash\"] [data-field=\"sold\"]')",
            Duration::from_secs(5),
        )
        .await;
    assert_eq!(browser.text("#error").await, "");
    assert!(browser.text("#redis").await.contains("reachable"));
    let shard_rows = browser
        .eval("document.querySelectorAll('[data-sale=\"hot\"] tr[data-shard]').length")
        .await;
    assert_eq!(shard_rows, json!(4), "pool, moving and two shards");

    // The API's count, sampled every 100 ms while the buyers run.
    let http = Http::new(&base, None);
    let api: Arc<Mutex<Vec<(Instant, u64)>>> = Arc::default();
    let sampler = {
        let (http, api) = (http.clone(), api.clone());
        tokio::spawn(async move {
            loop {
                if let Ok((_, sale)) = http.get("/v1/sales/dash").await {
                    let sold = sale["sold"].as_u64().unwrap();
                    api.lock().unwrap().push((Instant::now(), sold));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let buyers = buy_until(&base, stop.clone());

    // While buying: the page's count is one the API gave within the last
    // second, and the purchases chart moves.
    let sold_api = |api: &Arc<Mutex<Vec<(Instant, u64)>>>, at: Instant| {
        let samples = api.lock().unwrap();
        samples
            .iter()
            .take_while(|(t, _)| *t <= at)
            .last()
            .map_or(0, |s| s.1)
    };
    let mut moving_rates = Vec::new();
    let mut charts = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "the sale never sold out");
        tokio::time::sleep(Duration::from_millis(400)).await;
        let read_at = Instant::now();
        let page = browser
            .number("[data-sale=\"dash\"] [data-field=\"sold\"]")
            .await;
        let page = page.expect("no sold count on the page") as u64;
        let after = sold_api(&api, Instant::now() + Duration::from_millis(150));
        tokio::time::sleep(Duration::from_millis(150)).await;
        let after = after.max(sold_api(&api, Instant::now()));
        // A frame a second, plus what building, sending and drawing it
        // take on a busy two-core machine.
        let second_ago = sold_api(&api, read_at - FRAME_AGE);
        assert!(
            second_ago <= page && page <= after,
            "page shows {page} sold; the API said {second_ago} a second before and {after} just after"
        );
        if page == STOCK {
            break;
        }
        moving_rates.push(
            browser
                .number("[data-sale=\"dash\"] [data-field=\"ok_rate\"]")
                .await
                .unwrap_or(0.0),
        );
        if charts.len() == 2 {
            browser
                .screenshot(&target_tmp("dashboard-buying.png"))
                .await;
        }
        charts.push(
            browser
                .eval("document.querySelector('[data-sale=\"dash\"] [data-chart=\"rates\"] polyline[data-series=\"ok\"]').getAttribute('points')")
                .await,
        );
    }
    assert!(
        moving_rates.iter().any(|&r| r > 0.0),
        "purchases/s never above 0 while buying: {moving_rates:?}"
    );
    charts.dedup();
    assert!(charts.len() >= 2, "the chart did not move while buying");

    // Sold out: the page matches the API exactly within a second, and the
    // purchases line falls to zero and stays there while refusals go on.
    let (_, sale) = http.get("/v1/sales/dash").await.unwrap();
    assert_eq!(
        (sale["sold"].as_u64(), sale["remaining"].as_u64()),
        (Some(STOCK), Some(0))
    );
    browser
        .wait_for(
            "document.querySelector('[data-sale=\"dash\"] [data-field=\"remaining\"]').textContent === '0'",
            FRAME_AGE,
        )
        .await;
    browser
        .wait_for(
            "document.querySelector('[data-sale=\"dash\"] [data-field=\"ok_rate\"]').textContent === '0'",
            Duration::from_secs(3),
        )
        .await;
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    let quiet_chart = browser
        .eval("document.querySelector('[data-sale=\"dash\"] [data-chart=\"rates\"] polyline[data-series=\"ok\"]').getAttribute('points')")
        .await;
    let rate = browser
        .number("[data-sale=\"dash\"] [data-field=\"ok_rate\"]")
        .await;
    assert_eq!(rate, Some(0.0), "purchases/s after the sell-out");
    let refused = browser
        .number("[data-sale=\"dash\"] [data-field=\"refused_rate\"]")
        .await;
    assert!(
        refused.is_some_and(|r| r > 0.0),
        "sold_out refusals not shown: {refused:?}"
    );
    // The last two points of the purchases line lie on the zero line.
    let points: Vec<f64> = quiet_chart
        .as_str()
        .unwrap()
        .split_whitespace()
        .map(|p| p.split(',').nth(1).unwrap().parse().unwrap())
        .collect();
    let zero = points.iter().copied().fold(f64::MIN, f64::max);
    assert!(
        points[points.len() - 2..].iter().all(|&y| y == zero),
        "the purchases line is not at zero: {points:?}"
    );
    let screenshot = target_tmp("dashboard.png");
    browser.screenshot(&screenshot).await;
    println!("screenshot: {}", screenshot.display());

    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for buyer in buyers {
        buyer.await.unwrap();
    }
    sampler.abort();

    // Redis loses its data: the sales SQL holds as live are shown as lost.
    let client = redis::Client::open(redis.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();
    browser
        .wait_for(
            "!document.querySelector('#lost').hidden",
            Duration::from_secs(15),
        )
        .await;
    let lost = browser.text("#lost").await;
    assert!(
        lost.contains("dash") && lost.contains("--repair-from-sql"),
        "{lost}"
    );
    // SAFETY: a signal to our own child; the open stream must not hold
    // the stop up.
    unsafe { libc::kill(serve.id() as i32, libc::SIGTERM) };
    let stopped = Instant::now();
    assert!(serve.wait().unwrap().success());
    assert!(
        stopped.elapsed() < Duration::from_secs(5),
        "stop took {:?}",
        stopped.elapsed()
    );
}
