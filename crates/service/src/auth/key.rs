//! A verifying key with the one algorithm it takes, and the claims rules
//! every token is held to. The algorithm always comes from the key, never
//! from the token: `alg: none`, or HS256 "signed" with an RSA key's public
//! bytes, meets a validation that allows only the key's own algorithm.

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};

/// Seconds of clock difference allowed on `exp` and `nbf`.
const LEEWAY_SECS: u64 = 30;

/// What every token must show besides its signature.
#[derive(Clone, Debug)]
pub struct Rules {
    pub issuer: Option<String>,
    pub audience: Option<String>,
}

impl Rules {
    fn validation(&self, alg: Algorithm) -> Validation {
        let mut v = Validation::new(alg);
        v.leeway = LEEWAY_SECS;
        v.validate_nbf = true;
        v.set_required_spec_claims(&["exp"]);
        if let Some(iss) = &self.issuer {
            v.set_issuer(&[iss]);
            v.required_spec_claims.insert("iss".to_owned());
        }
        match &self.audience {
            Some(aud) => {
                v.set_audience(&[aud]);
                v.required_spec_claims.insert("aud".to_owned());
            }
            // No audience configured: a token naming one is not ours to judge.
            None => v.validate_aud = false,
        }
        v
    }
}

/// A key and the validation of its algorithm.
pub struct Key {
    pub key: DecodingKey,
    pub validation: Validation,
}

impl Key {
    /// An HS256 secret.
    pub fn secret(secret: &[u8], rules: &Rules) -> Self {
        Self {
            key: DecodingKey::from_secret(secret),
            validation: rules.validation(Algorithm::HS256),
        }
    }

    /// A public key in PEM: RSA (RS256), EC P-256 (ES256) or Ed25519
    /// (EdDSA), told apart by the key itself.
    pub fn pem(pem: &[u8], rules: &Rules) -> Result<Self, String> {
        let (key, alg) = if let Ok(k) = DecodingKey::from_rsa_pem(pem) {
            (k, Algorithm::RS256)
        } else if let Ok(k) = DecodingKey::from_ec_pem(pem) {
            (k, Algorithm::ES256)
        } else if let Ok(k) = DecodingKey::from_ed_pem(pem) {
            (k, Algorithm::EdDSA)
        } else {
            return Err("not an RSA, EC P-256 or Ed25519 public key in PEM".to_owned());
        };
        Ok(Self {
            key,
            validation: rules.validation(alg),
        })
    }

    /// A key of a JWKS document: its algorithm from `alg` when given, else
    /// from its type. Secret (`oct`) keys and encryption keys are refused:
    /// a published document is no place for either.
    pub fn jwk(jwk: &Jwk, rules: &Rules) -> Result<Self, String> {
        if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
            return Err("an encryption key".to_owned());
        }
        let by_type = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => Algorithm::RS256,
            AlgorithmParameters::EllipticCurve(p) => match p.curve {
                EllipticCurve::P256 => Algorithm::ES256,
                EllipticCurve::P384 => Algorithm::ES384,
                _ => return Err("an elliptic curve other than P-256 and P-384".to_owned()),
            },
            AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => {
                Algorithm::EdDSA
            }
            AlgorithmParameters::OctetKey(_) => return Err("a secret (oct) key".to_owned()),
            _ => return Err("a key type this service does not verify".to_owned()),
        };
        let alg = match jwk.common.key_algorithm {
            None => by_type,
            Some(named) => {
                let named = match named {
                    KeyAlgorithm::RS256 => Algorithm::RS256,
                    KeyAlgorithm::RS384 => Algorithm::RS384,
                    KeyAlgorithm::RS512 => Algorithm::RS512,
                    KeyAlgorithm::PS256 => Algorithm::PS256,
                    KeyAlgorithm::PS384 => Algorithm::PS384,
                    KeyAlgorithm::PS512 => Algorithm::PS512,
                    KeyAlgorithm::ES256 => Algorithm::ES256,
                    KeyAlgorithm::ES384 => Algorithm::ES384,
                    KeyAlgorithm::EdDSA => Algorithm::EdDSA,
                    _ => return Err("an algorithm this service does not verify".to_owned()),
                };
                if named.family() != by_type.family() {
                    return Err("an `alg` that does not fit its key type".to_owned());
                }
                named
            }
        };
        let key = DecodingKey::from_jwk(jwk).map_err(|e| e.to_string())?;
        Ok(Self {
            key,
            validation: rules.validation(alg),
        })
    }
}
