//! Property test: random purchase sequences through `atomic` and `coalesced`
//! answer exactly as an in-memory model of the rules, and leave the same state.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use futures_util::future::join_all;
use proptest::prelude::*;
use seckill_engine::{CoalescerConfig, Engine, Order, Outcome, PurchaseRequest, Rule, SaleSpec};
use seckill_testkit::RedisServer;

#[derive(Clone, Debug)]
struct Op {
    user: u8,
    quantity: u32,
    request: Option<u8>,
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    (0u8..4, 1u32..4, proptest::option::of(0u8..6)).prop_map(|(user, quantity, request)| Op {
        user,
        quantity,
        request,
    })
}

/// The rules, stated plainly.
#[derive(Default)]
struct Model {
    left: u64,
    limit: Option<u64>,
    bought: HashMap<String, u64>,
    /// (user, request id) -> (its order's quantity, index of the answer
    /// that bought): a request id is its buyer's own.
    requests: HashMap<(String, String), (u32, usize)>,
}

#[derive(Debug, PartialEq)]
enum Expect {
    Ok(u32),
    Duplicate(usize),
    SoldOut,
    LimitExceeded,
}

impl Model {
    fn apply(&mut self, i: usize, req: &PurchaseRequest) -> Expect {
        if let Some(id) = &req.request_id
            && let Some((_, first)) = self.requests.get(&(req.user_id.clone(), id.clone()))
        {
            return Expect::Duplicate(*first);
        }
        let qty = u64::from(req.quantity);
        let bought = self.bought.get(&req.user_id).copied().unwrap_or(0);
        if self.limit.is_some_and(|l| bought + qty > l) {
            return Expect::LimitExceeded;
        }
        if self.left < qty {
            return Expect::SoldOut;
        }
        self.left -= qty;
        *self.bought.entry(req.user_id.clone()).or_default() += qty;
        if let Some(id) = &req.request_id {
            self.requests
                .insert((req.user_id.clone(), id.clone()), (req.quantity, i));
        }
        Expect::Ok(req.quantity)
    }
}

fn check(expected: &[Expect], answers: &[Outcome]) -> Result<(), String> {
    for (i, (want, got)) in expected.iter().zip(answers).enumerate() {
        let fine = match (want, got) {
            (Expect::Ok(q), Outcome::Ok(Order { quantity, .. })) => q == quantity,
            (Expect::Duplicate(first), Outcome::Duplicate(order)) => {
                answers[*first].order() == Some(order)
            }
            (Expect::SoldOut, Outcome::SoldOut) => true,
            (Expect::LimitExceeded, Outcome::Refused(Rule::PerUserLimit)) => true,
            _ => false,
        };
        if !fine {
            return Err(format!("answer {i}: expected {want:?}, got {got:?}"));
        }
    }
    Ok(())
}

static SALES: AtomicU64 = AtomicU64::new(0);

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn purchases_follow_the_rules(
        stock in 0u64..12,
        limit in proptest::option::of(1u32..5),
        ops in proptest::collection::vec(op(), 1..40),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let server = SERVER.with(|s| s.url());
        runtime.block_on(async {
            // One batch at a time, so the coalesced answers follow send order.
            let engine = Engine::connect(&server).await.unwrap().with_coalescer(CoalescerConfig {
                max_in_flight: 1,
                ..CoalescerConfig::default()
            });
            for strategy in [seckill_engine::Strategy::Atomic, seckill_engine::Strategy::Coalesced] {
                let id = format!("p{}", SALES.fetch_add(1, Ordering::Relaxed));
                let spec = SaleSpec::new(&id, stock)
                    .rule(Rule::PerUserLimit, limit.map(u64::from));
                engine.create_sale(&spec).await.unwrap();
                let requests: Vec<PurchaseRequest> = ops.iter().map(|op| PurchaseRequest {
                    user_id: format!("u{}", op.user),
                    quantity: op.quantity,
                    request_id: op.request.map(|r| format!("r{r}")),
                }).collect();
                let mut model = Model { left: stock, limit: limit.map(u64::from), ..Model::default() };
                let expected: Vec<Expect> =
                    requests.iter().enumerate().map(|(i, r)| model.apply(i, r)).collect();
                let buy = engine.purchaser(strategy, &id).await.unwrap();
                let answers: Vec<Outcome> = if strategy == seckill_engine::Strategy::Coalesced {
                    // All at once: they ride shared batches, in order.
                    join_all(requests.iter().map(|r| buy.purchase(r))).await
                        .into_iter().map(Result::unwrap).collect()
                } else {
                    let mut answers = Vec::new();
                    for r in &requests {
                        answers.push(buy.purchase(r).await.unwrap());
                    }
                    answers
                };
                check(&expected, &answers).map_err(|e| format!("{strategy:?}: {e}")).unwrap();
                let sale = engine.sale(&id).await.unwrap();
                assert_eq!(sale.remaining, model.left, "{strategy:?}");
                // Buyers' counts are kept only where a limit needs them.
                let bought: HashMap<String, u64> =
                    engine.buyers(&id).await.unwrap().into_iter().filter(|(_, n)| *n > 0).collect();
                let counted = if limit.is_some() { model.bought.clone() } else { HashMap::new() };
                assert_eq!(bought, counted, "{strategy:?}");
                // Every order lives in the stream: read back, they are the model's.
                let mut held: HashMap<String, u64> = HashMap::new();
                for order in engine.orders(&id).await.unwrap() {
                    *held.entry(order.user_id).or_default() += u64::from(order.quantity);
                }
                assert_eq!(held, model.bought, "{strategy:?}");
                for answer in &answers {
                    if let Outcome::Ok(order) = answer {
                        let found = engine.order(&order.order_id).await.unwrap();
                        assert_eq!(found.quantity, order.quantity, "{strategy:?}");
                    }
                }
                let sold: u64 = model.bought.values().sum();
                let orders = answers.iter().filter(|a| matches!(a, Outcome::Ok(_))).count();
                assert_eq!(engine.stream_events(&id).await.unwrap(), orders as u64);
                assert_eq!(sale.sold, sold);
            }
        });
    }
}

thread_local! {
    // One server for all cases of this test (cases run on one thread).
    static SERVER: RedisServer = RedisServer::start().unwrap();
}
