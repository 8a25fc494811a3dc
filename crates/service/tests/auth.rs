//! Who may call what, over real HTTP against a private redis-server and
//! SQLite: forged and broken buyer tokens, another buyer's orders, pay
//! with a buyer's token, webhooks replayed or altered, a spoofed user
//! header, JWKS keys rotated mid-run. Each refusal has its code, and the
//! sale's books (sold, remaining, the rows in SQL) do not move.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::StatusCode;
use seckill_service::client::{Http, Signer};
use seckill_service::{Auth, Buyers, Jwt, JwtKeys, webhook};
use seckill_testkit::RedisServer;
use serde_json::{Value, json};

mod common;

const ADMIN: &str = "admin-token-for-tests";
const PAYMENTS: &str = "payments-token-for-tests";
const WEBHOOK: &str = "webhook-secret-for-tests";
const SECRET: &[u8] = b"an HS256 secret of at least thirty-two bytes";
const HOUR: Duration = Duration::from_secs(3600);

fn key(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/tests/keys/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

struct Rig {
    running: seckill_service::Running,
    redis: RedisServer,
    db: String,
    admin: Http,
    anonymous: Http,
    _dir: tempfile::TempDir,
}

impl Rig {
    async fn start(auth: Auth) -> Self {
        Self::start_with(auth, |_| {}).await
    }

    async fn start_with(auth: Auth, edit: impl FnOnce(&mut seckill_service::Config)) -> Self {
        let redis = RedisServer::start().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("o.db").to_string_lossy().into_owned();
        let mut config = common::config(seckill_redis::Target::server(&redis.url()), &db, ADMIN);
        config.auth = auth;
        edit(&mut config);
        let running = seckill_service::start(config).await.unwrap();
        let base = format!("http://{}", running.addr);
        let rig = Self {
            admin: Http::new(&base, Some(ADMIN.into())),
            anonymous: Http::new(&base, None),
            running,
            redis,
            db,
            _dir: dir,
        };
        let sale = json!({ "id": "s", "name": "x", "stock": 100, "per_user_limit": 3 });
        assert_eq!(rig.admin.post("/v1/sales", &sale).await.unwrap().0, 201);
        rig
    }

    fn as_token(&self, token: &str) -> Http {
        self.anonymous.with_token(Some(token.to_owned()))
    }

    async fn buy(&self, http: &Http, body: Value) -> (StatusCode, Value) {
        http.post("/v1/sales/s/purchase", &body).await.unwrap()
    }

    /// Sold and remaining as Redis holds them, and the orders in SQL with
    /// their states, once everything bought is persisted.
    async fn books(&self) -> (Value, Value, Vec<(String, String)>) {
        let engine = seckill_engine::Engine::connect(&self.redis.url())
            .await
            .unwrap();
        seckill_orders::wait_drained(&mut engine.connection(), "s", Duration::from_secs(10))
            .await
            .unwrap();
        let (_, sale) = self.admin.get("/v1/sales/s").await.unwrap();
        let store = seckill_orders::Store::open(&self.db).await.unwrap();
        let generation = engine.sale("s").await.unwrap().generation as i64;
        let rows = store
            .orders("s", generation)
            .await
            .unwrap()
            .into_iter()
            .map(|o| (o.order_id, o.state.as_str().to_owned()))
            .collect();
        (sale["sold"].clone(), sale["remaining"].clone(), rows)
    }
}

/// Asserts a refusal: status, stable code, plain words; a 401 names the
/// Bearer scheme.
fn refused(answer: (StatusCode, Value), status: u16, code: &str, what: &str) {
    assert_eq!(answer.0.as_u16(), status, "{what}: {}", answer.1);
    assert_eq!(answer.1["code"], code, "{what}: {}", answer.1);
    let message = answer.1["message"].as_str().unwrap_or_default();
    assert!(!message.is_empty(), "{what}");
    assert_eq!(common::internal_word(message), None, "{what}: {message}");
}

fn hs256() -> Auth {
    Auth {
        payments_token: Some(PAYMENTS.into()),
        webhook_secret: Some(WEBHOOK.into()),
        ..Auth::new(Buyers::Jwt(Jwt {
            issuer: Some("https://shop.example".into()),
            audience: Some("seckill".into()),
            ..Jwt::new(JwtKeys::Secret(SECRET.into()))
        }))
    }
}

fn now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

/// Claims a shop's identity service would issue for `user`.
fn claims(user: &str) -> Value {
    json!({ "sub": user, "exp": now() + 600, "iss": "https://shop.example", "aud": "seckill" })
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_and_broken_tokens_are_refused_and_change_nothing() {
    let rig = Rig::start(hs256()).await;
    let signer = Signer::hs256(SECRET);
    let good = signer.claims(&claims("alice"));
    let before = rig.books().await;

    let with = |edit: &dyn Fn(&mut Value)| {
        let mut c = claims("mallory");
        edit(&mut c);
        signer.claims(&c)
    };
    let none = format!(
        "{}.{}.",
        b64(br#"{"alg":"none","typ":"JWT"}"#),
        b64(claims("mallory").to_string().as_bytes())
    );
    let cases: Vec<(&str, String)> = vec![
        ("alg none", none),
        (
            "another secret",
            Signer::hs256(b"not the secret, though long enough to pass").claims(&claims("mallory")),
        ),
        ("expired", with(&|c| c["exp"] = json!(now() - 120))),
        ("not valid yet", with(&|c| c["nbf"] = json!(now() + 600))),
        (
            "no exp",
            with(&|c| {
                c.as_object_mut().unwrap().remove("exp");
            }),
        ),
        (
            "another issuer",
            with(&|c| c["iss"] = json!("https://evil.example")),
        ),
        ("another audience", with(&|c| c["aud"] = json!("billing"))),
        (
            "a user id of the wrong characters",
            with(&|c| c["sub"] = json!("auth0|123")),
        ),
        ("no user claim", with(&|c| c["sub"] = json!(null))),
        ("truncated", good[..good.len() - 6].to_owned()),
        (
            "its signature altered",
            format!("{}AAAA", &good[..good.len() - 4]),
        ),
        ("not a JWT", "a.b.c".to_owned()),
        ("64 KiB", format!("{good}{}", "A".repeat(64 * 1024))),
    ];
    for (what, token) in &cases {
        refused(
            rig.buy(&rig.as_token(token), json!({})).await,
            401,
            "unauthorized",
            what,
        );
    }
    // A header of 4 MB is refused before any handler: by the server's own
    // header limit (431), never with a 2xx.
    let huge = format!("Bearer {}", "A".repeat(4 << 20));
    let answer = common::raw_text(
        rig.running.addr,
        "POST",
        "/v1/sales/s/purchase",
        &[("authorization", &huge)],
        "{}",
    );
    assert!(
        answer.is_empty()
            || answer.starts_with("HTTP/1.1 431")
            || answer.starts_with("HTTP/1.1 401"),
        "{}",
        &answer[..answer.len().min(200)]
    );
    // No credential: 401 with the scheme named.
    let head = common::raw_text(rig.running.addr, "POST", "/v1/sales/s/purchase", &[], "{}");
    assert!(head.starts_with("HTTP/1.1 401"), "{head}");
    assert!(
        head.to_lowercase().contains("www-authenticate: bearer"),
        "{head}"
    );
    // A verified buyer may not buy as someone else, nor use admin routes.
    let alice = rig.as_token(&good);
    refused(
        rig.buy(&alice, json!({ "user_id": "bob" })).await,
        403,
        "forbidden",
        "as bob",
    );
    refused(
        alice
            .post(
                "/v1/sales",
                &json!({ "id": "t", "name": "x", "stock": 1, "per_user_limit": 1 }),
            )
            .await
            .unwrap(),
        403,
        "forbidden",
        "admin route",
    );
    // The admin and the payment side do not buy.
    refused(
        rig.buy(&rig.admin, json!({ "user_id": "alice" })).await,
        403,
        "forbidden",
        "admin buys",
    );
    assert_eq!(rig.books().await, before, "a refusal moved the books");

    // The same token, valid, buys (and again, from the cache) as alice.
    let (status, first) = rig.buy(&alice, json!({ "user_id": "alice" })).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(rig.buy(&alice, json!({})).await.0, 200);
    let (_, sale) = rig.admin.get("/v1/sales/s").await.unwrap();
    assert_eq!(sale["sold"], 2);
    let order = first["order_id"].as_str().unwrap();
    let (_, info) = alice.get(&format!("/v1/orders/{order}")).await.unwrap();
    assert_eq!(info["user_id"], "alice");
    rig.running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_algorithm_comes_from_the_public_key_never_from_the_token() {
    for (public, private, other) in [
        ("rsa.pub", "rsa.key", "rsa2.key"),
        ("ec.pub", "ec.key", "rsa.key"),
        ("ed.pub", "ed.key", "ec.key"),
    ] {
        let rig = Rig::start(Auth::new(Buyers::Jwt(Jwt::new(JwtKeys::PublicKeyPem(
            key(public),
        )))))
        .await;
        let before = rig.books().await;
        let forged = [
            // HS256 "signed" with the public key's bytes, as if it were a secret.
            (
                "HS256 with the public key as its secret",
                Signer::hs256(&key(public)).token("mallory", HOUR),
            ),
            (
                "signed by another key",
                Signer::pem(&key(other)).unwrap().token("mallory", HOUR),
            ),
        ];
        for (what, token) in &forged {
            refused(
                rig.buy(&rig.as_token(token), json!({})).await,
                401,
                "unauthorized",
                &format!("{public}: {what}"),
            );
        }
        assert_eq!(rig.books().await, before, "{public}");
        let token = Signer::pem(&key(private)).unwrap().token("alice", HOUR);
        let (status, answer) = rig.buy(&rig.as_token(&token), json!({})).await;
        assert_eq!(status, 200, "{public}: {answer}");
        rig.running.stop().await;
    }
}

/// A sale Redis lost answers `sale_lost` only to whoever may see it: its
/// buyer reading or cancelling an order of it, never another buyer, who
/// still gets 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_sale_is_told_only_to_whoever_may_see_its_orders() {
    let rig = Rig::start(hs256()).await;
    let signer = Signer::hs256(SECRET);
    let alice = rig.as_token(&signer.claims(&claims("alice")));
    let bob = rig.as_token(&signer.claims(&claims("bob")));
    let (status, body) = rig.buy(&alice, json!({})).await;
    assert_eq!(status, 200, "{body}");
    let order = body["order_id"].as_str().unwrap().to_owned();
    rig.books().await;
    let engine = seckill_engine::Engine::connect(&rig.redis.url())
        .await
        .unwrap();
    let () = redis::cmd("FLUSHALL")
        .query_async(&mut engine.connection())
        .await
        .unwrap();
    let path = format!("/v1/orders/{order}");
    for (who, http, status, code) in [
        ("its buyer", &alice, 503, "sale_lost"),
        ("another buyer", &bob, 404, "order_not_found"),
    ] {
        refused(http.get(&path).await.unwrap(), status, code, who);
        let cancel = format!("{path}/cancel");
        refused(
            http.post(&cancel, &json!({})).await.unwrap(),
            status,
            code,
            who,
        );
    }
    rig.running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_belong_to_their_buyer_and_only_the_payment_side_pays() {
    let rig = Rig::start(hs256()).await;
    let signer = Signer::hs256(SECRET);
    let alice = rig.as_token(&signer.claims(&claims("alice")));
    let bob = rig.as_token(&signer.claims(&claims("bob")));
    let payments = rig.as_token(PAYMENTS);
    let order_of = |answer: (StatusCode, Value)| {
        assert_eq!(answer.0, 200, "{}", answer.1);
        answer.1["order_id"].as_str().unwrap().to_owned()
    };
    let a1 = order_of(rig.buy(&alice, json!({})).await);
    let a2 = order_of(rig.buy(&alice, json!({})).await);
    let b1 = order_of(rig.buy(&bob, json!({})).await);
    let before = rig.books().await;

    // Another buyer's order reads as one that does not exist.
    for path in [
        format!("/v1/orders/{a1}"),
        "/v1/orders/s-1-2-3-4".to_owned(),
    ] {
        refused(bob.get(&path).await.unwrap(), 404, "order_not_found", &path);
        refused(
            bob.post(&format!("{path}/cancel"), &json!({}))
                .await
                .unwrap(),
            404,
            "order_not_found",
            "cancel",
        );
    }
    // Paying is never the buyer's act; nobody unnamed pays either.
    refused(
        alice
            .post(&format!("/v1/orders/{a1}/pay"), &json!({}))
            .await
            .unwrap(),
        403,
        "forbidden",
        "buyer pays",
    );
    refused(
        rig.anonymous
            .post(&format!("/v1/orders/{a1}/pay"), &json!({}))
            .await
            .unwrap(),
        401,
        "unauthorized",
        "anonymous pays",
    );
    // The payment side pays and cancels, and reads nothing.
    refused(
        payments.get(&format!("/v1/orders/{a1}")).await.unwrap(),
        403,
        "forbidden",
        "payments reads",
    );
    refused(
        payments.get("/v1/sales").await.unwrap(),
        403,
        "forbidden",
        "payments lists sales",
    );

    // Webhooks: too old, altered after signing, signed with another secret.
    let pay = format!("/v1/orders/{a1}/pay");
    let body = br#"{"payment_ref":"pi_123"}"#.to_vec();
    let send = |signature: String, body: Vec<u8>| {
        let (http, pay) = (rig.anonymous.clone(), pay.clone());
        async move {
            http.post_bytes(&pay, body.into(), &[(webhook::HEADER, &signature)])
                .await
                .unwrap()
        }
    };
    for (what, signature, sent) in [
        (
            "replayed with an old t",
            webhook::sign(WEBHOOK.as_bytes(), now() - 301, &body),
            body.clone(),
        ),
        (
            "a t from the future",
            webhook::sign(WEBHOOK.as_bytes(), now() + 301, &body),
            body.clone(),
        ),
        (
            "body changed after signing",
            webhook::sign(WEBHOOK.as_bytes(), now(), &body),
            br#"{"payment_ref":"pi_999"}"#.to_vec(),
        ),
        (
            "another secret",
            webhook::sign(b"whsec_other", now(), &body),
            body.clone(),
        ),
        ("no signature", "t=1".to_owned(), body.clone()),
    ] {
        refused(send(signature, sent).await, 401, "unauthorized", what);
    }
    assert_eq!(rig.books().await, before, "a refusal moved the books");
    let (_, still) = alice.get(&format!("/v1/orders/{a1}")).await.unwrap();
    assert_eq!(still["state"], "pending_payment");

    // A good webhook pays and keeps its reference; a redelivery changes nothing.
    let signed = webhook::sign(WEBHOOK.as_bytes(), now(), &body);
    for _ in 0..2 {
        let (status, paid) = send(signed.clone(), body.clone()).await;
        assert_eq!(
            (status.as_u16(), paid["state"].as_str()),
            (200, Some("paid")),
            "{paid}"
        );
    }
    let (_, mine) = alice.get(&format!("/v1/orders/{a1}")).await.unwrap();
    assert_eq!(
        (mine["state"].as_str(), mine["payment_ref"].as_str()),
        (Some("paid"), Some("pi_123"))
    );
    // The payments token pays too; the buyer cancels its own; the admin any.
    assert_eq!(
        payments
            .post(&format!("/v1/orders/{a2}/cancel"), &json!({}))
            .await
            .unwrap()
            .1["state"],
        "cancelled"
    );
    assert_eq!(
        rig.admin
            .post(&format!("/v1/orders/{b1}/pay"), &json!({}))
            .await
            .unwrap()
            .1["state"],
        "paid"
    );
    let b2 = order_of(rig.buy(&bob, json!({})).await);
    assert_eq!(
        bob.post(&format!("/v1/orders/{b2}/cancel"), &json!({}))
            .await
            .unwrap()
            .1["state"],
        "cancelled"
    );

    // Each buyer lists its own orders, and only its own.
    rig.books().await;
    let (status, listed) = alice.get("/v1/orders?sale=s").await.unwrap();
    assert_eq!(status, 200, "{listed}");
    let ids: Vec<&str> = listed["orders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["order_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [a1.as_str(), a2.as_str()]);
    refused(
        alice.get("/v1/orders?sale=s&user_id=bob").await.unwrap(),
        403,
        "forbidden",
        "list bob's",
    );
    let (_, all) = rig.admin.get("/v1/orders?sale=s").await.unwrap();
    assert_eq!(all["orders"].as_array().unwrap().len(), 4, "{all}");
    refused(
        rig.anonymous.get("/v1/orders?sale=s").await.unwrap(),
        401,
        "unauthorized",
        "anonymous list",
    );
    rig.running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_header_is_believed_only_from_trusted_proxies() {
    let header = |trusted: &str| Auth {
        trusted_proxies: vec![trusted.parse().unwrap()],
        ..Auth::new(Buyers::TrustedHeader("x-user-id".parse().unwrap()))
    };
    // Loopback is not this service's proxy: a spoofed header is refused.
    let rig = Rig::start(header("10.9.9.9/32")).await;
    let before = rig.books().await;
    let spoofed = rig
        .anonymous
        .post_bytes(
            "/v1/sales/s/purchase",
            "{}".into(),
            &[("x-user-id", "alice")],
        )
        .await
        .unwrap();
    refused(spoofed, 401, "unauthorized", "spoofed header");
    refused(
        rig.buy(&rig.anonymous, json!({ "user_id": "alice" })).await,
        401,
        "unauthorized",
        "no header",
    );
    assert_eq!(rig.books().await, before);
    rig.running.stop().await;

    // Behind a trusted proxy: the header names the buyer, and the address
    // limit applies to the address the proxy forwarded for.
    let rig = Rig::start_with(header("127.0.0.1/32"), |c| {
        c.rate_per_ip = 0.001;
        c.burst_per_ip = 2.0;
    })
    .await;
    let buy_from = |user: &'static str, from: &'static str| {
        let http = rig.anonymous.clone();
        async move {
            http.post_bytes(
                "/v1/sales/s/purchase",
                "{}".into(),
                &[("x-user-id", user), ("x-forwarded-for", from)],
            )
            .await
            .unwrap()
        }
    };
    let (status, first) = buy_from("alice", "203.0.113.7").await;
    assert_eq!(status, 200, "{first}");
    let order = first["order_id"].as_str().unwrap();
    let (_, info) = rig.admin.get(&format!("/v1/orders/{order}")).await.unwrap();
    assert_eq!(info["user_id"], "alice");
    assert_eq!(buy_from("bob", "203.0.113.7").await.0, 200);
    refused(
        buy_from("carol", "203.0.113.7").await,
        429,
        "rate_limited",
        "third from one address",
    );
    assert_eq!(
        buy_from("carol", "198.51.100.1").await.0,
        200,
        "another address"
    );
    let head = common::raw_text(
        rig.running.addr,
        "POST",
        "/v1/sales/s/purchase",
        &[("x-user-id", "bad|id")],
        "{}",
    );
    assert!(head.starts_with("HTTP/1.1 401"), "{head}");
    rig.running.stop().await;
}

/// A JWKS document served on loopback, changed at will, counting fetches.
struct Issuer {
    keys: Arc<Mutex<Option<Value>>>,
    fetches: Arc<AtomicUsize>,
    url: String,
}

impl Issuer {
    async fn start(keys: Value) -> Self {
        let shared = Arc::new(Mutex::new(Some(keys)));
        let fetches = Arc::new(AtomicUsize::new(0));
        let (s, f) = (shared.clone(), fetches.clone());
        let app = axum::Router::new().route(
            "/jwks.json",
            axum::routing::get(move || {
                let (s, f) = (s.clone(), f.clone());
                async move {
                    f.fetch_add(1, Ordering::SeqCst);
                    match s.lock().unwrap().clone() {
                        Some(keys) => (StatusCode::OK, keys.to_string()),
                        None => (StatusCode::INTERNAL_SERVER_ERROR, "down".to_owned()),
                    }
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self {
            keys: shared,
            fetches,
            url,
        }
    }

    fn serve(&self, keys: Option<Value>) {
        *self.keys.lock().unwrap() = keys;
    }

    fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }
}

/// A JWKS entry for the public half of the PEM private key `private`.
fn jwk(private: &str, alg: jsonwebtoken::Algorithm, kid: &str) -> Value {
    let pem = key(private);
    let encoding = match alg {
        jsonwebtoken::Algorithm::RS256 => jsonwebtoken::EncodingKey::from_rsa_pem(&pem),
        _ => jsonwebtoken::EncodingKey::from_ec_pem(&pem),
    }
    .unwrap();
    let mut jwk = jsonwebtoken::jwk::Jwk::from_encoding_key(&encoding, alg).unwrap();
    jwk.common.key_id = Some(kid.to_owned());
    serde_json::to_value(jwk).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwks_keys_rotate_and_a_removed_key_stops_verifying() {
    use jsonwebtoken::Algorithm::{ES256, RS256};
    let issuer = Issuer::start(json!({ "keys": [
        jwk("rsa.key", RS256, "k1"),
        jwk("ec.key", ES256, "ec1"),
        // A secret has no place in a published document: never used.
        { "kty": "oct", "kid": "oct1", "k": b64(SECRET) },
    ] }))
    .await;
    let refetch = Duration::from_millis(1500);
    let rig = Rig::start(Auth::new(Buyers::Jwt(Jwt {
        jwks_refetch_after: refetch,
        ..Jwt::new(JwtKeys::JwksUrl(issuer.url.clone()))
    })))
    .await;
    assert_eq!(issuer.fetches(), 1, "fetched once at start");
    let k1 = Signer::pem(&key("rsa.key")).unwrap().kid("k1");
    let k2 = Signer::pem(&key("rsa2.key")).unwrap().kid("k2");
    let old = k1.token("alice", HOUR);
    assert_eq!(rig.buy(&rig.as_token(&old), json!({})).await.0, 200);
    let before = rig.books().await;

    // Keys of another type under a known kid, and the document's secret.
    for (what, token) in [
        (
            "HS256 under an EC key's kid",
            Signer::hs256(SECRET).kid("ec1").token("mallory", HOUR),
        ),
        (
            "HS256 under the oct key's kid",
            Signer::hs256(SECRET).kid("oct1").token("mallory", HOUR),
        ),
        (
            "RS256 with no kid",
            Signer::pem(&key("rsa.key")).unwrap().token("mallory", HOUR),
        ),
    ] {
        refused(
            rig.buy(&rig.as_token(&token), json!({})).await,
            401,
            "unauthorized",
            what,
        );
    }
    // An unknown kid fetches again, at most once per interval however many ask.
    let fetched = issuer.fetches();
    for _ in 0..5 {
        refused(
            rig.buy(&rig.as_token(&k2.token("mallory", HOUR)), json!({}))
                .await,
            401,
            "unauthorized",
            "unknown kid",
        );
    }
    assert!(
        issuer.fetches() <= fetched + 1,
        "{} fetches",
        issuer.fetches()
    );
    assert_eq!(rig.books().await, before);

    // Rotation: k1 leaves, k2 arrives; after the interval a k2 token
    // verifies, and k1's token (verified and cached before) no longer does.
    issuer.serve(Some(json!({ "keys": [jwk("rsa2.key", RS256, "k2")] })));
    tokio::time::sleep(refetch + Duration::from_millis(200)).await;
    let (status, answer) = rig
        .buy(&rig.as_token(&k2.token("bob", HOUR)), json!({}))
        .await;
    assert_eq!(status, 200, "{answer}");
    refused(
        rig.buy(&rig.as_token(&old), json!({})).await,
        401,
        "unauthorized",
        "a removed key's token",
    );

    // The issuer goes down: the last good keys still verify.
    issuer.serve(None);
    tokio::time::sleep(refetch + Duration::from_millis(200)).await;
    let fetched = issuer.fetches();
    refused(
        rig.buy(&rig.as_token(&k1.token("mallory", HOUR)), json!({}))
            .await,
        401,
        "unauthorized",
        "unknown kid while down",
    );
    assert_eq!(issuer.fetches(), fetched + 1, "the failing fetch was tried");
    assert_eq!(
        rig.buy(&rig.as_token(&k2.token("carol", HOUR)), json!({}))
            .await
            .0,
        200
    );
    rig.running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_body_mode_buyers_name_themselves_but_nobody_unnamed_pays() {
    let rig = Rig::start(Auth::new(Buyers::Body)).await;
    refused(
        rig.buy(&rig.anonymous, json!({})).await,
        400,
        "invalid_request",
        "no user_id",
    );
    let (status, bought) = rig.buy(&rig.anonymous, json!({ "user_id": "ann" })).await;
    assert_eq!(status, 200, "{bought}");
    let order = bought["order_id"].as_str().unwrap();
    refused(
        rig.anonymous
            .post(&format!("/v1/orders/{order}/pay"), &json!({}))
            .await
            .unwrap(),
        401,
        "unauthorized",
        "anonymous pays",
    );
    // Credentials nobody issued are refused, not ignored.
    refused(
        rig.as_token("guess").get("/v1/sales/s").await.unwrap(),
        401,
        "unauthorized",
        "unknown token",
    );
    assert_eq!(
        rig.anonymous
            .get("/v1/orders?sale=s&user_id=ann")
            .await
            .unwrap()
            .0,
        200
    );
    rig.running.stop().await;
}

/// The document's `security` of every operation is what the service
/// enforces: a role the operation does not list is refused (403 for a
/// known caller, 401 for none), one it lists is let through, and a forged
/// credential is refused (401) everywhere, on public routes too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_takes_exactly_the_roles_its_document_lists() {
    let rig = Rig::start(hs256()).await;
    let signer = Signer::hs256(SECRET);
    let buyer_token = signer.claims(&claims("alice"));
    let (_, bought) = rig.buy(&rig.as_token(&buyer_token), json!({})).await;
    let order = bought["order_id"].as_str().unwrap().to_owned();
    let (_, doc) = rig.anonymous.get("/openapi.json").await.unwrap();
    let callers = [
        ("admin", rig.admin.clone()),
        ("payments", rig.as_token(PAYMENTS)),
        ("buyer", rig.as_token(&buyer_token)),
        ("anonymous", rig.anonymous.clone()),
        ("forged", rig.as_token("guess")),
    ];
    let mut checked = 0;
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for (method, op) in ops.as_object().unwrap() {
            let security = op["security"]
                .as_array()
                .unwrap_or_else(|| panic!("{method} {path} states no security"));
            let listed: Vec<&str> = security
                .iter()
                .map(|r| {
                    r.as_object()
                        .unwrap()
                        .keys()
                        .next()
                        .map_or("anonymous", |k| k.as_str())
                })
                .collect();
            let concrete = path
                .replace("{id}", "s")
                .replace("{order_id}", &order)
                .replace(
                    "/v1/orders",
                    if path == "/v1/orders" {
                        "/v1/orders?sale=s"
                    } else {
                        "/v1/orders"
                    },
                );
            // Stock and purchases with bodies that pass; ending last.
            let body = match path.as_str() {
                "/v1/sales/{id}/stock" => json!({ "add": 1 }),
                "/v1/sales" => {
                    json!({ "id": format!("n{checked}"), "name": "x", "stock": 1, "per_user_limit": 1 })
                }
                _ => json!({}),
            };
            if path.ends_with("/end") || path.ends_with("/stream") {
                continue;
            }
            for (role, http) in &callers {
                // A public route takes anyone with no credential or a good
                // one; the served document (jwt buyers) lists `{}` nowhere else.
                let public = listed.contains(&"anonymous") && *role != "forged";
                let allowed = public || listed.contains(role);
                let (status, answer) = if method == "get" {
                    http.get(&concrete).await.unwrap()
                } else {
                    http.post(&concrete, &body).await.unwrap()
                };
                let refused_as = match status.as_u16() {
                    401 => Some("unauthorized"),
                    403 => Some("forbidden"),
                    _ => None,
                };
                if allowed {
                    assert_eq!(
                        refused_as, None,
                        "{role} {method} {concrete}: {status} {answer}"
                    );
                } else {
                    let want = if matches!(*role, "anonymous" | "forged") {
                        401
                    } else {
                        403
                    };
                    assert_eq!(
                        status.as_u16(),
                        want,
                        "{role} {method} {concrete}: {answer}"
                    );
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 80, "{checked} checks");
    rig.running.stop().await;
}
