//! Buyer tokens: verified once, then known by their SHA-256 until they
//! expire. A buyer repeats its token on every request of a sale, and a
//! hash lookup costs a fraction of a signature check (an RS256 check is a
//! purchase's whole CPU cost several times over).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use jsonwebtoken::errors::ErrorKind;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::config::{Jwt, JwtKeys};
use super::jwks::{Jwks, REFRESH_EVERY};
use super::key::{Key, Rules};
use crate::error::ApiError;
use crate::locks::{read, write};

/// Longest token looked at; real ones are well under 2 KiB.
const MAX_TOKEN: usize = 8 * 1024;
/// Verified tokens remembered; past it, expired ones are dropped, and if
/// none are, all.
const MAX_CACHED: usize = 200_000;

enum Keys {
    One(Arc<Key>),
    Jwks(Arc<Jwks>),
}

/// A token's buyer, when its `exp` (plus leeway) passes, and the key set
/// it was verified against: a token of a key that left a JWKS document is
/// not known any more.
struct Known {
    user: String,
    until: u64,
    keys: u64,
}

pub struct Verifier {
    keys: Keys,
    user_claim: String,
    known: RwLock<HashMap<[u8; 32], Known>>,
}

impl Verifier {
    pub async fn new(jwt: &Jwt) -> Result<Self, crate::Error> {
        let rules = Rules {
            issuer: jwt.issuer.clone(),
            audience: jwt.audience.clone(),
        };
        let config = |e: String| crate::Error::Config(e);
        let keys = match &jwt.keys {
            JwtKeys::Secret(secret) => {
                // RFC 7518 §3.2: an HS256 key at least as long as the hash.
                if secret.expose().len() < 32 {
                    return Err(config(
                        "the JWT secret must be at least 32 bytes long".to_owned(),
                    ));
                }
                Keys::One(Arc::new(Key::secret(secret.expose(), &rules)))
            }
            JwtKeys::PublicKeyPem(pem) => Keys::One(Arc::new(
                Key::pem(pem, &rules).map_err(|e| config(format!("the JWT public key: {e}")))?,
            )),
            JwtKeys::JwksUrl(url) => {
                let jwks = Jwks::new(url, rules, jwt.jwks_refetch_after).map_err(config)?;
                jwks.refresh(std::time::Duration::ZERO).await;
                Keys::Jwks(Arc::new(jwks))
            }
        };
        Ok(Self {
            keys,
            user_claim: jwt.user_claim.clone(),
            known: RwLock::default(),
        })
    }

    /// The user id a valid token names; 401 with the reason otherwise.
    pub async fn verify(&self, token: &str) -> Result<String, ApiError> {
        if token.len() > MAX_TOKEN {
            return Err(ApiError::unauthorized("the token is longer than 8 KiB"));
        }
        let hash: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let now = jsonwebtoken::get_current_timestamp();
        let keys = match &self.keys {
            Keys::One(_) => 0,
            Keys::Jwks(jwks) => {
                // Fetched again in the background every few minutes, also
                // while every token is known: a removed key must stop
                // verifying even if no token names a new one.
                if jwks.stale(REFRESH_EVERY) {
                    let jwks = jwks.clone();
                    tokio::spawn(async move { jwks.refresh(REFRESH_EVERY).await });
                }
                jwks.version()
            }
        };
        if let Some(known) = read(&self.known).get(&hash)
            && known.until >= now
            && known.keys == keys
        {
            return Ok(known.user.clone());
        }
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| ApiError::unauthorized("the token is not a well-formed JWT"))?;
        let key = match &self.keys {
            Keys::One(key) => key.clone(),
            Keys::Jwks(jwks) => {
                let kid = header
                    .kid
                    .as_deref()
                    .ok_or_else(|| ApiError::unauthorized("the token names no key (`kid`)"))?;
                jwks.key(kid).await.ok_or_else(|| {
                    ApiError::unauthorized(
                        "the token's key (`kid`) is not one of the issuer's keys",
                    )
                })?
            }
        };
        let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &key.validation)
            .map_err(|e| ApiError::unauthorized(refusal(e.kind())))?;
        let user = match data.claims.get(&self.user_claim) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => {
                return Err(ApiError::unauthorized(format!(
                    "the token has no `{}` claim naming the user",
                    self.user_claim
                )));
            }
        };
        seckill_engine::check_id("user id", &user).map_err(|_| {
            ApiError::unauthorized(format!(
                "the token's `{}` claim is not a user id this service takes (1-64 of A-Z a-z 0-9 _ -); \
                 name another claim with --jwt-user-claim",
                self.user_claim
            ))
        })?;
        let exp = data.claims.get("exp").and_then(Value::as_u64).unwrap_or(0);
        let until = exp.saturating_add(key.validation.leeway);
        let mut known = write(&self.known);
        if known.len() >= MAX_CACHED {
            known.retain(|_, k| k.until >= now);
            if known.len() >= MAX_CACHED {
                known.clear();
            }
        }
        known.insert(
            hash,
            Known {
                user: user.clone(),
                until,
                keys,
            },
        );
        Ok(user)
    }
}

/// Why a token was refused, in plain words.
fn refusal(kind: &ErrorKind) -> String {
    match kind {
        ErrorKind::ExpiredSignature => "the token has expired".to_owned(),
        ErrorKind::ImmatureSignature => "the token is not valid yet (`nbf`)".to_owned(),
        ErrorKind::InvalidSignature => "the token's signature does not verify".to_owned(),
        ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName => {
            "the token's algorithm is not the one its key takes".to_owned()
        }
        ErrorKind::InvalidIssuer => "the token's issuer (`iss`) is not the expected one".to_owned(),
        ErrorKind::InvalidAudience => "the token's audience (`aud`) is not this service".to_owned(),
        ErrorKind::MissingRequiredClaim(claim) => format!("the token has no `{claim}` claim"),
        _ => "the token is not a well-formed JWT".to_owned(),
    }
}
