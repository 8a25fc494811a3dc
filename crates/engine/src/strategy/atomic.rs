//! `atomic`: the whole purchase in one script call (see `purchase.lua`).

use super::{Answer, Ctx, outcome};
use crate::error::Result;
use crate::order::{Outcome, PurchaseRequest};
use crate::sale::Sale;
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
        invocation.key(&self.ctx.keys.purchase()[..]);
        let request = req.request_id.as_deref().unwrap_or("");
        for arg in arguments(&self.ctx.sale, &req.user_id, req.quantity, request) {
            invocation.arg(arg);
        }
        let answer: String = invocation.invoke_async(&mut self.ctx.conn.clone()).await?;
        outcome(&self.ctx, req, Answer::Text(&answer))
    }
}

/// `purchase.lua`'s arguments: the sale's rules go only with a sale that
/// has a limit or a window (each argument costs Redis time).
pub(crate) fn arguments(sale: &Sale, user: &str, quantity: u32, request: &str) -> Vec<String> {
    let mut args = vec![
        sale.generation.to_string(),
        user.to_owned(),
        quantity.to_string(),
        request.to_owned(),
    ];
    if sale.per_user_limit.is_some() || sale.starts_at_ms.is_some() || sale.ends_at_ms.is_some() {
        args.extend(rules(sale));
    }
    args
}

/// Limit, start and end, 0 for none, as the purchase scripts take them.
pub(crate) fn rules(sale: &Sale) -> [String; 3] {
    [
        sale.per_user_limit.unwrap_or(0).to_string(),
        sale.starts_at_ms.unwrap_or(0).to_string(),
        sale.ends_at_ms.unwrap_or(0).to_string(),
    ]
}
