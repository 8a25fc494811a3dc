//! This machine's clock, as the background tasks compare it with times
//! Redis and SQL hold (ms since the Unix epoch).

/// Milliseconds since the Unix epoch by this machine's clock (0 before it).
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
