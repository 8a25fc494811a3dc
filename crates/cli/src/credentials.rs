//! `serve`'s credentials: the admin token, where buyers' identities come
//! from, the payment side's token and webhook secret, trusted proxies.
//! Secrets are read from files (or the environment), never taken as
//! command-line values that `ps` would show.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args as ClapArgs;
use seckill_service::{Auth, Buyers, Jwt, JwtKeys, Secret};

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum BuyerAuth {
    /// `Authorization: Bearer <JWT>`, verified.
    Jwt,
    /// A header set by the shop's gateway, from --trusted-proxies only.
    TrustedHeader,
    /// The body's `user_id`, unchecked: trusted networks and benchmarks.
    Body,
}

#[derive(ClapArgs)]
pub struct Credentials {
    /// Bearer token of the admin routes (never logged). Prefer
    /// --admin-token-file: a value here shows in `ps`.
    #[arg(long, env = "SECKILL_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// A file holding the admin token.
    #[arg(long, env = "SECKILL_ADMIN_TOKEN_FILE")]
    admin_token_file: Option<PathBuf>,
    /// Where a buyer's identity comes from: jwt, trusted-header or body.
    #[arg(long, env = "SECKILL_BUYER_AUTH", value_enum)]
    buyer_auth: Option<BuyerAuth>,
    /// jwt: the claim holding the user id.
    #[arg(long, env = "SECKILL_JWT_USER_CLAIM", default_value = "sub")]
    jwt_user_claim: String,
    /// jwt: a file holding the HS256 secret (32 bytes or more).
    #[arg(long, env = "SECKILL_JWT_SECRET_FILE")]
    jwt_secret_file: Option<PathBuf>,
    /// jwt: a PEM public key; RS256, ES256 or EdDSA by its type.
    #[arg(long, env = "SECKILL_JWT_PUBLIC_KEY_FILE")]
    jwt_public_key_file: Option<PathBuf>,
    /// jwt: the identity provider's JWKS document (http:// or https://).
    #[arg(long, env = "SECKILL_JWKS_URL")]
    jwks_url: Option<String>,
    /// jwt: the required `iss`.
    #[arg(long, env = "SECKILL_JWT_ISSUER")]
    jwt_issuer: Option<String>,
    /// jwt: the required `aud`.
    #[arg(long, env = "SECKILL_JWT_AUDIENCE")]
    jwt_audience: Option<String>,
    /// trusted-header: the header holding the user id.
    #[arg(long, env = "SECKILL_USER_HEADER", default_value = "X-User-Id")]
    user_header: String,
    /// The shop's own proxies (CIDR or address, comma-separated): only
    /// their user header and X-Forwarded-For are believed.
    #[arg(long, env = "SECKILL_TRUSTED_PROXIES", value_delimiter = ',')]
    trusted_proxies: Vec<String>,
    /// A file holding the payment side's bearer token (pays and cancels
    /// any order, nothing else).
    #[arg(long, env = "SECKILL_PAYMENTS_TOKEN_FILE")]
    payments_token_file: Option<PathBuf>,
    /// A file holding the secret of signed payment webhooks.
    #[arg(long, env = "SECKILL_WEBHOOK_SECRET_FILE")]
    webhook_secret_file: Option<PathBuf>,
}

impl Credentials {
    /// The admin token, from its file or its value.
    pub fn admin_token(&self) -> Result<Secret> {
        let token = match (&self.admin_token, &self.admin_token_file) {
            (Some(_), Some(_)) => bail!("give --admin-token or --admin-token-file, not both"),
            (Some(token), None) => Secret::from(token.as_str()),
            (None, Some(file)) => Secret::from_file(file)?,
            (None, None) => {
                bail!("the admin token is required: --admin-token-file FILE (or --admin-token)")
            }
        };
        anyhow::ensure!(!token.is_empty(), "--admin-token must not be empty");
        Ok(token)
    }

    /// The buyer mode and the payment side's credentials.
    pub fn auth(&self) -> Result<Auth> {
        let Some(mode) = self.buyer_auth else {
            bail!(
                "--buyer-auth is required: `jwt` (verified tokens), `trusted-header` \
                 (behind your gateway, with --trusted-proxies) or `body` (user id in the \
                 body, unchecked: trusted networks and benchmarks only)"
            );
        };
        let trusted_proxies = self
            .trusted_proxies
            .iter()
            .filter(|p| !p.trim().is_empty())
            .map(|p| parse_net(p.trim()))
            .collect::<Result<Vec<_>>>()?;
        let buyers = match mode {
            BuyerAuth::Jwt => Buyers::Jwt(self.jwt()?),
            BuyerAuth::TrustedHeader => {
                anyhow::ensure!(
                    !trusted_proxies.is_empty(),
                    "--buyer-auth trusted-header needs --trusted-proxies: the header is \
                     believed only from them"
                );
                let name = axum_header(&self.user_header)?;
                Buyers::TrustedHeader(name)
            }
            BuyerAuth::Body => Buyers::Body,
        };
        let file = |f: &Option<PathBuf>| -> Result<Option<Secret>> {
            Ok(match f {
                Some(path) => Some(Secret::from_file(path)?),
                None => None,
            })
        };
        Ok(Auth {
            buyers,
            payments_token: file(&self.payments_token_file)?,
            webhook_secret: file(&self.webhook_secret_file)?,
            trusted_proxies,
        })
    }

    fn jwt(&self) -> Result<Jwt> {
        let keys = match (
            &self.jwt_secret_file,
            &self.jwt_public_key_file,
            &self.jwks_url,
        ) {
            (Some(file), None, None) => JwtKeys::Secret(Secret::from_file(file)?),
            (None, Some(file), None) => JwtKeys::PublicKeyPem(
                std::fs::read(file)
                    .with_context(|| format!("reading the JWT public key {}", file.display()))?,
            ),
            (None, None, Some(url)) => JwtKeys::JwksUrl(url.clone()),
            _ => bail!(
                "--buyer-auth jwt takes exactly one of --jwt-secret-file, \
                 --jwt-public-key-file and --jwks-url"
            ),
        };
        Ok(Jwt {
            user_claim: self.jwt_user_claim.clone(),
            issuer: self.jwt_issuer.clone(),
            audience: self.jwt_audience.clone(),
            ..Jwt::new(keys)
        })
    }
}

/// A network (`10.0.0.0/8`) or one address (`127.0.0.1`, `::1`).
fn parse_net(s: &str) -> Result<ipnet::IpNet> {
    if let Ok(net) = s.parse() {
        return Ok(net);
    }
    s.parse::<std::net::IpAddr>()
        .map(ipnet::IpNet::from)
        .with_context(|| format!("--trusted-proxies: `{s}` is not an address or CIDR range"))
}

fn axum_header(name: &str) -> Result<seckill_service::HeaderName> {
    name.parse()
        .with_context(|| format!("--user-header: `{name}` is not a header name"))
}
