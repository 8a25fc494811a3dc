//! The client settings, decided here once for every kind of target:
//! timeouts, the connection manager's configuration, how a list of nodes
//! is read, and [`Access`], what a client shows besides a URL.

use std::time::Duration;

use redis::aio::ConnectionManagerConfig;
use redis::{IntoConnectionInfo, RedisResult};

use crate::tls::Tls;

/// Longest wait to open a connection to a node.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// Longest wait for one answer. A flash sale would rather answer "try
/// again" than hold a buyer: no command waits longer than this, a
/// cluster's redirects and retries included.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

/// A connection manager that fails fast while its server is away, so a
/// service can start, and recover, without it.
pub(crate) fn manager_config() -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT))
        .set_number_of_retries(0)
        .set_max_delay(Duration::from_millis(200))
}

/// The URLs in a comma-separated list of `host:port` or URLs, each checked;
/// `empty` is the complaint for a list without any.
pub(crate) fn nodes_of(nodes: &str, empty: &'static str) -> RedisResult<Vec<String>> {
    let nodes: Vec<String> = nodes
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(|n| {
            if n.contains("://") {
                n.to_owned()
            } else {
                format!("redis://{n}/")
            }
        })
        .collect();
    if nodes.is_empty() {
        return Err(redis::RedisError::from((
            redis::ErrorKind::InvalidClientConfig,
            empty,
        )));
    }
    for node in &nodes {
        node.as_str().into_connection_info()?;
    }
    Ok(nodes)
}

/// What a client shows the servers (and sentinels) besides their URLs.
#[derive(Clone, Default)]
pub(crate) struct Access {
    pub(crate) tls: Tls,
    /// The servers' password, over any in their URLs: for a password kept
    /// out of the command line.
    pub(crate) password: Option<String>,
    /// The sentinels' password, over any in their URLs.
    pub(crate) sentinel_password: Option<String>,
}
