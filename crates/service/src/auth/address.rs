//! The client's address. `X-Forwarded-For` is anyone's to write, so it is
//! read only when the connection comes from a trusted proxy, and then from
//! the right: each trusted hop is skipped, and the first address that is
//! not a trusted proxy is the client.

use std::net::IpAddr;

use axum::http::HeaderMap;
use ipnet::IpNet;

/// The address to rate-limit: `peer`, or when `peer` is a trusted proxy
/// the nearest untrusted address it forwarded for.
pub fn client_ip(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|n| n.contains(ip));
    if !is_trusted(&peer) {
        return peer;
    }
    let mut client = peer;
    // Several headers count as one list, in order.
    let hops = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect::<Vec<_>>();
    for hop in hops.into_iter().rev() {
        let Ok(ip) = hop.parse::<IpAddr>() else {
            // Garbage from the client's side: stop at the last good hop.
            break;
        };
        client = ip;
        if !is_trusted(&ip) {
            break;
        }
    }
    client
}

#[cfg(test)]
mod tests {
    use super::client_ip;
    use axum::http::HeaderMap;

    #[test]
    fn forwarded_for_is_believed_only_from_trusted_proxies() {
        let trusted = ["10.0.0.0/8".parse().unwrap()];
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-forwarded-for",
            "6.6.6.6, 1.2.3.4, 10.0.0.2".parse().unwrap(),
        );
        let ip = |s: &str| s.parse().unwrap();
        // From a trusted proxy: the first untrusted hop from the right.
        assert_eq!(client_ip(ip("10.0.0.1"), &headers, &trusted), ip("1.2.3.4"));
        // From anyone else: the header is theirs to forge.
        assert_eq!(client_ip(ip("9.9.9.9"), &headers, &trusted), ip("9.9.9.9"));
        // No proxies trusted: never read.
        assert_eq!(client_ip(ip("10.0.0.1"), &headers, &[]), ip("10.0.0.1"));
        headers.insert("x-forwarded-for", "not-an-ip, 10.0.0.3".parse().unwrap());
        assert_eq!(
            client_ip(ip("10.0.0.1"), &headers, &trusted),
            ip("10.0.0.3")
        );
    }
}
