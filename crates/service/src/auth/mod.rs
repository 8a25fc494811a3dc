//! Who is calling: the admin, the payment side, a buyer (from a verified
//! JWT or a trusted gateway's header), or nobody known.
//!
//! - `jwt`: buyer tokens checked against a secret, a public key or a JWKS
//!   document, cached by hash until they expire.
//! - `jwks`: the JWKS document, fetched and kept.
//! - `webhook`: payment webhooks signed with HMAC-SHA256.
//! - `address`: the client's address, through trusted proxies only.
//!
//! Every route names the roles it takes (see `docs/security.md`); a
//! credential that is present but wrong is refused, never ignored.

mod address;
mod config;
mod jwks;
mod jwt;
mod key;
pub mod webhook;

use std::net::{IpAddr, SocketAddr};

use axum::extract::ConnectInfo;
use axum::http::header;
use axum::http::request::Parts;

use crate::error::ApiError;
use crate::secret::Secret;

use address::client_ip;
pub use config::{Auth, Buyers, Jwt, JwtKeys};
use jwt::Verifier;

/// A caller as its credentials show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Who {
    /// The admin token.
    Admin,
    /// The payment side's token.
    Payments,
    /// A buyer, by verified user id.
    Buyer(String),
    /// No credential.
    Anonymous,
}

/// The caller of a request: who, or why its credential was refused (which
/// only matters to a route that needs one). Also where it calls from.
pub struct Caller {
    who: Result<Who, ApiError>,
    /// Whether buyers name themselves in the body (`--buyer-auth body`).
    body_mode: bool,
    /// The client's address, through trusted proxies.
    pub ip: Option<IpAddr>,
}

/// The shared part of the auth settings, ready to check requests.
pub(crate) struct Checker {
    pub config: Auth,
    pub admin_token: Secret,
    pub jwt: Option<Verifier>,
}

impl Checker {
    /// Loads the keys (and fetches a JWKS document once) at start.
    pub async fn new(config: Auth, admin_token: Secret) -> Result<Self, crate::Error> {
        let jwt = match &config.buyers {
            Buyers::Jwt(jwt) => Some(Verifier::new(jwt).await?),
            _ => None,
        };
        Ok(Self {
            config,
            admin_token,
            jwt,
        })
    }

    /// The caller of the request whose head is `parts`.
    pub async fn caller(&self, parts: &Parts) -> Caller {
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip());
        Caller {
            who: self.identify(parts, peer).await,
            body_mode: matches!(self.config.buyers, Buyers::Body),
            ip: peer.map(|p| client_ip(p, &parts.headers, &self.config.trusted_proxies)),
        }
    }

    async fn identify(&self, parts: &Parts, peer: Option<IpAddr>) -> Result<Who, ApiError> {
        if let Some(value) = parts.headers.get(header::AUTHORIZATION) {
            let token = value
                .to_str()
                .ok()
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .ok_or_else(|| {
                    ApiError::unauthorized("send the credential as `Authorization: Bearer <token>`")
                })?;
            if self.admin_token.matches(token) {
                return Ok(Who::Admin);
            }
            if self
                .config
                .payments_token
                .as_ref()
                .is_some_and(|t| t.matches(token))
            {
                return Ok(Who::Payments);
            }
            return match &self.jwt {
                Some(verifier) => verifier.verify(token).await.map(Who::Buyer),
                None => Err(ApiError::unauthorized(
                    "the bearer token is not one this service accepts",
                )),
            };
        }
        if let Buyers::TrustedHeader(name) = &self.config.buyers
            && let Some(value) = parts.headers.get(name)
        {
            let trusted =
                peer.is_some_and(|p| self.config.trusted_proxies.iter().any(|n| n.contains(&p)));
            if !trusted {
                return Err(ApiError::unauthorized(format!(
                    "the {name} header is believed only from the shop's trusted proxies"
                )));
            }
            let user = value
                .to_str()
                .map_err(|_| ApiError::unauthorized(format!("{name}: not a user id")))?;
            seckill_engine::check_id("user id", user)
                .map_err(|e| ApiError::unauthorized(format!("{name}: {e}")))?;
            return Ok(Who::Buyer(user.to_owned()));
        }
        Ok(Who::Anonymous)
    }
}

