//! The auth settings: [`Auth`], where buyers' identities come from
//! ([`Buyers`], [`Jwt`], [`JwtKeys`]), the payment side's credentials and
//! the trusted proxies.

use std::time::Duration;

use axum::http::HeaderName;

use crate::secret::Secret;

/// How the service knows who is calling.
#[derive(Clone, Debug)]
pub struct Auth {
    /// Where a buyer's identity comes from.
    pub buyers: Buyers,
    /// Bearer token of the payment side: it may pay and cancel any order
    /// and nothing else.
    pub payments_token: Option<Secret>,
    /// Key of signed payment webhooks (`Seckill-Signature`).
    pub webhook_secret: Option<Secret>,
    /// Addresses of the shop's own proxies: only their `X-Forwarded-For`
    /// and user header are believed.
    pub trusted_proxies: Vec<ipnet::IpNet>,
}

impl Auth {
    /// Buyers as `buyers` says; no payment side, no trusted proxies.
    pub fn new(buyers: Buyers) -> Self {
        Self {
            buyers,
            payments_token: None,
            webhook_secret: None,
            trusted_proxies: Vec::new(),
        }
    }
}

/// Where a buyer's identity comes from.
#[derive(Clone, Debug)]
pub enum Buyers {
    /// `Authorization: Bearer <JWT>`, verified.
    Jwt(Jwt),
    /// A header set by the shop's gateway, believed only from
    /// [`Auth::trusted_proxies`].
    TrustedHeader(HeaderName),
    /// The body's `user_id`, unchecked: for trusted networks and benchmarks.
    Body,
}

/// How buyer tokens are verified.
#[derive(Clone, Debug)]
pub struct Jwt {
    /// The keys; each decides its own algorithm.
    pub keys: JwtKeys,
    /// The claim holding the user id (`sub` usually).
    pub user_claim: String,
    /// `iss` required to be this, when given.
    pub issuer: Option<String>,
    /// `aud` required to hold this, when given.
    pub audience: Option<String>,
    /// Shortest time between two fetches of a JWKS document caused by
    /// tokens naming keys it lacks (30 s).
    pub jwks_refetch_after: Duration,
}

impl Jwt {
    /// Tokens signed with `keys`, the user in `sub`, no issuer or audience.
    pub fn new(keys: JwtKeys) -> Self {
        Self {
            keys,
            user_claim: "sub".to_owned(),
            issuer: None,
            audience: None,
            jwks_refetch_after: Duration::from_secs(30),
        }
    }
}

/// Where the keys of buyer tokens come from.
#[derive(Clone, Debug)]
pub enum JwtKeys {
    /// A shared secret: HS256.
    Secret(Secret),
    /// A public key in PEM: RS256, ES256 or EdDSA by its type.
    PublicKeyPem(Vec<u8>),
    /// A JWKS document's URL (`http://` or `https://`); tokens name their
    /// key by `kid`.
    JwksUrl(String),
}
