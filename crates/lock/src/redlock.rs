//! Redlock: one lock over N independent Redis masters.
//!
//! A lock is held when a majority granted it within its validity (lease −
//! time spent acquiring − clock drift). Fences stay strictly increasing:
//! after a quorum grants, every granting master's counter is raised to the
//! highest fence among them, and any later quorum overlaps this one in at
//! least one master, so its own increment lands above. (As with any Redlock,
//! a master that restarts without persistence forgets its counter; run the
//! masters with AOF or keep a restarted master out for one lease.)
//!
//! Waiters retry after a short random delay: a hand-off queue cannot be kept
//! consistent across masters that never talk to each other, and random delays
//! keep competing clients from splitting the votes again and again.

use std::time::{Duration, Instant};

use futures_util::TryFutureExt;
use futures_util::future::join_all;
use redis::aio::ConnectionManager;
use seckill_redis::Conn;
use tokio::sync::OnceCell;

use crate::error::{Error, Result};
use crate::keys::Keys;
use crate::lease::{MAX_WAIT, drift, millis, valid_until};
use crate::scripts::run;

/// Waiters retry after a random delay up to this long.
const RETRY_MAX_DELAY: Duration = Duration::from_millis(20);

struct Node {
    client: redis::Client,
    conn: OnceCell<Conn>,
}

pub(crate) struct Quorum {
    nodes: Vec<Node>,
    needed: usize,
    /// Per-master limit on one call, short compared to any lease, so a dead
    /// master costs little of the validity.
    node_timeout: Duration,
}

impl Quorum {
    pub fn new(clients: Vec<redis::Client>, node_timeout: Duration) -> Self {
        let needed = clients.len() / 2 + 1;
        let nodes = clients
            .into_iter()
            .map(|client| Node {
                client,
                conn: OnceCell::new(),
            })
            .collect();
        Self {
            nodes,
            needed,
            node_timeout,
        }
    }

    /// Runs a script on every master at once; `None` where a master failed
    /// or did not answer in time.
    async fn on_all<T: redis::FromRedisValue>(
        &self,
        nodes: &[usize],
        script: &str,
        keys: &Keys,
        args: &[&str],
    ) -> Vec<Option<T>> {
        join_all(nodes.iter().map(|&i| async move {
            let node = &self.nodes[i];
            let call = async {
                let conn = node
                    .conn
                    .get_or_try_init(|| {
                        let config = redis::aio::ConnectionManagerConfig::new()
                            .set_connection_timeout(Some(self.node_timeout))
                            .set_response_timeout(Some(self.node_timeout))
                            .set_number_of_retries(0);
                        ConnectionManager::new_with_config(node.client.clone(), config)
                            .map_ok(Conn::from)
                    })
                    .await?;
                run::<T, _>(&mut conn.clone(), script, keys, args).await
            };
            match tokio::time::timeout(self.node_timeout, call).await {
                Ok(Ok(value)) => Some(value),
                Ok(Err(e)) => {
                    tracing::debug!(master = i, error = %e, "redlock master failed");
                    None
                }
                Err(_) => None,
            }
        }))
        .await
    }

    fn all(&self) -> Vec<usize> {
        (0..self.nodes.len()).collect()
    }

    pub async fn try_grant(
        &self,
        keys: &Keys,
        token: &str,
        lease: Duration,
    ) -> Result<Option<u64>> {
        let started = Instant::now();
        let lease_ms = millis(lease).to_string();
        let replies: Vec<Option<(i64, i64)>> = self
            .on_all(&self.all(), "acquire", keys, &[token, &lease_ms, "0", ""])
            .await;
        let answered = replies.iter().flatten().count();
        let granted: Vec<(usize, i64)> = replies
            .iter()
            .enumerate()
            .filter_map(|(i, r)| match r {
                Some((1, fence)) => Some((i, *fence)),
                _ => None,
            })
            .collect();
        if granted.len() >= self.needed {
            let fence = granted.iter().map(|(_, f)| *f).max().unwrap_or(0);
            let holders: Vec<usize> = granted.iter().map(|(i, _)| *i).collect();
            let raised = self
                .on_all::<i64>(&holders, "raise_fence", keys, &[&fence.to_string()])
                .await
                .into_iter()
                .flatten()
                .count();
            if raised >= self.needed && started.elapsed() < lease.saturating_sub(drift(lease)) {
                return Ok(Some(fence as u64));
            }
        }
        // Undo everywhere, including masters that timed out: their grant may
        // have happened without us seeing the answer.
        self.release(keys, token).await.ok();
        if answered >= self.needed {
            Ok(None)
        } else {
            Err(Error::NoQuorum {
                reachable: answered,
                needed: self.needed,
            })
        }
    }

    pub async fn wait_grant(
        &self,
        keys: &Keys,
        token: &str,
        lease: Duration,
        timeout: Duration,
    ) -> Result<(u64, Instant)> {
        let started = Instant::now();
        let deadline = started + timeout.min(MAX_WAIT);
        loop {
            let attempt = Instant::now();
            let last_error = match self.try_grant(keys, token, lease).await {
                Ok(Some(fence)) => return Ok((fence, valid_until(attempt, lease, lease))),
                Ok(None) => None,
                Err(e) => Some(e),
            };
            let now = Instant::now();
            if now >= deadline {
                return Err(last_error.unwrap_or_else(|| Error::Timeout {
                    name: keys.name.clone(),
                    waited: started.elapsed(),
                }));
            }
            let delay = RETRY_MAX_DELAY.mul_f64(rand::random::<f64>());
            tokio::time::sleep(delay.min(deadline - now)).await;
        }
    }

    /// `Ok(true)` when a quorum still held the lock for `token` and released it.
    pub async fn release(&self, keys: &Keys, token: &str) -> Result<bool> {
        let replies = self
            .on_all::<i64>(&self.all(), "release", keys, &[token])
            .await;
        self.tally(&replies)
    }

    /// Raises the counter on a quorum: any later quorum overlaps it, so its
    /// fence counts past `floor`.
    pub async fn raise_fence(&self, keys: &Keys, floor: u64) -> Result<()> {
        let replies = self
            .on_all::<i64>(&self.all(), "raise_fence", keys, &[&floor.to_string()])
            .await;
        self.tally(&replies).map(drop)
    }

    pub async fn extend(&self, keys: &Keys, token: &str, lease: Duration) -> Result<bool> {
        let started = Instant::now();
        let replies = self
            .on_all::<i64>(
                &self.all(),
                "extend",
                keys,
                &[token, &millis(lease).to_string()],
            )
            .await;
        Ok(self.tally(&replies)? && started.elapsed() < lease.saturating_sub(drift(lease)))
    }

    fn tally(&self, replies: &[Option<i64>]) -> Result<bool> {
        let answered = replies.iter().flatten().count();
        let yes = replies.iter().flatten().filter(|&&r| r == 1).count();
        if yes >= self.needed {
            Ok(true)
        } else if answered >= self.needed {
            Ok(false)
        } else {
            Err(Error::NoQuorum {
                reachable: answered,
                needed: self.needed,
            })
        }
    }
}
