//! Helpers shared by the lock's test binaries.
#![allow(dead_code)]

use seckill_lock::{Guard, Locks};
use seckill_redis::Target;
use seckill_testkit::{RedisCluster, RedisServer};

/// A client for `url` made as the lock's documentation asks: with
/// `TCP_NODELAY`, so hand-off timings are not Nagle's delayed writes.
pub fn client(url: &str) -> redis::Client {
    use redis::IntoConnectionInfo;
    let info = url
        .into_connection_info()
        .unwrap()
        .set_tcp_settings(redis::io::tcp::TcpSettings::default().set_nodelay(true));
    redis::Client::open(info).unwrap()
}

/// Locks on `spec`: a server's URL, or `cluster:` and a cluster's seed
/// nodes ([`Rig::spec`]).
pub async fn connect(spec: &str) -> Locks {
    Locks::new(&target(spec)).await.unwrap()
}

/// The target `spec` names, as [`connect`] reads it.
pub fn target(spec: &str) -> Target {
    match spec.strip_prefix("cluster:") {
        Some(seeds) => Target::cluster(seeds).unwrap(),
        None => Target::server(spec),
    }
}

/// Where a test's locks live: one server, or a cluster of three masters,
/// so each failure test runs on both (see [`on_both`]).
pub enum Rig {
    Server(Box<RedisServer>),
    Cluster(RedisCluster),
}

impl Rig {
    pub fn server() -> Self {
        Self::Server(Box::new(RedisServer::start().unwrap()))
    }

    pub fn cluster() -> Self {
        Self::Cluster(RedisCluster::start(3, 0).unwrap())
    }

    /// What [`connect`] and a child process (`SECKILL_TEST_CHILD_URL`) take.
    pub fn spec(&self) -> String {
        match self {
            Self::Server(server) => server.url(),
            Self::Cluster(cluster) => format!("cluster:{}", cluster.addresses().join(",")),
        }
    }

    pub async fn locks(&self) -> Locks {
        connect(&self.spec()).await
    }

    /// The URL of every server holding keys.
    pub fn urls(&self) -> Vec<String> {
        match self {
            Self::Server(server) => vec![server.url()],
            Self::Cluster(cluster) => cluster
                .addresses()
                .iter()
                .map(|a| format!("redis://{a}/"))
                .collect(),
        }
    }

    /// The keys alive on every node.
    pub async fn live_keys(&self) -> Vec<String> {
        let mut keys = Vec::new();
        for url in self.urls() {
            keys.extend(live_keys(&url).await);
        }
        keys
    }

    /// Function calls (`FCALL`) so far, on every node.
    pub async fn function_calls(&self) -> u64 {
        let mut calls = 0;
        for url in self.urls() {
            let mut conn = Target::server(&url).connect().await.unwrap();
            let stats: String = redis::cmd("INFO")
                .arg("commandstats")
                .query_async(&mut conn)
                .await
                .unwrap();
            calls += seckill_testkit::commandstats_calls(&stats, Some("fcall"));
        }
        calls
    }

    /// Kills every pub/sub connection on every node, as a network fault
    /// would; answers how many there were.
    pub async fn kill_pubsub(&self) -> i64 {
        let mut killed = 0;
        for url in self.urls() {
            let mut conn = Target::server(&url).connect().await.unwrap();
            let n: redis::RedisResult<i64> = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("TYPE")
                .arg("pubsub")
                .query_async(&mut conn)
                .await;
            killed += n.unwrap_or(0);
        }
        killed
    }
}

/// Runs `async fn $test(rig: Rig)` twice, as `$test::on_a_server` and
/// `$test::on_a_cluster`.
#[macro_export]
macro_rules! on_both {
    ($test:ident) => {
        mod $test {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_a_server() {
                super::$test($crate::common::Rig::server()).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_a_cluster() {
                super::$test($crate::common::Rig::cluster()).await
            }
        }
    };
}

/// Deletes lock `name`'s key (the default prefix), as an operator might:
/// whoever held it no longer does.
pub async fn delete_lock(rig: &Rig, name: &str) {
    let mut conn = target(&rig.spec()).connect().await.unwrap();
    let deleted: i64 = redis::cmd("DEL")
        .arg(format!("seckill:lock:{{{name}}}"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(deleted, 1, "lock {name} was not held");
}

/// `try_acquire` of lock `name` with default settings, panicking on errors.
pub async fn take(locks: &Locks, name: &str) -> Option<Guard> {
    locks.lock(name).unwrap().try_acquire().await.unwrap()
}

/// The protected resource: a Redis value that only accepts writes carrying
/// a fence at least as new as the newest it has seen.
pub const FENCED_SET: &str = r"
local last = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) < last then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[2])
return 1";

pub async fn fenced_write(url: &str, fence: u64, value: &str) -> bool {
    let mut conn = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let written: i64 = redis::Script::new(FENCED_SET)
        .key("resource:fence")
        .key("resource:value")
        .arg(fence)
        .arg(value)
        .invoke_async(&mut conn)
        .await
        .unwrap();
    written == 1
}

/// This test binary started again as a child process that runs only the
/// ignored helper test `helper`, told the server's `url`
/// (`SECKILL_TEST_CHILD_URL`) and `env`; its stdin piped, its stdout
/// answered as lines.
pub fn child(
    helper: &str,
    url: &str,
    env: &[(&str, String)],
) -> (
    std::process::Child,
    std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
) {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([helper, "--exact", "--ignored", "--nocapture"])
        .env("SECKILL_TEST_CHILD_URL", url)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    (child, lines)
}

/// The keys alive on the server at `url`: `KEYS` skips one whose time is
/// up, which `DBSIZE` counts until Redis reclaims it.
pub async fn live_keys(url: &str) -> Vec<String> {
    let mut conn = seckill_redis::Target::server(url).connect().await.unwrap();
    redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut conn)
        .await
        .unwrap()
}

/// Runs `step(locks, name, i)` for `i` in `0..steps` on each of 64 tasks,
/// `name` one of 1,000 names starting with `prefix`, spread so tasks meet
/// on names; waits for every task and answers the sum of the steps'
/// answers. The load of the no-key-left tests.
pub async fn on_1000_names<F, Fut>(locks: &Locks, prefix: &str, steps: usize, step: F) -> u64
where
    F: Fn(Locks, String, usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = u64> + Send,
{
    let tasks: Vec<_> = (0..64)
        .map(|t| {
            let (locks, step, prefix) = (locks.clone(), step.clone(), prefix.to_owned());
            tokio::spawn(async move {
                let mut sum = 0;
                for i in 0..steps {
                    let name = format!("{prefix}{}", (t * 7919 + i) % 1_000);
                    sum += step(locks.clone(), name, i).await;
                }
                sum
            })
        })
        .collect();
    let mut sum = 0;
    for task in tasks {
        sum += task.await.unwrap();
    }
    sum
}
