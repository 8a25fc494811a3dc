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
pub struct Secret(String);

impl Secret {
    /// Reads a secret from a file, without the trailing newline an editor
    /// or `echo` leaves; an empty file is refused.
    pub fn from_file(path: &std::path::Path) -> Result<Self, crate::Error> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            crate::Error::Config(format!(
                "cannot read the secret file {}: {e}",
                path.display()
            ))
        })?;
        let secret = text.trim_end_matches(['\r', '\n']);
        if secret.is_empty() {
            return Err(crate::Error::Config(format!(
                "the secret file {} is empty",
                path.display()
            )));
        }
        Ok(Self(secret.to_owned()))
    }

    /// Whether `given` is this secret (never true for an empty secret).
    pub fn matches(&self, given: &str) -> bool {
        !self.0.is_empty() && bool::from(given.as_bytes().ct_eq(self.0.as_bytes()))
    }

    /// Whether it is empty (no credential configured).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The secret itself, for the one place that signs or verifies with it.
    pub fn expose(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl From<&str> for Secret {
    fn from(s: &str) -> Self {
        Self(s.to_owned())
    }
}

impl From<String> for Secret {
    fn from(s: String) -> Self {
        Self(s)
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
