//! The purchase functions' contract, in one place: `purchase`
//! (`lua/purchase.lua`, one buyer) and `purchase_batch`
//! (`lua/purchase_batch.lua`, many) take the same arguments in the same
//! positions, a purchase being a batch of one, and answer in the same
//! words. [`PurchaseArgs`] builds the arguments and [`Answer::read`]
//! reads an answer; no other module knows either format.
//!
//! Arguments: the sale's generation; per buyer its user, quantity and
//! request id (`''` = none); then the sale's rules as
//! [`Rules::arguments`](crate::rules::Rules) gives them: its per-user
//! limit (`0` = none), then its start (ms), each only if a later one or
//! itself is set. The end is read from the sale.

use seckill_redis::Call;

use crate::error::{Error, Result};
use crate::order::{Order, Outcome, PurchaseRequest};
use crate::order_id::OrderId;
use crate::rules::Rule;
use crate::sale::Sale;

/// What the purchase functions take of the sale itself, made once per
/// purchaser.
#[derive(Clone, Debug)]
pub(crate) struct PurchaseArgs {
    generation: String,
    /// Empty without rules; the limit alone; or limit and start.
    rules: Vec<u64>,
}

impl PurchaseArgs {
    pub fn new(sale: &Sale) -> Self {
        Self {
            generation: sale.generation.to_string(),
            rules: sale.rules.arguments(),
        }
    }

    /// Appends the arguments for `buyers`, in order, to `call`.
    pub fn write<'r>(
        &self,
        call: &mut Call<'_>,
        buyers: impl IntoIterator<Item = &'r PurchaseRequest>,
    ) {
        call.arg(&self.generation);
        for req in buyers {
            call.arg(&req.user_id)
                .arg(req.quantity)
                .arg(req.request_id.as_deref().unwrap_or(""));
        }
        for rule in &self.rules {
            call.arg(*rule);
        }
    }
}

/// One buyer's answer from either function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Answer<'a> {
    /// Bought: order `index` of stream entry `entry` (`<ms>-<n>`).
    Bought { entry: &'a str, index: u32 },
    /// This request id bought before: that order (`<ms>-<n>-<i>`) and its
    /// quantity.
    Repeated { local: &'a str, quantity: u32 },
    /// Refused, for a reason the buyer is told.
    Refused(Outcome),
    /// No sale of this generation: deleted, or made again.
    NoSale,
}

impl<'a> Answer<'a> {
    /// Reads one answer: `purchase`'s whole reply, or one of
    /// `purchase_batch`'s after its first (`entry`, the batch's stream
    /// entry, for the orders it answers by number).
    /// Borrows from both: nothing is copied per buyer.
    pub fn read(value: &'a redis::Value, entry: &'a str) -> Result<Self> {
        let bad = || Error::Batch(format!("unexpected purchase script answer: {value:?}"));
        let text = match value {
            redis::Value::Int(index) => {
                let index = u32::try_from(*index).map_err(|_| bad())?;
                return Ok(Self::Bought { entry, index });
            }
            redis::Value::BulkString(bytes) => std::str::from_utf8(bytes).map_err(|_| bad())?,
            redis::Value::SimpleString(s) => s.as_str(),
            _ => return Err(bad()),
        };
        if let Some(rule) = Rule::from_answer(text) {
            return Ok(Self::Refused(Outcome::Refused(rule)));
        }
        Ok(match text {
            "sold_out" => Self::Refused(Outcome::SoldOut),
            "no_sale" => Self::NoSale,
            _ => match text.split_once('|') {
                Some((local, quantity)) if is_local(local, 3) => Self::Repeated {
                    local,
                    quantity: quantity.parse().map_err(|_| bad())?,
                },
                None if is_local(text, 2) => Self::Bought {
                    entry: text,
                    index: 0,
                },
                _ => return Err(bad()),
            },
        })
    }

    /// The outcome of `req`'s purchase in sale `sale` of `generation`.
    pub fn outcome(self, sale: &str, generation: u64, req: &PurchaseRequest) -> Result<Outcome> {
        let order = |id: OrderId, quantity| Order {
            order_id: id.to_string(),
            quantity,
        };
        let bad = |what: &str| Error::Batch(format!("unexpected purchase script answer: {what:?}"));
        Ok(match self {
            Self::Bought { entry, index } => OrderId::in_entry(sale, generation, entry, index)
                .map(|id| Outcome::Ok(order(id, req.quantity)))
                .ok_or_else(|| bad(entry))?,
            Self::Repeated { local, quantity } => OrderId::from_local(sale, generation, local)
                .map(|id| Outcome::Duplicate(order(id, quantity)))
                .ok_or_else(|| bad(local))?,
            Self::Refused(outcome) => outcome,
            Self::NoSale => return Err(Error::SaleNotFound(sale.to_owned())),
        })
    }
}

/// Whether `text` is `parts` numbers joined by `-`, as stream entry ids
/// (`<ms>-<n>`) and orders in them (`<ms>-<n>-<i>`) are written.
fn is_local(text: &str, parts: usize) -> bool {
    let mut n = 0;
    text.split('-').all(|p| {
        n += 1;
        !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())
    }) && n == parts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> redis::Value {
        redis::Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn answers_read_as_what_they_say() {
        let check = |v: redis::Value, expected: Answer<'_>| {
            assert_eq!(Answer::read(&v, "9-1").unwrap(), expected);
        };
        check(
            text("5-2"),
            Answer::Bought {
                entry: "5-2",
                index: 0,
            },
        );
        check(
            redis::Value::Int(3),
            Answer::Bought {
                entry: "9-1",
                index: 3,
            },
        );
        check(
            text("5-2-7|2"),
            Answer::Repeated {
                local: "5-2-7",
                quantity: 2,
            },
        );
        check(
            text("limit"),
            Answer::Refused(Outcome::Refused(Rule::PerUserLimit)),
        );
        check(text("no_sale"), Answer::NoSale);
        for bad in ["5", "5-2-7", "5-x", "7up", "5-2|1", "sold out", ""] {
            assert!(Answer::read(&text(bad), "9-1").is_err(), "{bad}");
        }
        assert!(Answer::read(&redis::Value::Int(-1), "9-1").is_err());
    }
}
