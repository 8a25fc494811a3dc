//! [`Master`]: the masters behind a [`Target`] and the slots each serves,
//! for tools that measure or drive every master (per-master Redis time,
//! `redis-benchmark` against the master of one sale).

use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisResult, Value};

use crate::settings::RESPONSE_TIMEOUT;
use crate::target::Target;
use crate::tls::Tls;

/// A master: the one server, or one master of a cluster.
#[derive(Clone, Debug)]
pub struct Master {
    info: ConnectionInfo,
    tls: Tls,
    /// Inclusive slot ranges it serves (all of them for one server).
    slots: Vec<(u16, u16)>,
}

impl Master {
    /// `host:port`.
    pub fn addr(&self) -> String {
        self.info.addr().to_string()
    }

    /// Host and port, for tools that take them apart.
    pub fn host_port(&self) -> Option<(String, u16)> {
        match self.info.addr() {
            ConnectionAddr::Tcp(host, port) => Some((host.clone(), *port)),
            _ => None,
        }
    }

    /// A client for this master alone (the seed's credentials and TLS
    /// settings, `TCP_NODELAY`).
    pub fn client(&self) -> RedisResult<redis::Client> {
        self.tls.client(self.info.clone())
    }

    /// The inclusive slot ranges it serves.
    pub fn slots(&self) -> &[(u16, u16)] {
        &self.slots
    }

    /// Whether it serves hash slot `slot` (see [`key_slot`]).
    pub fn serves(&self, slot: u16) -> bool {
        self.slots.iter().any(|&(a, b)| (a..=b).contains(&slot))
    }
}

impl Target {
    /// The masters now: the server itself, the master the sentinels name,
    /// or a cluster's masters that serve slots, as the first seed node to
    /// answer sees them. Seeds are
    /// asked in turn, each but the last given half a second, so a frozen
    /// one costs that, not a whole response timeout.
    pub async fn masters(&self) -> RedisResult<Vec<Master>> {
        let tls = self.tls().clone();
        let seeds = match self.master_client().await? {
            Some(server) => {
                return Ok(vec![Master {
                    info: server.get_connection_info().clone(),
                    tls,
                    slots: vec![(0, 16383)],
                }]);
            }
            None => self.seeds(),
        };
        let mut last = None;
        for (i, seed) in seeds.iter().enumerate() {
            let wait = if i + 1 == seeds.len() {
                RESPONSE_TIMEOUT
            } else {
                SEED_WAIT
            };
            match shards(self.client_for(seed)?, &tls, wait).await {
                Ok(masters) => return Ok(masters),
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("a cluster target has at least one seed"))
    }

    /// The master that serves `key` now (the one server, or on a cluster
    /// the master of the key's slot), for a tool that must talk to it
    /// directly, as `redis-benchmark` does.
    pub async fn master_of(&self, key: &str) -> RedisResult<Master> {
        let slot = key_slot(key);
        self.masters()
            .await?
            .into_iter()
            .find(|m| m.serves(slot))
            .ok_or_else(|| {
                redis::RedisError::from((
                    redis::ErrorKind::Server(redis::ServerErrorKind::ClusterDown),
                    "no master serves the key's slot",
                ))
            })
    }
}

/// The Redis Cluster hash slot of `key`: CRC16 of its hash tag (the part
/// between the first `{` and the next `}`, if not empty), or of the whole
/// key, modulo 16384, as every cluster node computes it.
///
/// ```
/// // The example of the Redis Cluster specification.
/// assert_eq!(seckill_redis::key_slot("123456789"), 0x31C3);
/// assert_eq!(seckill_redis::key_slot("{user1000}.following"), seckill_redis::key_slot("user1000"));
/// ```
pub fn key_slot(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let tagged = bytes.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &bytes[open + 1..];
        let close = rest.iter().position(|&b| b == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    crc16::State::<crc16::XMODEM>::calculate(tagged.unwrap_or(bytes)) % 16384
}

/// How long a seed node that is not the last may take to say which
/// masters serve which slots before the next one is asked.
const SEED_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// `CLUSTER SHARDS` of `seed`, given `wait` to connect and to answer: each
/// shard's slots and its master (at its TLS port if `seed` speaks TLS).
async fn shards(
    seed: redis::Client,
    tls: &Tls,
    wait: std::time::Duration,
) -> RedisResult<Vec<Master>> {
    let secure = matches!(
        seed.get_connection_info().addr(),
        ConnectionAddr::TcpTls { .. }
    );
    let bounded = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(wait))
        .set_response_timeout(Some(wait));
    let mut conn = seed
        .get_multiplexed_async_connection_with_config(&bounded)
        .await?;
    let shards: Vec<Value> = redis::cmd("CLUSTER")
        .arg("SHARDS")
        .query_async(&mut conn)
        .await?;
    let mut masters = Vec::new();
    for shard in shards {
        let slots: Vec<u16> = field(&shard, "slots").unwrap_or_default();
        let nodes: Vec<Value> = field(&shard, "nodes").unwrap_or_default();
        let master = nodes.iter().find(|node| {
            field::<String>(node, "role").as_deref() == Some("master")
                && field::<String>(node, "health").as_deref() == Some("online")
        });
        let (Some(master), false) = (master, slots.is_empty()) else {
            continue;
        };
        let host = field::<String>(master, "ip").unwrap_or_else(|| "127.0.0.1".to_owned());
        let port = if secure {
            field::<u16>(master, "tls-port")
        } else {
            field::<u16>(master, "port").or_else(|| field(master, "tls-port"))
        };
        let Some(port) = port else {
            continue;
        };
        let addr = if secure {
            ConnectionAddr::TcpTls {
                host,
                port,
                insecure: tls.is_insecure(),
                tls_params: None,
            }
        } else {
            ConnectionAddr::Tcp(host, port)
        };
        masters.push(Master {
            info: seed
                .get_connection_info()
                .clone()
                .set_addr(addr)
                .into_connection_info()?,
            tls: tls.clone(),
            slots: slots.chunks(2).map(|r| (r[0], r[1])).collect(),
        });
    }
    Ok(masters)
}

/// Field `name` of a map reply (a RESP3 map, or RESP2's flat list of
/// name, value pairs).
fn field<T: redis::FromRedisValue>(value: &Value, name: &str) -> Option<T> {
    let found = match value {
        Value::Map(pairs) => pairs
            .iter()
            .find(|(k, _)| redis::from_redis_value_ref::<String>(k).is_ok_and(|k| k == name))
            .map(|(_, v)| v),
        Value::Array(items) => items
            .chunks(2)
            .find(|kv| redis::from_redis_value_ref::<String>(&kv[0]).is_ok_and(|k| k == name))
            .and_then(|kv| kv.get(1)),
        _ => None,
    }?;
    redis::from_redis_value_ref(found).ok()
}
