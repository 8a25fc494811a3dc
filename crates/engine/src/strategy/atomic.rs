//! `atomic`: the whole purchase in one script call (see `purchase_common.lua`).

use super::{Ctx, parse_answer};
use crate::error::Result;
use crate::order::{Outcome, PurchaseRequest};
use crate::scripts::SCRIPTS;

pub(crate) struct Atomic {
    ctx: Ctx,
}

impl Atomic {
    pub fn new(ctx: Ctx) -> Self {
        Self { ctx }
    }

    pub async fn purchase(&self, req: &PurchaseRequest) -> Result<Outcome> {
        let mut invocation = SCRIPTS.purchase.prepare_invoke();
        invocation
            .key(&self.ctx.keys.purchase()[..])
            .arg(&req.user_id)
            .arg(req.quantity)
            .arg(req.request_id.as_deref().unwrap_or(""));
        let answer: String = invocation.invoke_async(&mut self.ctx.conn.clone()).await?;
        parse_answer(&self.ctx.keys.id, &answer)
    }
}
