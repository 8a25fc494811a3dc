//! Where a lock lives: one server ([`Single`]) or a Redlock quorum
//! ([`Quorum`]). Every operation is dispatched here, once.

use std::time::{Duration, Instant};

use crate::error::Result;
use crate::keys::Keys;
use crate::redlock::Quorum;
use crate::single::Single;

pub(crate) enum Backend {
    Single(Single),
    Quorum(Quorum),
}

impl Backend {
    /// Grants the lock to `token` if it is free now: its fence, or `None`.
    pub async fn try_grant(
        &self,
        keys: &Keys,
        token: &str,
        lease: Duration,
    ) -> Result<Option<u64>> {
        match self {
            Self::Single(s) => s.try_grant(keys, token, lease).await,
            Self::Quorum(q) => q.try_grant(keys, token, lease).await,
        }
    }

    /// Waits up to `timeout` for the lock: its fence and until when the
    /// grant is surely valid.
    pub async fn wait_grant(
        &self,
        keys: &Keys,
        token: &str,
        lease: Duration,
        timeout: Duration,
    ) -> Result<(u64, Instant)> {
        match self {
            Self::Single(s) => s.wait_grant(keys, token, lease, timeout).await,
            Self::Quorum(q) => q.wait_grant(keys, token, lease, timeout).await,
        }
    }

    /// Releases the lock if `token` holds it; answers whether it did.
    pub async fn release(&self, keys: &Keys, token: &str) -> Result<bool> {
        match self {
            Self::Single(s) => s.release(keys, token).await,
            Self::Quorum(q) => q.release(keys, token).await,
        }
    }

    /// Renews `token`'s lease if it still holds the lock.
    pub async fn extend(&self, keys: &Keys, token: &str, lease: Duration) -> Result<bool> {
        match self {
            Self::Single(s) => s.extend(keys, token, lease).await,
            Self::Quorum(q) => q.extend(keys, token, lease).await,
        }
    }

    /// Makes every later fence greater than `floor`.
    pub async fn raise_fence(&self, keys: &Keys, floor: u64) -> Result<()> {
        match self {
            Self::Single(s) => s.raise_fence(keys, floor).await,
            Self::Quorum(q) => q.raise_fence(keys, floor).await,
        }
    }

    /// Undoes whatever an acquire that was cancelled or failed midway left:
    /// a queue entry, or a grant nobody will use.
    pub async fn abandon(&self, keys: &Keys, token: &str) -> Result<()> {
        match self {
            Self::Single(s) => s.abandon(keys, token).await,
            Self::Quorum(q) => q.release(keys, token).await.map(drop),
        }
    }
}
