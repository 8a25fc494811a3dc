//! `list`: one token per unit, pre-filled at sale creation; a purchase is an
//! `LPOP` (docs/strategies.md). Atomic by nature: a token
//! is popped once.

use redis::AsyncCommands;

use super::ctx::{Ctx, reserve_then_take};
use crate::error::Result;
use crate::order::{Outcome, PurchaseRequest};

pub(crate) struct List {
    ctx: Ctx,
}

impl List {
    pub fn new(ctx: Ctx) -> Self {
        Self { ctx }
    }

    pub async fn purchase(&self, req: &PurchaseRequest) -> Result<Outcome> {
        let tokens = &self.ctx.keys.tokens;
        reserve_then_take(&self.ctx, req, |mut conn| async move {
            let token: Option<String> = conn.lpop(tokens, None).await?;
            Ok(token.is_some())
        })
        .await
    }
}
