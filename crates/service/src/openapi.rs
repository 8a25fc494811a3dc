//! The API's OpenAPI document as this service runs it. `openapi.json` is
//! written for every setting; the buyers mode, the payment token and the
//! webhook secret decide which of its security schemes this service has
//! (and so which ways of calling a route it lists), and whether a purchase
//! must name its buyer in the body. A client generated from
//! `GET /openapi.json` is generated for the service it will talk to.

use serde_json::{Value, json};

use crate::auth::{Auth, Buyers};

/// The document, before this service's settings are applied.
const TEMPLATE: &str = include_str!("openapi.json");

/// The security requirement, in `openapi.json`, of a buyer who names itself
/// in the body (`--buyer-auth body`): anonymous in that mode, absent in
/// the others.
const BODY_BUYER: &str = "bodyBuyer";

/// `openapi.json` with the purchase rules filled in from the engine's
/// (see [`crate::rules`]), before this service's settings are applied.
pub(crate) fn template() -> Value {
    let mut doc: Value = serde_json::from_str(TEMPLATE).expect("openapi.json is JSON");
    crate::rules::document(&mut doc);
    doc
}

/// The document for a service with the settings `auth`.
pub fn document(auth: &Auth) -> Value {
    let mut doc = template();
    let mut schemes = vec!["admin"];
    match &auth.buyers {
        Buyers::Jwt(_) => schemes.push("buyer"),
        Buyers::TrustedHeader(name) => {
            schemes.push("userHeader");
            doc["components"]["securitySchemes"]["userHeader"]["name"] = json!(name.as_str());
        }
        Buyers::Body => {
            schemes.push(BODY_BUYER);
            doc["components"]["schemas"]["Purchase"]["required"] = json!(["user_id"]);
        }
    }
    if auth.payments_token.is_some() {
        schemes.push("payments");
    }
    let webhooks = auth.webhook_secret.is_some();
    if webhooks {
        schemes.push("webhook");
    }
    if let Some(all) = doc["components"]["securitySchemes"].as_object_mut() {
        all.retain(|name, _| schemes.contains(&name.as_str()));
    }
    let Some(paths) = doc["paths"].as_object_mut() else {
        return doc;
    };
    for op in paths.values_mut().filter_map(Value::as_object_mut) {
        for op in op.values_mut().filter_map(Value::as_object_mut) {
            if let Some(security) = op.get_mut("security").and_then(Value::as_array_mut) {
                security.retain(|r| {
                    r.as_object()
                        .is_some_and(|r| r.keys().all(|k| schemes.contains(&k.as_str())))
                });
                for requirement in security.iter_mut() {
                    if requirement.get(BODY_BUYER).is_some() {
                        *requirement = json!({});
                    }
                }
            }
            if !webhooks
                && let Some(params) = op.get_mut("parameters").and_then(Value::as_array_mut)
            {
                params.retain(|p| {
                    !p["name"]
                        .as_str()
                        .is_some_and(|n| n.eq_ignore_ascii_case(crate::auth::webhook::HEADER))
                });
            }
        }
    }
    doc
}

/// Asserts that `answer`, a body with every optional field present, has
/// exactly the properties `schema` of the document lists, recursing into
/// the objects it references.
#[cfg(test)]
pub(crate) fn assert_fits(schema: &str, answer: &Value) {
    let doc = template();
    fits(&doc, &doc["components"]["schemas"][schema], answer, schema);
}

