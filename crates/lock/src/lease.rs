//! Lease arithmetic: how long a grant is surely valid, and the margins that
//! keep that answer on the safe side of clock drift.

use std::time::{Duration, Instant};

/// A grant seen at `asked` with `left` of its `lease` to run is surely valid
/// until then, less the drift margin.
/// Longest `acquire` waits, whatever it is asked, on one server or many.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(24 * 3600);

pub(crate) fn valid_until(asked: Instant, lease: Duration, left: Duration) -> Instant {
    asked + left.min(lease).saturating_sub(drift(lease))
}

/// Allowance for clock drift between this process and Redis over one lease,
/// as the Redlock description suggests: 1% of the lease plus 2 ms.
pub(crate) fn drift(lease: Duration) -> Duration {
    lease / 100 + Duration::from_millis(2)
}

/// A PTTL answer as a duration (0 when the key has no expiry or is gone).
pub(crate) fn remaining(pttl: i64) -> Duration {
    Duration::from_millis(u64::try_from(pttl).unwrap_or(0))
}

/// A duration as the whole milliseconds the scripts take.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
