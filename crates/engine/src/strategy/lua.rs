//! `lua`: the classic check-and-decrement script (docs/strategies.md).

use super::ctx::{Ctx, reserve_then_take};
use crate::error::Result;
use crate::order::{Outcome, PurchaseRequest};
use crate::scripts::CLASSIC_DECR;

pub(crate) struct Lua {
    ctx: Ctx,
}

impl Lua {
    pub fn new(ctx: Ctx) -> Self {
        Self { ctx }
    }

    pub async fn purchase(&self, req: &PurchaseRequest) -> Result<Outcome> {
        let stock = &self.ctx.keys.stock;
        reserve_then_take(&self.ctx, req, |mut conn| async move {
            // The script answers Lua `true` (integer 1) or nil.
            let taken: Option<i64> = CLASSIC_DECR.key(stock).invoke_async(&mut conn).await?;
            Ok(taken.is_some())
        })
        .await
    }
}
