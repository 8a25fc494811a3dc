use std::fmt::Write;
use std::sync::Arc;

use crate::error::{Error, Result};

/// Key prefix used unless [`LocksBuilder::prefix`](crate::LocksBuilder::prefix)
/// says otherwise.
pub const DEFAULT_PREFIX: &str = "seckill:lock";

/// Longest lock name accepted, in bytes.
pub const MAX_NAME_LEN: usize = 512;

/// The four keys of a lock or a semaphore, in the order its functions
/// take them.
pub(crate) type FourKeys = Arc<[String; 4]>;

/// The Redis keys behind one lock name. The name sits in a `{hash tag}` so
/// all four keys map to one cluster slot and a script may touch them together.
#[derive(Debug)]
pub(crate) struct Keys {
    pub name: String,
    /// lock, fence, queue, waiters: the order every script expects.
    pub all: FourKeys,
}

impl Keys {
    pub fn new(prefix: &str, name: &str) -> Result<Self> {
        check("lock name", name, MAX_NAME_LEN)?;
        let lock = format!("{prefix}:{{{name}}}");
        Ok(Self {
            name: name.to_owned(),
            all: Arc::new([
                lock.clone(),
                format!("{lock}:fence"),
                format!("{lock}:queue"),
                format!("{lock}:waiters"),
            ]),
        })
    }
}

/// Checks a name or prefix that becomes part of a key or channel: braces would
/// change the hash tag, `|` and `:` separate fields inside the scripts' values.
pub(crate) fn check(what: &'static str, value: &str, max: usize) -> Result<()> {
    let reason = if value.is_empty() {
        "must not be empty".to_owned()
    } else if value.len() > max {
        format!("longer than {max} bytes")
    } else if let Some(c) = value
        .chars()
        .find(|c| matches!(c, '{' | '}' | '|') || c.is_control() || c.is_whitespace())
    {
        format!("contains {c:?}")
    } else {
        return Ok(());
    };
    Err(Error::Invalid { what, reason })
}

/// A fresh 128-bit random token, as 32 hex digits.
pub(crate) fn token() -> String {
    let mut s = String::with_capacity(32);
    let _ = write!(s, "{:032x}", rand::random::<u128>());
    s
}
