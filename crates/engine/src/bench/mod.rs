//! Simulating and checking a sale, and measuring it against baselines:
//! [`race()`] sends many concurrent buyers through one purchaser,
//! [`verify()`] checks the finished sale against its invariants, and the
//! [`Engine`] builds the `redis-benchmark` command lines of its own scripts.

mod race;
mod verify;

pub use race::{Race, race};
pub use verify::{Demand, Verdict, verify};

use crate::engine::Engine;
use crate::error::Result;
use crate::keys::SaleKeys;
use std::sync::LazyLock;

use seckill_redis::Library;

use crate::codec::purchase::PurchaseArgs;
use crate::order::PurchaseRequest;
use crate::scripts::{CLASSIC_DECR, LIBRARY};

/// `lua/floor.lua`, in a library of its own: the engine's library stays
/// what production loads.
static FLOOR: LazyLock<Library> = LazyLock::new(|| {
    Library::builder("seckill_bench")
        .function("floor", &[include_str!("../lua/floor.lua")])
        .build()
});

impl Engine {
    /// The command line (for `redis-benchmark`) that runs exactly what one
    /// `atomic` purchase of sale `id` runs: the purchase function with
    /// the engine's own keys and arguments, one unit, by `user` with
    /// `request_id` (`redis-benchmark` makes `__rand_int__` in them random).
    /// Loads the engine's library first.
    pub async fn purchase_command(
        &self,
        id: &str,
        user: &str,
        request_id: &str,
    ) -> Result<Vec<String>> {
        let sale = self.sale(id).await?;
        let keys = SaleKeys::new(id)?;
        LIBRARY
            .load(&mut self.conn.clone(), keys.sale.as_bytes())
            .await?;
        let mut call = LIBRARY.call("purchase", &keys.purchase());
        let req = PurchaseRequest::new(user).request_id(request_id);
        PurchaseArgs::new(&sale).write(&mut call, [&req]);
        Ok(call.words())
    }

    /// The command line of the floor under a purchase (`lua/floor.lua`):
    /// the commands an `atomic` purchase with a request id sends, with
    /// arguments of the same sizes, and no logic; with `refusal`, only the
    /// read a refusal makes. Sale `id` must be one of its own: the floor
    /// writes fixed values into it. Loads the function first.
    pub async fn floor_command(&self, id: &str, refusal: bool) -> Result<Vec<String>> {
        let sale = self.sale(id).await?;
        let keys = SaleKeys::new(id)?;
        FLOOR
            .load(&mut self.conn.clone(), keys.sale.as_bytes())
            .await?;
        let mut command = vec![
            "FCALL".to_owned(),
            FLOOR.function_name("floor").to_owned(),
            "2".to_owned(),
        ];
        command.extend(keys.purchase().map(str::to_owned));
        command.extend(
            [
                &sale.generation.to_string(),
                "u__rand_int__",
                "r:u__rand_int__/r__rand_int__",
                "1|r__rand_int__",
                "1795392000123-0-0|1",
            ]
            .map(str::to_owned),
        );
        if refusal {
            command.push("refusal".to_owned());
        }
        Ok(command)
    }

    /// The command line that runs the classic check-and-decrement script
    /// on sale `id`'s stock (a counter-inventory sale). Loads the script.
    pub async fn classic_decr_command(&self, id: &str) -> Result<Vec<String>> {
        let keys = SaleKeys::new(id)?;
        let sha: String = CLASSIC_DECR
            .prepare_invoke()
            .load_async(&mut self.conn.clone())
            .await?;
        Ok(vec!["EVALSHA".to_owned(), sha, "1".to_owned(), keys.stock])
    }
}
