//! Moving units of a sharded sale: one numbered transfer at a time, in four
//! idempotent steps (begin on the sale, take from a source shard, give to
//! the destination, end on the sale), each refusing a stale refiller's
//! fence. Whoever holds the refill lock finishes the open transfer before
//! beginning another, so a transfer cut short by a crash is completed
//! exactly once, by the next refiller.

use seckill_redis::Conn;

use super::layout::Layout;
use crate::codec::ledger::{Open, Source, Step};
use crate::error::{Error, Result};
use crate::scripts::LIBRARY;

/// The refiller's hands: a connection, the sale, and its fence.
pub(crate) struct Mover<'a> {
    pub conn: Conn,
    pub layout: &'a Layout,
    pub fence: u64,
}

impl Mover<'_> {
    /// Moves up to `units` from `from` to shard `to`; answers the units
    /// moved (fewer if the source had fewer; 0 if it had none). An open
    /// transfer found first is finished first.
    pub async fn transfer(&self, from: Source, to: usize, units: u64) -> Result<u64> {
        let from_arg = from.arg();
        loop {
            let answer: String = LIBRARY
                .call("shard_begin", &[&self.layout.sale.sale])
                .arg(self.layout.generation)
                .arg(self.fence)
                .arg(&from_arg)
                .arg(to)
                .arg(units)
                .invoke(&mut self.conn.clone())
                .await?;
            match Step::read(&answer)? {
                Step::Found(open) => {
                    self.finish(&open).await?;
                }
                Step::Begun(open) => return self.finish(&open).await,
                Step::Empty => return Ok(0),
                other => return Err(self.refused(other)),
            }
        }
    }

    /// Completes transfer `open`, whichever steps of it already ran;
    /// answers the units it moved.
    pub async fn finish(&self, open: &Open) -> Result<u64> {
        let units = match open.from {
            Source::Pool => open.units,
            Source::Shard(j) => {
                let keys = self.shard(j)?;
                let answer: redis::Value = LIBRARY
                    .call("shard_take", &[&keys.sale])
                    .arg(self.layout.generation)
                    .arg(self.fence)
                    .arg(open.number)
                    .arg(open.units)
                    .invoke(&mut self.conn.clone())
                    .await?;
                match answer {
                    redis::Value::Int(n) => n.max(0) as u64,
                    // A later transfer took from it since, so t moved what it
                    // moved and was ended: nothing to give; end answers.
                    _ => match Step::read(&text(&answer))? {
                        Step::Stale => 0,
                        other => return Err(self.refused(other)),
                    },
                }
            }
        };
        if units > 0 {
            let keys = self.shard(open.to)?;
            let answer: String = LIBRARY
                .call("shard_give", &[&keys.sale])
                .arg(self.layout.generation)
                .arg(self.fence)
                .arg(open.number)
                .arg(units)
                .invoke(&mut self.conn.clone())
                .await?;
            match Step::read(&answer)? {
                Step::Ok | Step::Done => {}
                other => return Err(self.refused(other)),
            }
        }
        let answer: String = LIBRARY
            .call(
                "shard_end",
                &[&self.layout.sale.sale, &self.layout.sale.transfers],
            )
            .arg(self.layout.generation)
            .arg(self.fence)
            .arg(open.number)
            .arg(units)
            .invoke(&mut self.conn.clone())
            .await?;
        match Step::read(&answer)? {
            Step::Ok | Step::Done => Ok(units),
            other => Err(self.refused(other)),
        }
    }

    /// Records whether the sale is drained (see `shard_mark.lua`), as seen
    /// when the sale's count of returns was `returns`.
    pub async fn mark_drained(&self, drained: bool, returns: u64) -> Result<()> {
        let answer: String = LIBRARY
            .call("shard_mark", &[&self.layout.sale.sale])
            .arg(self.layout.generation)
            .arg(self.fence)
            .arg(if drained { "1" } else { "0" })
            .arg(returns)
            .invoke(&mut self.conn.clone())
            .await?;
        match Step::read(&answer)? {
            Step::Ok | Step::Returned => Ok(()),
            other => Err(self.refused(other)),
        }
    }

    fn shard(&self, index: usize) -> Result<&crate::keys::SaleKeys> {
        self.layout
            .shards
            .get(index)
            .ok_or_else(|| Error::Batch(format!("transfer names shard {index}, which is not one")))
    }

    fn refused(&self, step: Step) -> Error {
        let sale = self.layout.sale.id.clone();
        match step {
            Step::Fenced => Error::LockLost(sale),
            Step::NoSale => Error::SaleNotFound(sale),
            other => Error::Batch(format!("unexpected transfer step answer: {other:?}")),
        }
    }
}

