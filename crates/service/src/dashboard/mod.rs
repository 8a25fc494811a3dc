//! The live dashboard: `GET /dashboard`, a page embedded in the binary
//! (`index.html`, `app.js`: no CDN, no build step), and
//! `GET /v1/dashboard/stream`, admin only, one JSON [`Frame`] a second in
//! Server-Sent Events format. The page reads the stream with a streamed
//! `fetch`, so the admin token travels in the `Authorization` header, not
//! in a URL; the page itself holds no sale data.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use seckill_engine::{Sale, is_shard};
use serde::Serialize;

use crate::activity::Second;
use crate::error::ApiError;
use crate::state::AppState;

/// How often a frame is sent.
const FRAME_EVERY: Duration = Duration::from_secs(1);
/// Most sales one frame shows (by id); the rest are counted.
const MAX_SALES: usize = 50;

/// What the page shows, once a second.
#[derive(Serialize)]
pub struct Frame {
    /// When it was read, ms since the Unix epoch.
    at_ms: u64,
    /// Redis answered a `PING`.
    redis: bool,
    /// The SQL database answered.
    sql: bool,
    /// Every sale in Redis (not archived), by id, at most [`MAX_SALES`].
    sales: Vec<SaleFrame>,
    /// Sales left out past [`MAX_SALES`].
    more_sales: usize,
    /// Sales SQL holds as live that Redis lost (answering 503 `sale_lost`
    /// until restored), as the watch for them last saw.
    lost_sales: Vec<String>,
}

/// One sale in a [`Frame`].
#[derive(Serialize)]
struct SaleFrame {
    /// Its counts, status and, if sharded, each shard.
    #[serde(flatten)]
    sale: Sale,
    /// Orders in SQL by state; `None` while SQL cannot be read.
    orders: Option<BTreeMap<String, u64>>,
    /// Order events not yet in SQL.
    backlog: u64,
    /// How long the oldest of them has waited, ms.
    lag_ms: u64,
    /// This instance's purchases, second by second.
    seconds: Vec<Second>,
}

/// `GET /dashboard`: anyone (the page holds no data); a credential sent
/// is still checked.
pub async fn page(caller: crate::auth::Caller) -> Result<Response, ApiError> {
    caller.checked()?;
    Ok((
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        include_str!("index.html"),
    )
        .into_response())
}

/// `GET /dashboard/app.js`: as [`page`].
pub async fn script(caller: crate::auth::Caller) -> Result<Response, ApiError> {
    caller.checked()?;
    Ok((
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        include_str!("app.js"),
    )
        .into_response())
}

/// `GET /v1/dashboard/stream`: a frame at once, then one a second, until
/// the client leaves or the service stops.
pub async fn stream(
    State(state): State<Arc<AppState>>,
    caller: crate::auth::Caller,
) -> Result<Response, ApiError> {
    caller.admin()?;
    let mut ticks = tokio::time::interval(FRAME_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let frames = futures_util::stream::unfold((state, ticks), |(state, mut ticks)| async move {
        let mut stopped = state.stopped.clone();
        tokio::select! {
            _ = ticks.tick() => {}
            _ = stopped.wait_for(|s| *s) => return None,
        }
        let json = serde_json::to_string(&frame(&state).await).unwrap_or_default();
        let event = Bytes::from(format!("data: {json}\n\n"));
        Some((Ok::<_, Infallible>(event), (state, ticks)))
    });
    Ok((
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        Body::from_stream(frames),
    )
        .into_response())
}

/// Reads everything a frame shows. A part that cannot be read is left
/// out (and Redis or SQL shown unreachable), never an error: the page
/// keeps showing what it can.
pub async fn frame(state: &AppState) -> Frame {
    let at_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let (redis, sql) = tokio::join!(state.engine.ping(), state.store.ping());
    let mut ids = match redis {
        Ok(()) => state.engine.sale_ids().await.unwrap_or_default(),
        Err(_) => Vec::new(),
    };
    ids.retain(|id| !is_shard(id));
    ids.sort();
    let more_sales = ids.len().saturating_sub(MAX_SALES);
    ids.truncate(MAX_SALES);
    let mut sales = Vec::with_capacity(ids.len());
    for id in ids {
        match sale_frame(state, &id, sql.is_ok()).await {
            Ok(Some(sale)) => sales.push(sale),
            Ok(None) => {}
            Err(e) => tracing::debug!(sale = %id, error = %e, "dashboard: sale not read"),
        }
    }
    Frame {
        at_ms,
        redis: redis.is_ok(),
        sql: sql.is_ok(),
        sales,
        more_sales,
        lost_sales: state.lost.ids(),
    }
}

async fn sale_frame(
    state: &AppState,
    id: &str,
    sql: bool,
) -> Result<Option<SaleFrame>, crate::Error> {
    let sale = match state.engine.sale(id).await {
        Ok(sale) => sale,
        // Deleted or archived since it was listed.
        Err(seckill_engine::Error::SaleNotFound(_)) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    // A sharded sale's orders are kept under its shards' ids.
    let parts: Vec<String> = match &sale.sharding {
        Some(sharding) => sharding.shards.iter().map(|s| s.id.clone()).collect(),
        None => vec![id.to_owned()],
    };
    let mut backlog = seckill_orders::Backlog::default();
    let mut orders = sql.then(BTreeMap::new);
    for part in &parts {
        backlog = backlog.and(seckill_orders::backlog(&mut state.redis.clone(), part).await?);
        if let Some(counts) = orders.as_mut() {
            match state.store.order_states(part, sale.generation as i64).await {
                Ok(states) => {
                    for (state, n) in states {
                        *counts.entry(state).or_default() += n;
                    }
                }
                Err(_) => orders = None,
            }
        }
    }
    Ok(Some(SaleFrame {
        seconds: state.activity.seconds(id),
        sale,
        orders,
        backlog: backlog.entries,
        lag_ms: backlog.lag_ms(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_is_the_documents_event_data() {
        let second = Second {
            t: 1,
            codes: [("ok", 1)].into(),
            p50_ms: 1.0,
            p99_ms: 2.0,
        };
        let frame = Frame {
            at_ms: 1,
            redis: true,
            sql: true,
            sales: vec![SaleFrame {
                sale: crate::routes::sales::tests::full_sale(),
                orders: Some([("paid".to_owned(), 1)].into()),
                backlog: 0,
                lag_ms: 0,
                seconds: vec![second],
            }],
            more_sales: 0,
            lost_sales: vec!["f1".to_owned()],
        };
        crate::openapi::assert_fits("DashboardFrame", &serde_json::to_value(frame).unwrap());
    }
}
