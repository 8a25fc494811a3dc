//! The lock on one Redis server (or one cluster shard): FIFO queue with
//! direct hand-off, see [`crate::notify`] for how waiters are woken.

use std::time::{Duration, Instant};

use seckill_redis::{Conn, Target};

use crate::batch::Batches;
use crate::error::{Error, Result};
use crate::keys::Keys;
use crate::lease::{MAX_WAIT, millis, remaining, valid_until};
use crate::notify::Notifier;
use crate::scripts::run;

/// Margin added to a holder's remaining lease before a waiter checks on it
/// itself, so the normal notification path wins the race.
const EXPIRY_MARGIN: Duration = Duration::from_millis(2);
/// Longest a waiter sleeps without asking Redis, for holders without a lease.
const MAX_POLL_GAP: Duration = Duration::from_secs(1);

pub(crate) struct Single {
    conn: Conn,
    notifier: Notifier,
    /// The busiest calls, batched on one server (boxed: the largest part).
    batches: Box<Batches>,
}

impl Single {
    pub async fn connect(target: &Target, channel: String) -> Result<Self> {
        let conn = target.connect().await?;
        let notifier = Notifier::start(target.clone(), channel).await?;
        let batches = Box::new(Batches::start(&conn));
        Ok(Self {
            conn,
            notifier,
            batches,
        })
    }

    pub fn conn(&self) -> Conn {
        self.conn.clone()
    }

    /// The hand-off notifications of this client, for the semaphore's
    /// waiters too.
    pub fn notifier(&self) -> &Notifier {
        &self.notifier
    }

    /// Its busiest calls, batched on one server.
    pub fn batches(&self) -> &Batches {
        &self.batches
    }

    pub async fn try_grant(
        &self,
        keys: &Keys,
        token: &str,
        lease: Duration,
    ) -> Result<Option<u64>> {
        let (granted, value) = self.take(keys, token, lease, Duration::ZERO).await?;
        Ok((granted == 1).then_some(value as u64))
    }

    /// Queues `token` and waits for the lock to be handed to it. Answers
    /// the fence and until when the grant is surely valid.
    pub async fn wait_grant(
        &self,
        keys: &Keys,
        token: &str,
        lease: Duration,
        timeout: Duration,
    ) -> Result<(u64, Instant)> {
        let started = Instant::now();
        let timeout = timeout.min(MAX_WAIT);
        let deadline = started + timeout;
        let mut registration = self.notifier.register(token);
        // After a re-registration, a late message for an earlier, expired
        // grant to this token could arrive: such messages are checked.
        let mut renewed = false;
        let mut asked = Instant::now();
        let wait = timeout.max(Duration::from_millis(1));
        let (mut state, mut value) = self.take(keys, token, lease, wait).await?;
        if state == 1 {
            return Ok((value as u64, valid_until(asked, lease, lease)));
        }
        loop {
            let now = Instant::now();
            if now >= deadline {
                asked = Instant::now();
                let (fence, pttl): (u64, i64) =
                    run(&mut self.conn(), "withdraw", keys, &[token, "1"]).await?;
                return match fence {
                    0 => Err(Error::Timeout {
                        name: keys.name.clone(),
                        waited: started.elapsed(),
                    }),
                    fence => Ok((fence, valid_until(asked, lease, remaining(pttl)))),
                };
            }
            let holder_left = match u64::try_from(value) {
                Ok(ms) => Duration::from_millis(ms) + EXPIRY_MARGIN,
                Err(_) if value == -2 => EXPIRY_MARGIN,
                Err(_) => MAX_POLL_GAP,
            };
            let nap = holder_left.min(MAX_POLL_GAP).min(deadline - now);
            tokio::select! {
                handed = &mut registration.rx => match handed {
                    // The release published this as it granted: the lease
                    // began a moment ago, within the drift margin.
                    Ok(fence) if !renewed => {
                        return Ok((fence, valid_until(Instant::now(), lease, lease)));
                    }
                    // Used up either way: a fresh receiver, and ask Redis.
                    Ok(_) | Err(_) => {
                        registration.renew();
                        renewed = true;
                    }
                },
                () = tokio::time::sleep(nap) => {}
            }
            asked = Instant::now();
            let answer: Vec<i64> = run(&mut self.conn(), "poll", keys, &[token]).await?;
            (state, value) = (answer[0], answer.get(1).copied().unwrap_or(-2));
            if state == 1 {
                let pttl = answer.get(2).copied().unwrap_or(0);
                return Ok((value as u64, valid_until(asked, lease, remaining(pttl))));
            }
            if state == -1 {
                registration.renew();
                renewed = true;
                let left = deadline.saturating_duration_since(Instant::now());
                asked = Instant::now();
                let wait = left.max(Duration::from_millis(1));
                (state, value) = self.take(keys, token, lease, wait).await?;
                if state == 1 {
                    return Ok((value as u64, valid_until(asked, lease, lease)));
                }
            }
        }
    }

    /// `acquire.lua`: takes the lock, or queues for up to `wait` (zero:
    /// does not queue); in a batch on one server.
    async fn take(
        &self,
        keys: &Keys,
        token: &str,
        lease: Duration,
        wait: Duration,
    ) -> Result<(i64, i64)> {
        let args = [
            token.to_owned(),
            millis(lease).to_string(),
            millis(wait).to_string(),
            self.notifier.channel().to_owned(),
        ];
        let answer = self
            .batches
            .acquire
            .ask(keys.all.clone(), args.into())
            .await?;
        let at = |i: usize| answer.get(i).copied().unwrap_or(0);
        Ok((at(0), at(1)))
    }

    pub async fn release(&self, keys: &Keys, token: &str) -> Result<bool> {
        let released = self
            .batches
            .release
            .ask(keys.all.clone(), vec![token.to_owned()])
            .await?;
        Ok(released.first() == Some(&1))
    }

    pub async fn extend(&self, keys: &Keys, token: &str, lease: Duration) -> Result<bool> {
        let extended: i64 = run(
            &mut self.conn(),
            "extend",
            keys,
            &[token, &millis(lease).to_string()],
        )
        .await?;
        Ok(extended == 1)
    }

    pub async fn raise_fence(&self, keys: &Keys, floor: u64) -> Result<()> {
        let _: i64 = run(&mut self.conn(), "raise_fence", keys, &[&floor.to_string()]).await?;
        Ok(())
    }

    /// Cleans up after an acquire that was cancelled or failed midway: leaves
    /// the queue and, if the lock was granted meanwhile, releases it.
    pub async fn abandon(&self, keys: &Keys, token: &str) -> Result<()> {
        let _: (i64, i64) = run(&mut self.conn(), "withdraw", keys, &[token, "0"]).await?;
        Ok(())
    }
}
