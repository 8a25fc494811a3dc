//! `--durability` and `--replica-timeout-ms`: when a purchase, a payment
//! or a cancellation is acknowledged (`serve`, `bench`) and when an order
//! is committed to SQL (`serve`, `persist`).

use clap::Args as ClapArgs;

#[derive(ClapArgs)]
pub struct DurabilityArgs {
    /// When a purchase, a payment or a cancellation is acknowledged:
    /// `primary` when the master has it; `replica` once every replica in
    /// touch with the master has it too (`WAIT`), so a failover cannot lose
    /// it; past `--replica-timeout-ms` the caller gets a 503 and sends it
    /// again (a purchase with the same request id: the 503 names one made
    /// for it if it had none). With
    /// `replica` the persister commits to SQL only what every replica the
    /// master lists online has, in touch or not, so an order a failover
    /// took from Redis is not in SQL either.
    #[arg(long, value_enum, default_value_t = DurabilityArg::Primary)]
    durability: DurabilityArg,
    /// With `--durability replica`: longest wait for a replica, in ms.
    #[arg(long, default_value_t = 250, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    replica_timeout_ms: u64,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum DurabilityArg {
    Primary,
    Replica,
}

impl DurabilityArgs {
    /// The engine's durability these arguments ask for.
    pub fn get(&self) -> seckill_engine::Durability {
        match self.durability {
            DurabilityArg::Primary => seckill_engine::Durability::Primary,
            DurabilityArg::Replica => seckill_engine::Durability::Replica {
                timeout: std::time::Duration::from_millis(self.replica_timeout_ms),
            },
        }
    }
}
