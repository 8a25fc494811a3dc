//! Prometheus metrics: requests by route and status, latency, purchase
//! outcomes (counted in `routes`), and the order streams' backlog.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::state::AppState;

/// The process-wide recorder: metrics are global to a process, so every
/// service in it shares one.
fn handle() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let buckets = [
            0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
        ];
        PrometheusBuilder::new()
            .set_buckets(&buckets)
            .expect("non-empty buckets")
            .install_recorder()
            .unwrap_or_else(|_| PrometheusBuilder::new().build_recorder().handle())
    })
}

/// Installs the recorder (once per process) and its upkeep: histogram
/// samples pile up until drained, so without a scrape they would grow by
/// one sample per request; draining them every few seconds bounds memory
/// whether or not anything scrapes `/metrics`.
pub fn install() {
    static UPKEEP: OnceLock<()> = OnceLock::new();
    UPKEEP.get_or_init(|| {
        let handle = handle().clone();
        std::thread::Builder::new()
            .name("metrics-upkeep".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(std::time::Duration::from_secs(5));
                    handle.run_upkeep();
                }
            })
            .map(drop)
            .unwrap_or_else(|e| tracing::warn!(error = %e, "no metrics upkeep thread"));
    });
}

/// Counts and times every request under its route template.
pub async fn track(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let started = Instant::now();
    let response = next.run(request).await;
    let code = response.status().as_u16().to_string();
    metrics::counter!("seckill_http_requests_total", "route" => route.clone(), "code" => code)
        .increment(1);
    metrics::histogram!("seckill_http_request_duration_seconds", "route" => route)
        .record(started.elapsed().as_secs_f64());
    response
}

/// `GET /metrics`: refreshes the backlog gauge, then renders everything.
pub async fn render(State(state): State<Arc<AppState>>) -> Response {
    if let Ok(sales) = state.engine.sale_ids().await {
        let mut conn = state.redis.clone();
        for sale in sales {
            if let Ok(n) = seckill_orders::unpersisted(&mut conn, &sale).await {
                metrics::gauge!("seckill_stream_backlog", "sale" => sale).set(n as f64);
            }
        }
    }
    handle().render().into_response()
}
