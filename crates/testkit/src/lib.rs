//! Private `redis-server` processes for tests, demos and benchmarks.
//!
//! Every test and every `seckill` command that is not given a Redis URL runs
//! against a server of its own, so runs never share state, can kill and
//! restart their server, and never depend on a Redis that happens to be
//! running on the machine.
//!
//! - [`RedisServer`]: one server on a free loopback port in a temporary
//!   directory; waits for `PING`, kills the process on drop, can be killed,
//!   paused and restarted (keeping its data directory, so AOF survives).
//! - [`Options`]: persistence settings and extra `redis-server` arguments.
//! - `certs`: [`Certs`], a throwaway CA and certificates for TLS servers.
//! - `postgres`: [`PgServer`], a private PostgreSQL, with TLS on request;
//!   `mariadb`: [`MariaServer`], the same for MariaDB.
//! - `daemon`: a database server process, waited for and killed on drop.
//! - `cluster`: [`RedisCluster`], a local Redis Cluster of such servers,
//!   with failover, slot moves, kills and pauses for drills.
//! - `sentinel`: [`RedisSentinels`], a master, its replicas and three
//!   sentinels watching them, for failover drills under Sentinel.
//! - `redis_cli`: one command to a node through `redis-cli`, and the
//!   waits the rigs build on it; [`commandstats_calls`], calls counted by
//!   `INFO commandstats`; [`function_named`], a loaded function's full name.
//!
//! ```no_run
//! let server = seckill_testkit::RedisServer::start().unwrap();
//! println!("talk to {}", server.url());
//! ```

#![warn(missing_docs, missing_debug_implementations)]

mod certs;
mod cluster;
mod daemon;
mod mariadb;
mod postgres;
mod redis_cli;
mod sentinel;
mod server;

pub use certs::Certs;
pub use cluster::RedisCluster;
pub use mariadb::MariaServer;
pub use postgres::PgServer;
pub use redis_cli::{commandstats_calls, function_named};
pub use sentinel::{RedisSentinels, SentinelOptions};
pub use server::{Fsync, Options, RedisServer};
