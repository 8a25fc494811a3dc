//! A credential held as a secret: never printed, compared in constant time.

use subtle::ConstantTimeEq;

/// A token or key. Its `Debug` says only whether it is set; comparing it
/// takes the same time wherever the first differing byte is.
///
/// ```
/// let token = seckill_service::Secret::from("s3cret");
/// assert!(token.matches("s3cret"));
/// assert_eq!(format!("{token:?}"), "Secret(<redacted>)");
/// ```
#[derive(Clone, Default)]
pub struct Secret(Vec<u8>);

impl Secret {
    /// Reads a secret from a file, without the trailing newline an editor
    /// or `echo` leaves; an empty file is refused.
    pub fn from_file(path: &std::path::Path) -> Result<Self, crate::Error> {
        let bytes = std::fs::read(path).map_err(|e| {
            crate::Error::Config(format!(
                "cannot read the secret file {}: {e}",
                path.display()
            ))
        })?;
        let end = bytes
            .iter()
            .rposition(|b| !matches!(b, b'\r' | b'\n'))
            .map_or(0, |i| i + 1);
        let secret = &bytes[..end];
        if secret.is_empty() {
            return Err(crate::Error::Config(format!(
                "the secret file {} is empty",
                path.display()
            )));
        }
        Ok(Self(secret.to_vec()))
    }

    /// Whether `given` is this secret (never true for an empty secret).
    pub fn matches(&self, given: &str) -> bool {
        !self.0.is_empty() && bool::from(given.as_bytes().ct_eq(&self.0))
    }

    /// Whether it is empty (no credential configured).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The secret itself, for the one place that signs or verifies with it.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl From<&str> for Secret {
    fn from(s: &str) -> Self {
        Self(s.as_bytes().to_vec())
    }
}

impl From<&[u8]> for Secret {
    fn from(s: &[u8]) -> Self {
        Self(s.to_vec())
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            f.write_str("Secret(<empty>)")
        } else {
            f.write_str("Secret(<redacted>)")
        }
    }
}
