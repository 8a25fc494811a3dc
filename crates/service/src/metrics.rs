//! Prometheus metrics: requests by route and status, latency, purchase
//! outcomes (counted in `state`), connections refused or timed out
//! (`listener`), and per sale its stock and the order stream's backlog and
//! lag. `docs/grafana/seckill.json` charts them.

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
        // Counters of rare events exist from the start, at 0, so a query
        // of their rate has a series before the first one happens.
        metrics::counter!("seckill_connections_refused_total").absolute(0);
        metrics::gauge!("seckill_sales_waiting_for_replica").set(0.0);
        for why in ["header", "idle"] {
            metrics::counter!("seckill_connections_timed_out_total", "why" => why).absolute(0);
        }
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

/// `GET /metrics`: anyone (a credential sent is still checked). Refreshes
/// the per-sale gauges (stock, and what is not yet in SQL: per shard for a
/// sharded sale), then renders everything.
pub async fn render(
    State(state): State<Arc<AppState>>,
    caller: crate::auth::Caller,
) -> Result<Response, crate::ApiError> {
    caller.checked()?;
    if let Ok(sales) = state.engine.sale_ids().await {
        let mut conn = state.redis.clone();
        for sale in sales {
            if !seckill_engine::is_shard(&sale)
                && let Ok(s) = state.engine.sale(&sale).await
            {
                metrics::gauge!("seckill_sale_remaining", "sale" => sale.clone())
                    .set(s.remaining as f64);
                metrics::gauge!("seckill_sale_sold", "sale" => sale.clone()).set(s.sold as f64);
            }
            if let Ok(b) = seckill_orders::backlog(&mut conn, &sale).await {
                let lag = b.lag_ms() as f64 / 1000.0;
                metrics::gauge!("seckill_stream_backlog", "sale" => sale.clone())
                    .set(b.entries as f64);
                metrics::gauge!("seckill_stream_lag_seconds", "sale" => sale).set(lag);
            }
        }
    }
    Ok(handle().render().into_response())
}
