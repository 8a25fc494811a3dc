//! Orders after purchase: pay, cancel, expiry with stock and allowance
//! returned exactly once, against a real redis-server.

use std::time::Duration;

use futures_util::future::join_all;
use seckill_engine::{Engine, Error, OrderState, Outcome, PurchaseRequest, SaleSpec, Strategy};
use seckill_testkit::RedisServer;

async fn buy(engine: &Engine, sale: &str, user: &str) -> String {
    let buy = engine.purchaser(Strategy::Atomic, sale).await.unwrap();
    match buy.purchase(&PurchaseRequest::new(user)).await.unwrap() {
        Outcome::Ok(order) => order.order_id,
        other => panic!("{user} could not buy: {other:?}"),
    }
}

fn conflict(r: Result<OrderState, Error>) -> OrderState {
    match r {
        Err(Error::OrderConflict { state, .. }) => state,
        other => panic!("expected a conflict, got {other:?}"),
    }
}

#[tokio::test]
async fn pay_and_cancel_follow_the_state_machine() {
    let server = RedisServer::start().unwrap();
    let engine = Engine::connect(&server.url()).await.unwrap();
    engine
        .create_sale(&SaleSpec::new("s", 5).per_user_limit(1))
        .await
        .unwrap();
    let paid = buy(&engine, "s", "a").await;
    let info = engine.order(&paid).await.unwrap();
    assert_eq!(
        (
            info.state,
            info.user_id.as_str(),
            info.quantity,
            info.sale_id.as_str()
        ),
        (OrderState::PendingPayment, "a", 1, "s")
    );
    assert_eq!(engine.pay(&paid).await.unwrap(), OrderState::Paid);
    assert_eq!(
        engine.pay(&paid).await.unwrap(),
        OrderState::Paid,
        "paying twice is a no-op"
    );
    assert_eq!(conflict(engine.cancel(&paid).await), OrderState::Paid);

    let cancelled = buy(&engine, "s", "b").await;
    assert_eq!(engine.sale("s").await.unwrap().remaining, 3);
    assert_eq!(
        engine.cancel(&cancelled).await.unwrap(),
        OrderState::Cancelled
    );
    assert_eq!(
        engine.cancel(&cancelled).await.unwrap(),
        OrderState::Cancelled
    );
    assert_eq!(
        conflict(engine.pay(&cancelled).await),
        OrderState::Cancelled
    );
    assert_eq!(
        engine.sale("s").await.unwrap().remaining,
        4,
        "units came back once"
    );
    // b's allowance came back too: b may buy again under a limit of 1.
    buy(&engine, "s", "b").await;
    // Stream: 3 purchases, 1 pay, 1 cancel (no events for the no-ops).
    assert_eq!(engine.stream_events("s").await.unwrap(), 5);

    assert!(matches!(
        engine.pay("s-1-999-0-0").await,
        Err(Error::OrderNotFound(_))
    ));
    // Of the id characters but not an order id: no such order; other
    // characters: not an id at all.
    assert!(matches!(
        engine.pay("nonsense").await,
        Err(Error::OrderNotFound(_))
    ));
    assert!(matches!(
        engine.pay("non sense").await,
        Err(Error::Invalid { .. })
    ));
    assert!(matches!(
        engine.pay("nosale-1-1-0-0").await,
        Err(Error::OrderNotFound(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unpaid_orders_expire_once_and_their_stock_sells_again() {
    let server = RedisServer::start().unwrap();
    let engine = Engine::connect(&server.url()).await.unwrap();
    let spec = SaleSpec::new("x", 10)
        .per_user_limit(1)
        .payment_timeout_secs(1);
    engine.create_sale(&spec).await.unwrap();
    let mut orders = Vec::new();
    for u in 0..10 {
        orders.push(buy(&engine, "x", &format!("u{u}")).await);
    }
    for order in &orders[..3] {
        engine.pay(order).await.unwrap();
    }
    assert_eq!(engine.sale("x").await.unwrap().remaining, 0);
    assert_eq!(
        engine.expire_due("x", 100).await.unwrap(),
        0,
        "nothing due yet"
    );
    tokio::time::sleep(Duration::from_millis(1_100)).await;

    // Four sweepers at once: each unpaid order expires exactly once.
    let swept: u64 = join_all((0..4).map(|_| engine.expire_due("x", 100)))
        .await
        .into_iter()
        .map(Result::unwrap)
        .sum();
    assert_eq!(swept, 7);
    assert_eq!(engine.expire_due("x", 100).await.unwrap(), 0);
    assert_eq!(engine.sale("x").await.unwrap().remaining, 7);
    assert_eq!(conflict(engine.pay(&orders[5]).await), OrderState::Expired);
    assert_eq!(engine.pay(&orders[0]).await.unwrap(), OrderState::Paid);

    // The returned units sell again, to the same users (allowance returned).
    for u in 3..10 {
        buy(&engine, "x", &format!("u{u}")).await;
    }
    assert_eq!(engine.sale("x").await.unwrap().remaining, 0);
    // No unit is held by two live orders: live units + remaining == stock.
    let live: u32 = engine
        .orders("x")
        .await
        .unwrap()
        .iter()
        .filter(|o| o.state.is_live())
        .map(|o| o.quantity)
        .sum();
    assert_eq!(live, 10);
    let buyers = engine.buyers("x").await.unwrap();
    assert!(buyers.values().all(|&n| n <= 1), "{buyers:?}");
}

#[tokio::test]
async fn paying_after_the_deadline_expires_the_order_on_the_spot() {
    let server = RedisServer::start().unwrap();
    let engine = Engine::connect(&server.url()).await.unwrap();
    let spec = SaleSpec::new("late", 1).payment_timeout_secs(1);
    engine.create_sale(&spec).await.unwrap();
    let order = buy(&engine, "late", "slow").await;
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    assert_eq!(conflict(engine.pay(&order).await), OrderState::Expired);
    assert_eq!(engine.sale("late").await.unwrap().remaining, 1);
    assert_eq!(
        engine.expire_due("late", 10).await.unwrap(),
        0,
        "already expired"
    );
    assert_eq!(
        engine.sale("late").await.unwrap().remaining,
        1,
        "returned once"
    );
}

/// The messages of `server`'s restock channel, from now on.
async fn restock_messages(
    server: &RedisServer,
) -> impl futures_util::Stream<Item = redis::Msg> + Unpin + use<> {
    let client = redis::Client::open(server.url()).unwrap();
    let mut pubsub = client.get_async_pubsub().await.unwrap();
    pubsub
        .subscribe(seckill_engine::RESTOCK_CHANNEL)
        .await
        .unwrap();
    pubsub.into_on_message()
}

/// The next message on the restock channel within `wait`, if any.
async fn restock_message(
    messages: &mut (impl futures_util::Stream<Item = redis::Msg> + Unpin),
    wait: Duration,
) -> Option<String> {
    use futures_util::StreamExt;
    let msg = tokio::time::timeout(wait, messages.next()).await.ok()??;
    msg.get_payload().ok()
}

#[tokio::test]
async fn units_coming_back_announce_the_sale_only_when_it_had_none_left() {
    let server = RedisServer::start().unwrap();
    let engine = Engine::connect(&server.url()).await.unwrap();
    let mut messages = restock_messages(&server).await;
    engine
        .create_sale(&SaleSpec::new("s", 2).payment_timeout_secs(1))
        .await
        .unwrap();
    // One unit left while it comes back: nobody can have seen the sale
    // sold out since the last announcement, so none is sent.
    let a = buy(&engine, "s", "a").await;
    engine.cancel(&a).await.unwrap();
    assert_eq!(
        restock_message(&mut messages, Duration::from_millis(300)).await,
        None
    );
    // Sold out, then a unit comes back by a cancel: announced.
    let b = buy(&engine, "s", "b").await;
    buy(&engine, "s", "c").await;
    engine.cancel(&b).await.unwrap();
    assert_eq!(
        restock_message(&mut messages, Duration::from_secs(5)).await,
        Some("s".to_owned())
    );
    // Sold out again, then the unpaid orders expire in one sweep: one
    // announcement, whatever the units.
    buy(&engine, "s", "d").await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(engine.expire_due("s", 100).await.unwrap(), 2);
    assert_eq!(
        restock_message(&mut messages, Duration::from_secs(5)).await,
        Some("s".to_owned())
    );
    assert_eq!(
        restock_message(&mut messages, Duration::from_millis(300)).await,
        None
    );
    assert_eq!(engine.sale("s").await.unwrap().remaining, 2);
}

/// A private server with sale `id` of `stock` units under a limit of one
/// per buyer and a payment timeout of 1 s, and its restock messages.
async fn limited_sale(
    id: &str,
    stock: u64,
) -> (
    RedisServer,
    Engine,
    impl futures_util::Stream<Item = redis::Msg> + Unpin + use<>,
) {
    let server = RedisServer::start().unwrap();
    let engine = Engine::connect(&server.url()).await.unwrap();
    let messages = restock_messages(&server).await;
    let spec = SaleSpec::new(id, stock)
        .per_user_limit(1)
        .payment_timeout_secs(1);
    engine.create_sale(&spec).await.unwrap();
    (server, engine, messages)
}

/// What a quiet sale's sweep finds: one due order alone. It gives back its
/// unit and its buyer's allowance, and announces the sale it sold out.
#[tokio::test]
async fn a_lone_due_order_expires_with_its_unit_and_allowance_back() {
    let (_server, engine, mut messages) = limited_sale("lone", 1).await;
    let first = buy(&engine, "lone", "a").await;
    assert_eq!(engine.sale("lone").await.unwrap().remaining, 0);
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    assert_eq!(engine.expire_due("lone", 100).await.unwrap(), 1);
    assert_eq!(
        restock_message(&mut messages, Duration::from_secs(5)).await,
        Some("lone".to_owned())
    );
    assert_eq!(engine.sale("lone").await.unwrap().remaining, 1);
    assert_eq!(engine.expire_due("lone", 100).await.unwrap(), 0);
    assert_eq!(conflict(engine.pay(&first).await), OrderState::Expired);
    // The allowance came back: the same buyer, under a limit of 1, again.
    let again = buy(&engine, "lone", "a").await;
    assert_ne!(again, first);
    assert_eq!(engine.sale("lone").await.unwrap().remaining, 0);
    assert_eq!(engine.buyers("lone").await.unwrap().get("a"), Some(&1));
}

/// An order filed alone in a due index, as a persister files a quiet
/// sale's one purchase, expires from its filing with no walk of the sale's
/// stream: unit, allowance and restock message back, its member out of
/// the index. A paid order's member, one of a sale gone and one it cannot
/// read leave with nothing given back, and a later walk of the sale gives
/// nothing twice.
#[tokio::test]
async fn an_order_filed_alone_expires_from_its_filing_and_leaves_the_index() {
    let (_server, engine, mut messages) = limited_sale("alone", 2).await;
    let unpaid = buy(&engine, "alone", "a").await;
    let paid = buy(&engine, "alone", "b").await;
    engine.pay(&paid).await.unwrap();
    assert_eq!(engine.sale("alone").await.unwrap().remaining, 0);
    // "<sale key> <ref> <generation> <quantity> <buyer>", from the order
    // id "alone-<generation>-<ref>".
    let member = |id: &str, user: &str| {
        let (generation, local) = id["alone-".len()..].split_once('-').unwrap();
        format!("seckill:{{sale:alone}}:sale {local} {generation} 1 {user}")
    };
    let due = "seckill:{news:0}:due";
    let filed = [
        member(&unpaid, "a"),
        member(&paid, "b"),
        "seckill:{sale:gone}:sale 1-0-0 7 1 z".to_owned(),
        // Not an order this release can read (one of a later release).
        "seckill:{sale:alone}:sale unreadable".to_owned(),
    ];
    let mut conn = engine.connection();
    for m in &filed {
        let _: u64 = redis::AsyncCommands::zadd(&mut conn, due, m, 0)
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let (expired, more, left) = engine.expire_due_in(due, 100).await.unwrap();
    assert_eq!((expired, more, left), (1, false, vec![]));
    assert_eq!(
        restock_message(&mut messages, Duration::from_secs(5)).await,
        Some("alone".to_owned())
    );
    let still: u64 = redis::AsyncCommands::zcard(&mut conn, due).await.unwrap();
    assert_eq!(still, 0, "every member looked at leaves the index");
    assert_eq!(
        engine.order(&unpaid).await.unwrap().state,
        OrderState::Expired
    );
    assert_eq!(engine.order(&paid).await.unwrap().state, OrderState::Paid);
    assert_eq!(engine.sale("alone").await.unwrap().remaining, 1);
    // Filed again, or found by a walk of the stream: nothing twice.
    let _: u64 = redis::AsyncCommands::zadd(&mut conn, due, &filed[0], 0)
        .await
        .unwrap();
    assert_eq!(engine.expire_due_in(due, 100).await.unwrap().0, 0);
    assert_eq!(engine.expire_due("alone", 100).await.unwrap(), 0);
    assert_eq!(engine.sale("alone").await.unwrap().remaining, 1);
    // The allowance came back: the same buyer, under a limit of 1, again.
    buy(&engine, "alone", "a").await;
    assert_eq!(engine.buyers("alone").await.unwrap().get("a"), Some(&1));
}

/// A sweep of more orders filed alone than one ledger entry takes, of a
/// sale armed with its master's ledger: they are told in entries of at
/// most 1,000 expiries (four values each after the entry's marker), and
/// every one is told.
#[tokio::test]
async fn a_sweep_tells_more_than_an_entry_takes_in_several() {
    const ORDERS: usize = 1_001;
    let (_server, engine, _messages) = limited_sale("many", ORDERS as u64).await;
    let (due, ledger) = ("seckill:{news:0}:due", "seckill:{news:0}:ledger:2");
    let mut conn = engine.connection();
    let mut filed = Vec::new();
    for i in 0..ORDERS {
        let id = buy(&engine, "many", &format!("u{i}")).await;
        let (generation, local) = id["many-".len()..].split_once('-').unwrap();
        filed.push((
            0,
            format!("seckill:{{sale:many}}:sale {local} {generation} 1 u{i}"),
        ));
    }
    let armed = format!("{ledger} persister 1");
    let _: () = redis::AsyncCommands::hset(&mut conn, "seckill:{sale:many}:sale", "n", armed)
        .await
        .unwrap();
    let _: u64 = redis::AsyncCommands::zadd_multiple(&mut conn, due, &filed)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let (expired, _, _) = engine.expire_due_in(due, 2 * ORDERS).await.unwrap();
    assert_eq!(expired, ORDERS as u64);
    let entries: redis::streams::StreamRangeReply =
        redis::AsyncCommands::xrange_all(&mut conn, ledger)
            .await
            .unwrap();
    // The orders' refs, "<entry>-0", per entry: names in it beside the
    // marker and the sale's key (StreamRangeReply maps names to values).
    let refs: Vec<usize> = entries
        .ids
        .iter()
        .map(|e| e.map.keys().filter(|k| k.ends_with("-0")).count())
        .collect();
    assert_eq!(refs, [1_000, 1]);
}

/// More sales armed than `tell` keeps what their `n` names for (32,
/// prelude.lua): each purchase, of a sale whose `n` was kept or of one
/// read afresh at each call, is told to the ledger with its own sale's
/// payment timeout, twice over.
#[tokio::test]
async fn purchases_past_the_kept_armings_are_told_with_their_own_timeout() {
    // Above ARMED_MOST, so that some are read afresh at each call.
    const SALES: usize = 40;
    let server = RedisServer::start().unwrap();
    let engine = Engine::connect(&server.url()).await.unwrap();
    let ledger = "seckill:{news:0}:ledger:2";
    let mut conn = engine.connection();
    for i in 0..SALES {
        let id = format!("s{i}");
        engine.create_sale(&SaleSpec::new(&id, 2)).await.unwrap();
        // A timeout of its own makes each sale's `n` distinct.
        let armed = format!("{ledger} persister {}", 100 + i);
        let _: () = redis::AsyncCommands::hset(
            &mut conn,
            format!("seckill:{{sale:{id}}}:sale"),
            "n",
            armed,
        )
        .await
        .unwrap();
    }
    for round in 0..2 {
        for i in 0..SALES {
            buy(&engine, &format!("s{i}"), &format!("u{round}")).await;
        }
    }
    let entries: redis::streams::StreamRangeReply =
        redis::AsyncCommands::xrange_all(&mut conn, ledger)
            .await
            .unwrap();
    let mut told = vec![0; SALES];
    for entry in &entries.ids {
        for (i, count) in told.iter_mut().enumerate() {
            let Some(at) = entry.map.get(&format!("seckill:{{sale:s{i}}}:sale")) else {
                continue;
            };
            let at: String = redis::from_redis_value_ref(at).unwrap();
            assert!(at.ends_with(&format!(" {}", 100 + i)), "s{i} told as {at}");
            *count += 1;
        }
    }
    assert_eq!(told, vec![2; SALES], "each purchase told once");
}
