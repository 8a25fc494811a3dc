//! `atomic`: the whole purchase in one script call (see `purchase.lua`).

use super::{Answer, Ctx, outcome};
use crate::error::Result;
use crate::order::{Outcome, PurchaseRequest};
use crate::sale::Sale;
use crate::scripts::LIBRARY;

pub(crate) struct Atomic {
    ctx: Ctx,
    args: SaleArgs,
}

impl Atomic {
    pub fn new(ctx: Ctx) -> Self {
        let args = SaleArgs::new(&ctx.sale);
        Self { ctx, args }
    }

    pub async fn purchase(&self, req: &PurchaseRequest) -> Result<Outcome> {
        let mut invocation = LIBRARY.call("purchase", &self.ctx.keys.purchase());
        let request = req.request_id.as_deref().unwrap_or("");
        self.args
            .each(&req.user_id, &req.quantity.to_string(), request, |arg| {
                invocation.arg(arg);
            });
        let answer: String = invocation.invoke(&mut self.ctx.conn.clone()).await?;
        outcome(&self.ctx, req, Answer::Text(&answer))
    }
}

/// What `purchase.lua` takes of the sale itself, made once per purchaser:
/// its generation, and its rules only where it has any (each argument
/// costs Redis time). The end is not among them: the script reads it from
/// the sale, as ending a sale early moves it.
pub(crate) struct SaleArgs {
    generation: String,
    /// Empty without rules; the limit alone; or limit and start.
    rules: Vec<String>,
}

impl SaleArgs {
    pub fn new(sale: &Sale) -> Self {
        let rules = if sale.starts_at_ms.is_some() {
            rules(sale).to_vec()
        } else if let Some(limit) = sale.per_user_limit {
            vec![limit.to_string()]
        } else {
            Vec::new()
        };
        Self {
            generation: sale.generation.to_string(),
            rules,
        }
    }

    /// Calls `arg` with each of the script's arguments for one purchase, in order.
    pub fn each<'a>(
        &'a self,
        user: &'a str,
        quantity: &'a str,
        request: &'a str,
        mut arg: impl FnMut(&'a str),
    ) {
        for a in [self.generation.as_str(), user, quantity, request] {
            arg(a);
        }
        for a in &self.rules {
            arg(a);
        }
    }
}

/// Limit and start, 0 for none, as the purchase scripts take them.
pub(crate) fn rules(sale: &Sale) -> [String; 2] {
    [
        sale.per_user_limit.unwrap_or(0).to_string(),
        sale.starts_at_ms.unwrap_or(0).to_string(),
    ]
}
