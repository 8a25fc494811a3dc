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
use crate::scripts::SCRIPTS;
use crate::strategy::atomic;

impl Engine {
    /// The command line (for `redis-benchmark`) that runs exactly what one
    /// `atomic` purchase of sale `id` runs: the purchase script by SHA with
    /// the engine's own keys and arguments, one unit, by `user` with
    /// `request_id` (`redis-benchmark` makes `__rand_int__` in them random).
    /// Loads the script first.
    pub async fn purchase_command(
        &self,
        id: &str,
        user: &str,
        request_id: &str,
    ) -> Result<Vec<String>> {
        let sale = self.sale(id).await?;
        let keys = SaleKeys::new(id)?;
        let sha = self.load(&SCRIPTS.purchase).await?;
        let mut command = vec!["EVALSHA".to_owned(), sha, "2".to_owned()];
        command.extend(keys.purchase().map(str::to_owned));
        atomic::SaleArgs::new(&sale).each(user, "1", request_id, |arg| {
            command.push(arg.to_owned());
        });
        Ok(command)
    }

    /// The command line that runs the classic check-and-decrement script
    /// on sale `id`'s stock (a counter-inventory sale). Loads the script.
    pub async fn classic_decr_command(&self, id: &str) -> Result<Vec<String>> {
        let keys = SaleKeys::new(id)?;
        let sha = self.load(&SCRIPTS.classic_decr).await?;
        Ok(vec!["EVALSHA".to_owned(), sha, "1".to_owned(), keys.stock])
    }
}