/// What a caller may do with an order.
#[derive(Debug, PartialEq, Eq)]
pub enum OrderAccess {
    /// Any order.
    All,
    /// Only orders of this buyer.
    Own(String),
}

impl OrderAccess {
    /// Whether an order of `user` is visible: another buyer's order is
    /// treated as one that does not exist.
    pub fn sees(&self, user: &str) -> bool {
        match self {
            Self::All => true,
            Self::Own(own) => own == user,
        }
    }
}

impl Caller {
    fn who(&self) -> Result<&Who, ApiError> {
        self.who.as_ref().map_err(Clone::clone)
    }

    /// Admin routes.
    pub fn admin(&self) -> Result<(), ApiError> {
        match self.who()? {
            Who::Admin => Ok(()),
            Who::Anonymous => Err(ApiError::unauthorized(
                "this route needs the admin token: Authorization: Bearer <token>",
            )),
            _ => Err(ApiError::forbidden("this route is for the admin only")),
        }
    }

    /// Refuses a request whose credential was refused, on routes anyone
    /// may call: a wrong credential is never silently ignored.
    pub fn checked(&self) -> Result<(), ApiError> {
        self.who().map(|_| ())
    }

    /// Whether the caller is the admin; a refused credential is not.
    pub fn is_admin(&self) -> bool {
        matches!(self.who, Ok(Who::Admin))
    }

    /// Refuses, before its body is read, a purchase by anyone but a buyer
    /// (or, in body mode, an anonymous caller).
    pub fn may_buy(&self) -> Result<(), ApiError> {
        match self.who()? {
            Who::Buyer(_) => Ok(()),
            // Anonymous in body mode passes; anyone else gets its refusal.
            _ => self.buyer(Some(String::new())).map(|_| ()),
        }
    }

    /// The buyer a purchase is for: the verified caller, whom a `user_id`
    /// in the body may repeat but not change; in body mode, the body's.
    pub fn buyer(&self, body_user: Option<String>) -> Result<String, ApiError> {
        let who = self.who()?;
        match who {
            Who::Buyer(user) => match body_user {
                Some(named) if &named != user => Err(ApiError::forbidden(
                    "user_id differs from the user your credential names; leave it out",
                )),
                _ => Ok(user.clone()),
            },
            Who::Anonymous if self.body_mode => {
                body_user.ok_or_else(|| ApiError::invalid("user_id: required"))
            }
            Who::Anonymous => Err(ApiError::unauthorized(
                "purchases need a buyer's credential: Authorization: Bearer <token>",
            )),
            Who::Admin | Who::Payments => Err(ApiError::forbidden(
                "purchases are made by buyers, with a buyer's credential",
            )),
        }
    }

    /// Reading one's orders: the admin any, a buyer its own; in body mode
    /// an anonymous caller any (the network is trusted).
    pub fn reader(&self) -> Result<OrderAccess, ApiError> {
        match self.who()? {
            Who::Admin => Ok(OrderAccess::All),
            Who::Buyer(user) => Ok(OrderAccess::Own(user.clone())),
            Who::Anonymous if self.body_mode => Ok(OrderAccess::All),
            Who::Anonymous => Err(ApiError::unauthorized(
                "orders are shown to their buyer: Authorization: Bearer <token>",
            )),
            Who::Payments => Err(ApiError::forbidden(
                "the payment side may pay and cancel, not read",
            )),
        }
    }

    /// Cancelling: the admin and the payment side any order, a buyer its
    /// own; in body mode an anonymous caller any.
    pub fn canceller(&self) -> Result<OrderAccess, ApiError> {
        match self.who()? {
            Who::Payments => Ok(OrderAccess::All),
            _ => self.reader(),
        }
    }

    /// Paying (without a signed webhook): the payment side or the admin.
    pub fn payer(&self) -> Result<(), ApiError> {
        match self.who()? {
            Who::Admin | Who::Payments => Ok(()),
            Who::Buyer(_) => Err(ApiError::forbidden(
                "orders are paid by the payment side, not by the buyer",
            )),
            Who::Anonymous => Err(ApiError::unauthorized(
                "paying needs the payment side's token or a signed webhook",
            )),
        }
    }
}
