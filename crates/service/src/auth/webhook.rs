//! Payment webhooks: the payment side signs `"<t>.<raw body>"` with a
//! shared secret (HMAC-SHA256) and sends `Seckill-Signature: t=<unix
//! seconds>,v1=<hex>`. A signature more than five minutes off the
//! service's clock is refused, so a captured request cannot be replayed
//! later; within that window a replay pays an already paid order, which
//! changes nothing.
//!
//! ```
//! use seckill_service::webhook;
//! let body = br#"{"payment_ref":"pi_1"}"#;
//! let header = webhook::sign(b"whsec", 1_700_000_000, body);
//! assert!(header.starts_with("t=1700000000,v1="));
//! ```

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::ApiError;
use crate::secret::Secret;

/// The header carrying the signature.
pub const HEADER: &str = "seckill-signature";
/// Largest difference between `t` and the service's clock, in seconds.
pub const TOLERANCE_SECS: u64 = 300;

fn mac(secret: &[u8], t: u64, body: &[u8]) -> Hmac<Sha256> {
    // HMAC takes a key of any length.
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(t.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// The `Seckill-Signature` value for `body` sent at `t` (Unix seconds).
pub fn sign(secret: &[u8], t: u64, body: &[u8]) -> String {
    let tag = mac(secret, t, body).finalize().into_bytes();
    format!("t={t},v1={}", hex::encode(tag))
}

/// Checks `header` against `body` at `now` (Unix seconds). Several `v1`
/// values may be sent (one per secret while a secret is rotated); any
/// match will do, and each is compared in constant time.
pub(crate) fn verify(secret: &Secret, header: &str, body: &[u8], now: u64) -> Result<(), ApiError> {
    let mut t = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", v)) => t = v.parse::<u64>().ok(),
            Some(("v1", v)) => signatures.push(v),
            _ => {}
        }
    }
    let t = t.ok_or_else(|| ApiError::unauthorized("Seckill-Signature: no `t=<unix seconds>`"))?;
    if t.abs_diff(now) > TOLERANCE_SECS {
        return Err(ApiError::unauthorized(
            "Seckill-Signature: `t` is more than 300 s from the service's clock",
        ));
    }
    let expected = mac(secret.expose(), t, body);
    let good = signatures
        .iter()
        .any(|s| hex::decode(s).is_ok_and(|tag| expected.clone().verify_slice(&tag).is_ok()));
    if good {
        Ok(())
    } else {
        Err(ApiError::unauthorized(
            "Seckill-Signature: the signature does not match the body",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::{sign, verify};
    use crate::secret::Secret;

    #[test]
    fn a_signature_holds_for_its_body_and_time_only() {
        let secret = Secret::from("whsec_test");
        let body = br#"{"payment_ref":"pi_1"}"#;
        let header = sign(b"whsec_test", 1_000, body);
        assert!(verify(&secret, &header, body, 1_000).is_ok());
        assert!(verify(&secret, &header, body, 1_300).is_ok());
        assert!(verify(&secret, &header, body, 1_301).is_err(), "too old");
        assert!(verify(&secret, &header, br#"{"payment_ref":"pi_2"}"#, 1_000).is_err());
        assert!(verify(&Secret::from("other"), &header, body, 1_000).is_err());
        let rotated = format!("{},v1=00ff", header);
        assert!(verify(&secret, &rotated, body, 1_000).is_ok());
        assert!(verify(&secret, "v1=abcd", body, 1_000).is_err(), "no t");
    }
}