#[cfg(test)]
fn fits(doc: &Value, schema: &Value, answer: &Value, at: &str) {
    if let Some(target) = schema["$ref"].as_str() {
        let name = target.rsplit('/').next().unwrap();
        return fits(doc, &doc["components"]["schemas"][name], answer, at);
    }
    match answer {
        // A map: any keys, each value as `additionalProperties` says.
        Value::Object(fields) if schema["additionalProperties"].is_object() => {
            for (name, value) in fields {
                let each = &schema["additionalProperties"];
                fits(doc, each, value, &format!("{at}.{name}"));
            }
        }
        Value::Object(fields) => {
            let properties = schema["properties"]
                .as_object()
                .unwrap_or_else(|| panic!("{at}: no properties for {answer}"));
            let listed: std::collections::BTreeSet<&String> = properties.keys().collect();
            let sent: std::collections::BTreeSet<&String> = fields.keys().collect();
            assert_eq!(sent, listed, "{at}");
            for (name, value) in fields {
                fits(doc, &properties[name], value, &format!("{at}.{name}"));
            }
        }
        Value::Array(items) => {
            for item in items {
                fits(doc, &schema["items"], item, &format!("{at}[]"));
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::auth::Jwt;
    use crate::auth::JwtKeys;
    use crate::secret::Secret;

    /// Every setting on: every scheme the template has.
    fn full() -> Value {
        let secret = Secret::from("x".repeat(32).as_str());
        let mut auth = Auth::new(Buyers::Jwt(Jwt::new(JwtKeys::Secret(secret))));
        auth.payments_token = Some(Secret::from("p"));
        auth.webhook_secret = Some(Secret::from("w"));
        document(&auth)
    }

    #[test]
    fn every_route_is_in_the_document_and_nothing_else_is() {
        let doc = full();
        let routed: BTreeSet<(String, String)> = crate::routes::table()
            .into_iter()
            .map(|(path, method, _)| (path.to_owned(), method.as_str().to_lowercase()))
            .collect();
        let documented: BTreeSet<(String, String)> = doc["paths"]
            .as_object()
            .unwrap()
            .iter()
            .flat_map(|(path, ops)| {
                ops.as_object()
                    .unwrap()
                    .keys()
                    .map(move |m| (path.clone(), m.clone()))
            })
            .collect();
        assert_eq!(routed, documented);
    }

    /// The fields serde reads: with `deny_unknown_fields`, its error for an
    /// unknown field lists every field the type has.
    fn fields_of<T: serde::de::DeserializeOwned>() -> BTreeSet<String> {
        fields_beside::<T>(json!({}))
    }

    /// [`fields_of`] a body read with a `flatten`ed part, which serde reads
    /// (and so finds an unknown field) only once the fields it requires are
    /// there: an unknown field beside `sample`.
    fn fields_beside<T: serde::de::DeserializeOwned>(mut sample: Value) -> BTreeSet<String> {
        sample["~"] = json!(0);
        let Err(e) = serde_json::from_value::<T>(sample) else {
            panic!("an unknown field was taken");
        };
        let e = e.to_string();
        // "expected `a`", "expected `a` or `b`", "expected one of `a`, `b`, ...".
        let listed = e.split_once("expected ").unwrap_or_else(|| panic!("{e}")).1;
        listed
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect()
    }

    fn keys(v: &Value) -> BTreeSet<String> {
        v.as_object().unwrap().keys().cloned().collect()
    }

    /// Each request body's fields are the schema's; each field the schema
    /// does not require can be left out, each it requires cannot, and
    /// none takes null.
    fn body_matches<T: serde::de::DeserializeOwned>(schema: &str, sample: Value) {
        let doc = full();
        let schema = &doc["components"]["schemas"][schema];
        assert_eq!(
            fields_beside::<T>(sample.clone()),
            keys(&schema["properties"]),
            "{schema}"
        );
        assert_eq!(keys(&sample), keys(&schema["properties"]));
        serde_json::from_value::<T>(sample.clone()).expect("the sample is read");
        let required: BTreeSet<String> = schema["required"]
            .as_array()
            .map(|r| r.iter().map(|f| f.as_str().unwrap().to_owned()).collect())
            .unwrap_or_default();
        for field in keys(&sample) {
            let mut without = sample.clone();
            without.as_object_mut().unwrap().remove(&field);
            let read = serde_json::from_value::<T>(without).is_ok();
            assert_eq!(read, !required.contains(&field), "{field} left out");
            let mut null = sample.clone();
            null[&field] = Value::Null;
            assert!(serde_json::from_value::<T>(null).is_err(), "{field}: null");
        }
    }

    #[test]
    fn request_bodies_are_the_documents() {
        use crate::routes::{orders, sales};
        body_matches::<sales::NewSale>(
            "NewSale",
            json!({"id": "a", "name": "n", "stock": 1, "per_user_limit": 1, "starts_at": 1,
                   "ends_at": "2026-11-23T10:00:00Z", "payment_timeout_secs": 1, "shards": 1, "replace": false}),
        );
        body_matches::<sales::StockBody>("StockChange", json!({"add": 1, "set": 2}));
        body_matches::<sales::PurchaseBody>(
            "Purchase",
            json!({"user_id": "u", "quantity": 1, "request_id": "r"}),
        );
        body_matches::<orders::PayBody>("Payment", json!({"payment_ref": "x"}));
    }

    #[test]
    fn query_parameters_are_the_documents() {
        use crate::routes::{orders, sales};
        let doc = full();
        for (path, fields) in [
            ("/v1/sales", fields_of::<sales::SalesPage>()),
            ("/v1/sales/{id}/orders", fields_of::<orders::Page>()),
            ("/v1/orders", fields_of::<orders::MinePage>()),
        ] {
            let documented: BTreeSet<String> = doc["paths"][path]["get"]["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| p["in"] == "query")
                .map(|p| p["name"].as_str().unwrap().to_owned())
                .collect();
            assert_eq!(fields, documented, "{path}");
        }
    }

    #[test]
    fn the_documents_bounds_are_the_services() {
        let doc = full();
        let schemas = &doc["components"]["schemas"];
        let sale = &schemas["NewSale"]["properties"];
        for time in ["starts_at", "ends_at"] {
            assert_eq!(
                sale[time]["oneOf"][0]["pattern"],
                crate::time::DATE_TIME_PATTERN
            );
            assert_eq!(sale[time]["oneOf"][1]["maximum"], crate::time::LATEST);
        }
        assert_eq!(sale["stock"]["maximum"], seckill_engine::MAX_STOCK);
        assert_eq!(sale["shards"]["maximum"], seckill_engine::MAX_SHARDS);
        assert_eq!(sale["id"]["maxLength"], seckill_engine::MAX_ID_LEN);
        let purchase = &schemas["Purchase"]["properties"];
        assert_eq!(
            purchase["quantity"]["maximum"],
            seckill_engine::MAX_QUANTITY
        );
        let order_id = &doc["paths"]["/v1/orders/{order_id}"]["get"]["parameters"][0]["schema"];
        assert_eq!(order_id["maxLength"], seckill_engine::MAX_ORDER_ID_LEN);
    }

    /// Who may call is stated on every operation, an anonymous caller
    /// too (`{}`), never left to a default.
    #[test]
    fn every_operation_says_who_may_call_it() {
        let doc = full();
        for (path, ops) in doc["paths"].as_object().unwrap() {
            for (method, op) in ops.as_object().unwrap() {
                let security = op["security"].as_array();
                assert!(
                    security.is_some_and(|s| !s.is_empty()),
                    "{method} {path} does not say who may call it"
                );
                assert!(op["responses"]["401"].is_object(), "{method} {path}: 401");
            }
        }
    }

    #[test]
    fn each_buyers_mode_lists_only_its_own_schemes() {
        let body = document(&Auth::new(Buyers::Body));
        assert_eq!(
            keys(&body["components"]["securitySchemes"]),
            ["admin".to_owned()].into()
        );
        assert_eq!(
            body["components"]["schemas"]["Purchase"]["required"],
            json!(["user_id"])
        );
        let purchase = &body["paths"]["/v1/sales/{id}/purchase"]["post"];
        assert_eq!(purchase["security"], json!([{}]));
        let header = document(&Auth::new(Buyers::TrustedHeader(
            axum::http::HeaderName::from_static("x-shop-user"),
        )));
        assert_eq!(
            header["components"]["securitySchemes"]["userHeader"]["name"],
            "x-shop-user"
        );
        let purchase = &header["paths"]["/v1/sales/{id}/purchase"]["post"];
        assert_eq!(purchase["security"], json!([{"userHeader": []}]));
        let text = full().to_string();
        assert!(!text.contains(BODY_BUYER), "a pseudo scheme left in");
    }
}