fn text(value: &redis::Value) -> String {
    redis::from_redis_value::<String>(value.clone()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::ledger::Source;
    use crate::shard::layout::Layout;
    use crate::{Engine, SaleSpec};

    async fn sale(engine: &Engine, id: &str) -> Layout {
        engine
            .create_sale(&SaleSpec::new(id, 1_000).shards(3))
            .await
            .unwrap();
        engine.layout(id).await.unwrap().unwrap()
    }

    async fn step(engine: &Engine, name: &str, keys: &[&str], args: &[String]) -> redis::Value {
        let mut call = LIBRARY.call(name, keys);
        for a in args {
            call.arg(a);
        }
        call.invoke(&mut engine.connection()).await.unwrap()
    }

    fn text(v: &redis::Value) -> String {
        super::text(v)
    }

    async fn clean(engine: &Engine, id: &str) -> crate::ShardingCheck {
        let check = engine.sharding_check(id).await.unwrap();
        assert!(check.problems.is_empty(), "{:?}", check.problems);
        check
    }

    #[tokio::test]
    async fn a_give_back_cut_short_after_each_step_is_finished_once_by_the_next_refiller() {
        let server = seckill_testkit::RedisServer::start().unwrap();
        let engine = Engine::connect(&server.url()).await.unwrap();
        // Stop after 1, 2 and 3 of the 4 steps, then let a new refiller in.
        for cut in 1..=3 {
            let id = format!("cut{cut}");
            let layout = sale(&engine, &id).await;
            let before = clean(&engine, &id).await;
            let from = before.sharding.shards[0].remaining;
            assert!(from >= 10, "{before:?}");
            let generation = layout.generation.to_string();
            // Above the first refill's fence, as a new refiller's is.
            let first: u64 = redis::cmd("HGET")
                .arg(&layout.sale.sale)
                .arg("fence")
                .query_async(&mut engine.connection())
                .await
                .unwrap();
            let old = (first + 1000).to_string();
            let begun = step(
                &engine,
                "shard_begin",
                &[&layout.sale.sale],
                &[
                    generation.clone(),
                    old.clone(),
                    "0".into(),
                    "2".into(),
                    "10".into(),
                ],
            )
            .await;
            let open = text(&begun);
            assert!(open.starts_with("new:"), "{open}");
            let t = open[4..].split('|').next().unwrap().to_owned();
            if cut >= 2 {
                // Asked again, it answers the same and takes nothing more.
                for _ in 0..2 {
                    let taken = step(
                        &engine,
                        "shard_take",
                        &[&layout.shards[0].sale],
                        &[generation.clone(), old.clone(), t.clone(), "10".into()],
                    )
                    .await;
                    assert_eq!(taken, redis::Value::Int(10));
                }
            }
            if cut >= 3 {
                for expected in ["ok", "done"] {
                    let given = step(
                        &engine,
                        "shard_give",
                        &[&layout.shards[2].sale],
                        &[generation.clone(), old.clone(), t.clone(), "10".into()],
                    )
                    .await;
                    assert_eq!(text(&given), expected);
                }
            }
            // Mid-transfer, the books still balance: the units are in the
            // source, in flight, or on the destination, once.
            let mid = clean(&engine, &id).await;
            assert_eq!(mid.sharding.in_flight, if cut == 2 { 10 } else { 0 });

            // The next refiller, with a higher fence, finishes it first.
            let next = Mover {
                conn: engine.connection(),
                layout: &layout,
                fence: first + 1001,
            };
            let moved = next.transfer(Source::Pool, 1, 5).await.unwrap();
            assert_eq!(moved, 5);
            let after = clean(&engine, &id).await;
            let shards: Vec<u64> = after.sharding.shards.iter().map(|s| s.remaining).collect();
            let b: Vec<u64> = before.sharding.shards.iter().map(|s| s.remaining).collect();
            assert_eq!(
                shards,
                vec![b[0] - 10, b[1] + 5, b[2] + 10],
                "cut after step {cut}"
            );
            assert_eq!(after.sharding.pool, before.sharding.pool - 5);
            let last_two: Vec<(Option<usize>, usize, u64)> = after.transfers
                [after.transfers.len() - 2..]
                .iter()
                .map(|t| (t.from, t.to, t.units))
                .collect();
            assert_eq!(last_two, vec![(Some(0), 2, 10), (None, 1, 5)]);

            // The old refiller wakes up: every step refuses its fence.
            let stale = Mover {
                conn: engine.connection(),
                layout: &layout,
                fence: first + 1000,
            };
            assert!(matches!(
                stale.transfer(Source::Shard(0), 1, 1).await,
                Err(Error::LockLost(_))
            ));
            for (name, keys) in [
                ("shard_take", &layout.shards[0].sale),
                ("shard_give", &layout.shards[2].sale),
            ] {
                let refused = step(
                    &engine,
                    name,
                    &[keys],
                    &[generation.clone(), old.clone(), t.clone(), "10".into()],
                )
                .await;
                assert_eq!(text(&refused), "fenced", "{name}");
            }
            let ended = step(
                &engine,
                "shard_end",
                &[&layout.sale.sale, &layout.sale.transfers],
                &[
                    generation.clone(),
                    (first + 1001).to_string(),
                    t.clone(),
                    "10".into(),
                ],
            )
            .await;
            assert_eq!(text(&ended), "done");
            assert_eq!(clean(&engine, &id).await.sharding, after.sharding);
        }
    }
}
