//! [`Ctx`], what every strategy works with, and the per-user limit of the
//! baselines that have no lock or transaction of their own.

use seckill_redis::Conn;

use crate::error::Result;
use crate::keys::SaleKeys;
use crate::order::{Order, Outcome, PurchaseRequest};
use crate::records;
use crate::sale::{Sale, now_ms};

/// What every strategy works with: a connection and the sale it sells.
#[derive(Clone)]
pub(crate) struct Ctx {
    pub conn: Conn,
    pub keys: SaleKeys,
    pub sale: Sale,
}

impl Ctx {
    /// The rule a purchase breaks by which its buyer would hold `held`
    /// units (`None`: the clock's rules alone), against this process's
    /// clock: where the baselines check the sale's rules.
    pub fn broken(&self, held: Option<u64>) -> Option<Outcome> {
        self.sale.rules.broken(now_ms(), held).map(Outcome::Refused)
    }
}

/// The per-user limit for baselines without a lock or transaction of their
/// own (`list`, `lua`): reserve the allowance first (`HINCRBY`), then take a
/// unit with `take`, giving the allowance back when no unit was left. No user
/// ever ends above the limit. If `take` fails with an error the allowance
/// stays reserved, since the unit may have been taken.
pub(crate) async fn reserve_then_take<F, Fut>(
    ctx: &Ctx,
    req: &PurchaseRequest,
    take: F,
) -> Result<Outcome>
where
    F: FnOnce(Conn) -> Fut,
    Fut: Future<Output = Result<bool>>,
{
    use redis::AsyncCommands;
    if let Some(refusal) = ctx.broken(None) {
        return Ok(refusal);
    }
    let mut conn = ctx.conn.clone();
    let user = &req.user_id;
    let bought: u64 = conn.hincr(&ctx.keys.users, user, 1).await?;
    let refusal = if let Some(refusal) = ctx.broken(Some(bought)) {
        Some(refusal)
    } else if !take(conn.clone()).await? {
        Some(Outcome::SoldOut)
    } else {
        None
    };
    if let Some(refusal) = refusal {
        let _: i64 = conn.hincr(&ctx.keys.users, user, -1).await?;
        return Ok(refusal);
    }
    let order_id = records::order_id(&ctx.keys.id, ctx.sale.generation);
    let mut pipe = redis::pipe();
    records::record(&mut pipe, &ctx.keys, &order_id, user);
    let () = pipe.query_async(&mut conn).await?;
    Ok(Outcome::Ok(Order {
        order_id,
        quantity: 1,
    }))
}
