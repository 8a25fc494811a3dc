//! `atomic`: the whole purchase in one script call (see `purchase.lua`).

use super::ctx::Ctx;
use crate::codec::purchase::{Answer, PurchaseArgs};
use crate::error::Result;
use crate::order::{Outcome, PurchaseRequest};
use crate::scripts::LIBRARY;

pub(crate) struct Atomic {
    ctx: Ctx,
    args: PurchaseArgs,
}

impl Atomic {
    pub fn new(ctx: Ctx) -> Self {
        let args = PurchaseArgs::new(&ctx.sale);
        Self { ctx, args }
    }

    pub async fn purchase(&self, req: &PurchaseRequest) -> Result<Outcome> {
        let mut call = LIBRARY.call("purchase", &self.ctx.keys.purchase());
        self.args.write(&mut call, [req]);
        let answer: redis::Value = call.invoke(&mut self.ctx.conn.clone()).await?;
        Answer::read(&answer, "")?.outcome(&self.ctx.keys.id, self.ctx.sale.generation, req)
    }
}
