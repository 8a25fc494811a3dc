//! Sales (created, changed and ended by the admin; read by anyone) and
//! purchases (by buyers, as their credential names them).

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use seckill_engine::{
    OrderState, Outcome, PurchaseRequest, Rule, Rules, Sale, SaleSpec, Sharding, Status,
    StockChange, check_id, is_shard,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

use seckill_orders::StoredSale;

use super::{Answer, Shared, page_limit};
use crate::auth::Caller;
use crate::error::{ApiError, Code};
use crate::extract::{Body, Path, Query};
use crate::fields::{present, present_whole, whole};
use crate::rules::{self, RuleFields};
use crate::state::AppState;
use seckill_orders::archived::{self, Found};

/// Its rules are read by [`rules::read`], which is given every field but
/// these and refuses those that are no rule's.
#[derive(Deserialize)]
pub struct NewSale {
    id: String,
    name: String,
    #[serde(deserialize_with = "whole")]
    stock: u64,
    #[serde(default, deserialize_with = "present_whole")]
    payment_timeout_secs: Option<u64>,
    #[serde(default, deserialize_with = "present_whole")]
    shards: Option<u32>,
    /// Start a new generation over a sale Redis lost (see `lost_in_redis`).
    #[serde(default, deserialize_with = "present")]
    replace: Option<bool>,
    #[serde(flatten, deserialize_with = "new_sale_rules")]
    rules: Rules,
}

fn new_sale_rules<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Rules, D::Error> {
    const OWN: &[&str] = &[
        "id",
        "name",
        "stock",
        "payment_timeout_secs",
        "shards",
        "replace",
    ];
    let rules = rules::read(d, OWN)?;
    // Over HTTP every sale states its per-user limit, if only a large one.
    let limit = Rule::PerUserLimit;
    if rules.get(limit).is_none() {
        return Err(serde::de::Error::custom(format!("missing field `{limit}`")));
    }
    Ok(rules)
}

#[derive(Serialize)]
pub(super) struct SaleBody {
    id: String,
    name: String,
    stock: u64,
    remaining: u64,
    sold: u64,
    status: seckill_engine::Status,
    #[serde(flatten)]
    rules: RuleFields,
    payment_timeout_secs: u64,
    /// A sharded sale's pool and shards: for admins only.
    #[serde(skip_serializing_if = "Option::is_none")]
    sharding: Option<Sharding>,
}

impl SaleBody {
    /// With a sharded sale's pool and shards, which only admins see.
    fn for_admin(sale: Sale) -> Self {
        let sharding = sale.sharding.clone();
        Self {
            sharding,
            ..Self::from(sale)
        }
    }
}

impl From<Sale> for SaleBody {
    fn from(s: Sale) -> Self {
        Self {
            id: s.id,
            name: s.name,
            stock: s.stock,
            remaining: s.remaining,
            sold: s.sold,
            status: s.status,
            rules: RuleFields(s.rules),
            payment_timeout_secs: s.payment_timeout_secs,
            sharding: None,
        }
    }
}

/// `POST /v1/sales`: the admin.
pub async fn create_sale(
    State(state): Shared,
    caller: Caller,
    body: Result<Body<NewSale>, ApiError>,
) -> Answer {
    caller.admin()?;
    let Body(body) = body?;
    // Over HTTP a sale of nothing is a mistake (the engine allows one, to
    // stock later); a running sale's stock can be added to.
    if body.stock == 0 {
        return Err(ApiError::invalid("stock: must be 1-1000000000"));
    }
    let mut spec = SaleSpec::new(&body.id, body.stock).name(&body.name);
    spec.rules = body.rules;
    if let Some(secs) = body.payment_timeout_secs {
        if secs == 0 || secs > 86_400 {
            return Err(ApiError::invalid("payment_timeout_secs: must be 1-86400"));
        }
        spec = spec.payment_timeout_secs(secs);
    }
    if let Some(shards) = body.shards {
        spec = spec.shards(shards);
    }
    lost_in_redis(&state, &body.id, body.replace == Some(true)).await?;
    let sale = state.engine.create_sale(&spec).await?;
    state.forget(&sale.id);
    state.store.upsert_sale(&sale).await?;
    Ok((StatusCode::CREATED, Json(SaleBody::for_admin(sale))).into_response())
}

/// Refuses to create sale `id` over one that SQL holds as live and Redis
/// lost: its sold units would be sold again. With `replace` the admin
/// chose a new generation: the old one's orders stay in SQL, and what it
/// sold is logged.
async fn lost_in_redis(state: &AppState, id: &str, replace: bool) -> Result<(), ApiError> {
    let Some(stored) = state.store.sale(id).await? else {
        return Ok(());
    };
    if stored.archived_ms.is_some() {
        return Ok(());
    }
    match state.engine.sale(id).await {
        Err(seckill_engine::Error::SaleNotFound(_)) => {}
        // Redis holds it: creating answers `sale_exists`.
        Ok(_) => return Ok(()),
        Err(e) => return Err(e.into()),
    }
    if !replace {
        return Err(ApiError::conflict(
            Code::SaleExists,
            format!(
                "SQL holds sale `{id}` as live but Redis lost it: restore it with `seckill audit \
                 --sale {id} --repair-from-sql`, or create it with \"replace\": true to start \
                 a new generation (the old one's orders stay in SQL)"
            ),
        ));
    }
    let orders = state.store.orders(id, stored.generation).await?;
    let sold: i64 = orders
        .iter()
        .filter(|o| o.state.is_live() || o.state == OrderState::Paid)
        .map(|o| o.quantity)
        .sum();
    tracing::warn!(
        sale = id,
        generation = stored.generation,
        orders = orders.len(),
        sold,
        "an admin replaced a sale Redis lost; the old generation's orders stay in SQL"
    );
    Ok(())
}

impl SaleBody {
    /// An archived sale as SQL recorded it: ended, every order settled.
    fn archived(s: StoredSale) -> Self {
        let stock = s.stock.max(0) as u64;
        let sold = s.archived_sold.unwrap_or(0).max(0) as u64;
        Self {
            id: s.id,
            name: s.name,
            stock,
            remaining: stock.saturating_sub(sold),
            sold,
            status: Status::Ended,
            rules: RuleFields(s.rules),
            payment_timeout_secs: s.payment_timeout_secs.max(0) as u64,
            sharding: None,
        }
    }
}

/// Sale `id` from Redis, or from SQL once archived; a sharded sale's pool
/// and shards only for an `admin`.
pub(super) async fn sale_body(
    state: &AppState,
    id: &str,
    admin: bool,
) -> Result<SaleBody, ApiError> {
    match state.engine.sale(id).await {
        Ok(sale) if admin => Ok(SaleBody::for_admin(sale)),
        Ok(sale) => Ok(SaleBody::from(sale)),
        Err(seckill_engine::Error::SaleNotFound(_)) => match state.store.sale(id).await? {
            Some(stored) if stored.archived_ms.is_some() => Ok(SaleBody::archived(stored)),
            Some(_) => Err(ApiError::sale_lost(id)),
            None => Err(seckill_engine::Error::SaleNotFound(id.to_owned()).into()),
        },
        Err(e) => Err(e.into()),
    }
}

/// `GET /v1/sales/{id}`: anyone (a storefront shows it).
pub async fn get_sale(State(state): Shared, caller: Caller, Path(id): Path<String>) -> Answer {
    check_id("sale id", &id)?;
    // Anyone may read a sale; a sharded one's inner workings are for admins.
    caller.checked()?;
    let admin = caller.is_admin();
    Ok(Json(sale_body(&state, &id, admin).await?).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SalesPage {
    status: Option<Status>,
    limit: Option<u32>,
    after: Option<String>,
}

/// The sales, by id, a page at a time; only those of `status` if given.
pub async fn list_sales(
    State(state): Shared,
    caller: Caller,
    query: Result<Query<SalesPage>, ApiError>,
) -> Answer {
    caller.admin()?;
    let Query(page) = query?;
    let limit = page_limit(page.limit)?;
    if let Some(after) = &page.after {
        check_id("after", after)?;
    }
    // Live sales from Redis (not the shards of sharded ones), archived
    // ones from SQL.
    let mut ids = state.engine.sale_ids().await?;
    ids.retain(|id| !is_shard(id));
    let mut archived: std::collections::HashMap<String, StoredSale> = state
        .store
        .archived_sales()
        .await?
        .into_iter()
        .map(|s| (s.id.clone(), s))
        .collect();
    ids.extend(archived.keys().cloned());
    ids.sort_unstable();
    ids.dedup();
    let mut sales = Vec::new();
    let after = page.after.as_deref().unwrap_or("");
    for id in ids.iter().filter(|id| id.as_str() > after) {
        let sale = match state.engine.sale(id).await {
            Ok(sale) => SaleBody::for_admin(sale),
            Err(seckill_engine::Error::SaleNotFound(_)) => match archived.remove(id) {
                Some(stored) => SaleBody::archived(stored),
                // Archived since SQL was read, or deleted.
                None => match state.store.sale(id).await? {
                    Some(stored) if stored.archived_ms.is_some() => SaleBody::archived(stored),
                    _ => continue,
                },
            },
            Err(e) => return Err(e.into()),
        };
        if page.status.is_none_or(|s| s == sale.status) {
            sales.push(sale);
            if sales.len() == limit as usize {
                break;
            }
        }
    }
    let next = (sales.len() == limit as usize)
        .then(|| sales.last().map(|s| s.id.clone()))
        .flatten();
    Ok(Json(json!({ "sales": sales, "next_after": next })).into_response())
}

/// Ends a sale now; its pending orders stay payable until their pay-by time.
pub async fn end_sale(State(state): Shared, caller: Caller, Path(id): Path<String>) -> Answer {
    caller.admin()?;
    check_id("sale id", &id)?;
    let sale = match state.engine.end_sale(&id).await {
        Ok(sale) => sale,
        // Archived: ended long since.
        Err(seckill_engine::Error::SaleNotFound(_)) => {
            return Ok(Json(sale_body(&state, &id, true).await?).into_response());
        }
        Err(e) => return Err(e.into()),
    };
    state.store.upsert_sale(&sale).await?;
    Ok(Json(SaleBody::for_admin(sale)).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StockBody {
    #[serde(default, deserialize_with = "present_whole")]
    add: Option<u64>,
    #[serde(default, deserialize_with = "present_whole")]
    set: Option<u64>,
}

/// Adds to a running sale's stock or sets it, never below what is sold.
pub async fn change_stock(
    State(state): Shared,
    caller: Caller,
    Path(id): Path<String>,
    body: Result<Body<StockBody>, ApiError>,
) -> Answer {
    caller.admin()?;
    let Body(body) = body?;
    check_id("sale id", &id)?;
    let change = match (body.add, body.set) {
        (Some(n), None) => StockChange::Add(n),
        (None, Some(n)) => StockChange::Set(n),
        _ => {
            return Err(ApiError::invalid(
                "send exactly one of `add` (units to add) and `set` (the new stock)",
            ));
        }
    };
    let sale = match state.engine.change_stock(&id, change).await {
        Err(seckill_engine::Error::SaleNotFound(_)) => {
            return Err(match state.store.sale(&id).await? {
                Some(stored) if stored.archived_ms.is_none() => ApiError::sale_lost(&id),
                _ => seckill_engine::Error::SaleNotFound(id.clone()).into(),
            });
        }
        other => other?,
    };
    state.restocked(&id);
    state.store.upsert_sale(&sale).await?;
    Ok(Json(SaleBody::for_admin(sale)).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PurchaseBody {
    /// Required in body mode; otherwise optional, and if sent it must name
    /// the caller.
    #[serde(default, deserialize_with = "present")]
    user_id: Option<String>,
    #[serde(default = "one", deserialize_with = "whole")]
    quantity: u32,
    #[serde(default, deserialize_with = "present")]
    request_id: Option<String>,
}

fn one() -> u32 {
    1
}

/// `POST /v1/sales/{id}/purchase`: a buyer, for itself.
pub async fn purchase(
    State(state): Shared,
    caller: Caller,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Result<Body<PurchaseBody>, ApiError>,
) -> Answer {
    caller.may_buy()?;
    let Body(body) = body?;
    let user_id = caller.buyer(body.user_id)?;
    check_id("sale id", &id)?;
    // One place for the request id, so that no request can carry two that
    // differ: the header, which a purchase once took too, is refused
    // rather than ignored, as a client relying on it would buy twice.
    if headers.contains_key("idempotency-key") {
        return Err(ApiError::invalid(
            "Idempotency-Key: a purchase takes its request id as `request_id` in the body",
        ));
    }
    let req = PurchaseRequest {
        user_id,
        quantity: body.quantity,
        request_id: body.request_id,
    };
    req.validate()?;
    let started = std::time::Instant::now();
    let answer = match state.purchase(&id, &req, caller.ip).await {
        // This instance's purchaser may be of a generation Redis no longer
        // holds (the sale was made again through another instance): once
        // more with a new one, before asking SQL.
        Err(e) if e.code == Code::SaleNotFound => {
            match state.purchase(&id, &req, caller.ip).await {
                Err(e) if e.code == Code::SaleNotFound => {
                    archived_purchase(&state, &id, &req).await
                }
                other => other,
            }
        }
        other => other,
    }
    .and_then(|outcome| match outcome {
        Outcome::Ok(order) | Outcome::Duplicate(order) => Ok(order),
        refused => Err(refusal(refused)),
    });
    let code = answer.as_ref().map_or_else(|e| e.code.as_str(), |_| "ok");
    state.activity.record(&id, code, started.elapsed());
    let order = answer?;
    Ok(Json(json!({
        "order_id": order.order_id,
        "status": "pending_payment",
        "quantity": order.quantity,
    }))
    .into_response())
}

/// A purchase of a sale no longer in Redis, answered from SQL.
async fn archived_purchase(
    state: &AppState,
    id: &str,
    req: &PurchaseRequest,
) -> Result<Outcome, ApiError> {
    match archived::purchase(&state.store, id, &req.user_id, req.request_id.as_deref()).await? {
        Found::Archived(outcome) => Ok(outcome),
        Found::Lost { sale_id } => Err(ApiError::sale_lost(&sale_id)),
        Found::Missing => Err(seckill_engine::Error::SaleNotFound(id.to_owned()).into()),
    }
}

fn refusal(outcome: Outcome) -> ApiError {
    let message = match outcome {
        Outcome::SoldOut => "no units left",
        Outcome::Refused(rule) => rule.refusal(),
        Outcome::Ok(_) | Outcome::Duplicate(_) => "bought",
    };
    // A purchase made is never refused; answered as unavailable if it were.
    let code = Code::of(&outcome).unwrap_or(Code::Unavailable);
    ApiError::conflict(code, message)
}

#[cfg(test)]
pub(crate) mod tests {
    use seckill_engine::{Inventory, ShardStock};

    use super::*;

    /// A sharded sale with every optional field set, as an admin sees it.
    pub(crate) fn full_sale() -> Sale {
        Sale {
            id: "s".into(),
            name: "n".into(),
            stock: 2,
            remaining: 1,
            sold: 1,
            rules: seckill_engine::Rules::default()
                .with(Rule::PerUserLimit, Some(1))
                .with(Rule::StartsAt, Some(1))
                .with(Rule::EndsAt, Some(2)),
            inventory: Inventory::Hash,
            payment_timeout_secs: 900,
            status: Status::Active,
            generation: 1,
            sharding: Some(Sharding {
                pool: 0,
                in_flight: 0,
                transfers: 1,
                drained: false,
                shards: vec![ShardStock {
                    id: "s~0".into(),
                    stock: 2,
                    remaining: 1,
                    sold: 1,
                }],
            }),
        }
    }

    #[test]
    fn a_sale_is_answered_as_the_document_says() {
        let answer = serde_json::to_value(SaleBody::for_admin(full_sale())).unwrap();
        crate::openapi::assert_fits("Sale", &answer);
    }
}
