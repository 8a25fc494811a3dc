//! The coalescer on its own, no Redis in it: which batches its sender gets
//! when callers ask again as soon as they are answered.

use std::sync::{Arc, Mutex};

use seckill_redis::{Coalescer, CoalescerConfig};

/// Asks at or above this are a caller's second.
const AGAIN: u32 = 1_000;

/// A batch's answers go out in rounds, the callers answered running
/// between them: the second asks of a batch's callers leave in batches of a
/// round at most, while the rest are answered, not all in one batch once
/// the whole batch was answered (where Redis would wait idle meanwhile).
#[tokio::test]
async fn answered_callers_ask_again_before_the_rest_of_their_batch_is_answered() {
    let batches = Arc::new(Mutex::new(Vec::<Vec<u32>>::new()));
    let seen = batches.clone();
    let coalescer = Coalescer::start(CoalescerConfig::default(), 256, move |batch: Vec<u32>| {
        seen.lock().unwrap().push(batch.clone());
        async move {
            // A call takes a moment: the others queue behind it meanwhile.
            tokio::task::yield_now().await;
            batch
        }
    });
    // 24 callers: one goes alone, 23 form a batch answered in 3 rounds,
    // whose 3 batches of second asks fit the 4 calls in flight.
    let callers: Vec<_> = (0..24)
        .map(|n| {
            let c = coalescer.clone();
            tokio::spawn(async move {
                assert_eq!(c.ask(n).await, Some(n));
                assert_eq!(c.ask(AGAIN + n).await, Some(AGAIN + n));
            })
        })
        .collect();
    for caller in callers {
        caller.await.unwrap();
    }
    let batches = batches.lock().unwrap();
    let firsts = |b: &Vec<u32>| b.iter().filter(|&&n| n < AGAIN).count();
    let seconds = |b: &Vec<u32>| b.len() - firsts(b);
    assert!(
        batches.iter().map(firsts).max() > Some(8),
        "the first asks formed a batch larger than a round: {batches:?}"
    );
    // A round's 8, and the second ask of the caller that went alone.
    assert!(
        batches.iter().map(seconds).max() <= Some(9),
        "second asks left a round at a time: {batches:?}"
    );
    assert_eq!(batches.iter().map(Vec::len).sum::<usize>(), 48);
}
