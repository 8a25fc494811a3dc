//! [`RedisSentinels`]: a master, its replicas and three sentinels
//! watching them, each a private [`RedisServer`], with the kills failover
//! drills need.

use std::io;
use std::time::{Duration, Instant};

use crate::redis_cli::{cli_as, settle_or_fail};
use crate::server::{Options, RedisServer};

/// The name the sentinels know the master by.
const NAME: &str = "seckill";
/// How long a master may be silent before a sentinel thinks it down.
const DOWN_AFTER_MS: u64 = 1000;
/// How long the rig may take to agree on its state after a change.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);

/// How to start [`RedisSentinels`].
#[derive(Clone, Debug)]
pub struct SentinelOptions {
    replicas: usize,
    /// What servers and sentinels start from: TLS settings, or none.
    base: Options,
    password: Option<String>,
    sentinel_password: Option<String>,
}

impl Default for SentinelOptions {
    fn default() -> Self {
        Self {
            replicas: 1,
            base: Options::default(),
            password: None,
            sentinel_password: None,
        }
    }
}

impl SentinelOptions {
    /// `n` replicas of the master (1 unless set).
    pub fn replicas(mut self, n: usize) -> Self {
        self.replicas = n;
        self
    }

    /// Servers and sentinels on TLS ports with the server certificate of
    /// `certs`; replication and the sentinels' links speak TLS too.
    pub fn tls(mut self, certs: &crate::Certs) -> Self {
        self.base = Options::default()
            .tls(certs, false)
            .arg("tls-replication", "yes");
        self
    }

    /// `requirepass` on the servers (and `masterauth`, `auth-pass`).
    pub fn password(mut self, password: &str) -> Self {
        self.password = Some(password.to_owned());
        self
    }

    /// `requirepass` on the sentinels.
    pub fn sentinel_password(mut self, password: &str) -> Self {
        self.sentinel_password = Some(password.to_owned());
        self
    }

    /// Starts the master, its replicas and three sentinels, and waits
    /// until every sentinel sees every replica and the other sentinels,
    /// so a failover can be voted at once. About 3 s.
    pub fn start(self) -> io::Result<RedisSentinels> {
        let server = |mut options: Options| {
            if let Some(password) = &self.password {
                options = options
                    .arg("requirepass", password)
                    .arg("masterauth", password);
            }
            options.arg("repl-diskless-sync-delay", "0").start()
        };
        let master = server(self.base.clone())?;
        let watched = master.tls_port().unwrap_or(master.port());
        let mut servers = vec![master];
        for _ in 0..self.replicas {
            servers.push(server(self.base.clone().replica_of(watched))?);
        }
        let mut sentinels = Vec::new();
        for _ in 0..3 {
            let options = match &self.sentinel_password {
                Some(password) => self.base.clone().arg("requirepass", password),
                None => self.base.clone(),
            };
            sentinels.push(options.sentinel(self.config(watched)).start()?);
        }
        let rig = RedisSentinels {
            servers,
            sentinels,
            options: self,
        };
        rig.wait_watching()?;
        Ok(rig)
    }

    fn config(&self, master: u16) -> Vec<String> {
        let mut lines = vec![
            format!("sentinel monitor {NAME} 127.0.0.1 {master} 2"),
            format!("sentinel down-after-milliseconds {NAME} {DOWN_AFTER_MS}"),
            format!("sentinel failover-timeout {NAME} 10000"),
            format!("sentinel parallel-syncs {NAME} 1"),
        ];
        if let Some(password) = &self.password {
            lines.push(format!("sentinel auth-pass {NAME} {password}"));
        }
        lines
    }
}

/// A master, its replicas and three sentinels (quorum 2, a master silent
/// for 1 s is down), each on free loopback ports. Dropping it kills them.
///
/// ```no_run
/// let rig = seckill_testkit::SentinelOptions::default().start().unwrap();
/// println!("--redis-sentinel {} --sentinel-master {}", rig.sentinels(), rig.name());
/// ```
#[derive(Debug)]
pub struct RedisSentinels {
    /// The master at start, then its replicas.
    servers: Vec<RedisServer>,
    sentinels: Vec<RedisServer>,
    options: SentinelOptions,
}

impl RedisSentinels {
    /// The sentinels, as `--redis-sentinel` takes them:
    /// `127.0.0.1:PORT,…`, or `rediss://localhost:PORT/,…` over TLS.
    pub fn sentinels(&self) -> String {
        let each: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| match s.tls_url() {
                Some(url) => url,
                None => format!("127.0.0.1:{}", s.port()),
            })
            .collect();
        each.join(",")
    }

    /// The name the sentinels know the master by.
    pub fn name(&self) -> &str {
        NAME
    }

    /// The port (the TLS port over TLS) of the server the first sentinel
    /// to answer names master now.
    pub fn master(&self) -> io::Result<u16> {
        let mut last = io::Error::other("no sentinel");
        for sentinel in &self.sentinels {
            let asked = ["sentinel", "get-master-addr-by-name", NAME];
            match self.on_sentinel(sentinel, &asked) {
                Ok(answer) => {
                    return answer
                        .lines()
                        .nth(1)
                        .and_then(|p| p.trim().parse().ok())
                        .ok_or_else(|| io::Error::other(format!("odd answer: {answer}")));
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Kills the master with SIGKILL, as a crash would, and waits until
    /// the sentinels name a replica master and it says it is one (the 1 s
    /// down-after, the vote and the promotion: about 2 to 4 s). Answers
    /// the old master's port and the new one's, as [`RedisSentinels::master`]
    /// gives them.
    pub fn kill_master(&mut self) -> io::Result<(u16, u16)> {
        let old = self.master()?;
        self.server(old)?.kill();
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        loop {
            if let Ok(new) = self.master()
                && new != old
                && self.role(new).is_ok_and(|r| r.starts_with("master"))
            {
                return Ok((old, new));
            }
            settle_or_fail(deadline, "the sentinels to promote a replica")?;
        }
    }

    /// Starts server `port` again (after [`RedisSentinels::kill_master`])
    /// and waits until it answers. It comes back claiming to be a master,
    /// the moment a client following the sentinels must not be fooled by;
    /// the sentinels make it a replica only some 10 s later (they wait two
    /// of their 10 s INFO rounds), which is theirs to do, not ours to wait for.
    pub fn rejoin(&mut self, port: u16) -> io::Result<()> {
        self.server(port)?.restart()
    }

    /// The server whose port (or TLS port) is `port`.
    pub fn server(&mut self, port: u16) -> io::Result<&mut RedisServer> {
        self.servers
            .iter_mut()
            .find(|s| s.port() == port || s.tls_port() == Some(port))
            .ok_or_else(|| io::Error::other(format!("no server of the rig on port {port}")))
    }

    fn role(&self, port: u16) -> io::Result<String> {
        let plain = self.plain_port(port)?;
        cli_as(plain, self.options.password.as_deref(), &["role"])
    }

    fn plain_port(&self, port: u16) -> io::Result<u16> {
        self.servers
            .iter()
            .find(|s| s.port() == port || s.tls_port() == Some(port))
            .map(RedisServer::port)
            .ok_or_else(|| io::Error::other(format!("no server of the rig on port {port}")))
    }

    fn on_sentinel(&self, sentinel: &RedisServer, args: &[&str]) -> io::Result<String> {
        let password = self.options.sentinel_password.as_deref();
        cli_as(sentinel.port(), password, args)
    }

    /// Waits until every sentinel counts every replica and two other
    /// sentinels.
    fn wait_watching(&self) -> io::Result<()> {
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        let replicas = self.options.replicas.to_string();
        for sentinel in &self.sentinels {
            loop {
                let master = self.on_sentinel(sentinel, &["sentinel", "master", NAME])?;
                let field = |name: &str| {
                    let lines: Vec<&str> = master.lines().map(str::trim).collect();
                    lines
                        .iter()
                        .position(|l| *l == name)
                        .and_then(|i| lines.get(i + 1).copied())
                        .unwrap_or("")
                        .to_owned()
                };
                if field("num-slaves") == replicas && field("num-other-sentinels") == "2" {
                    break;
                }
                settle_or_fail(deadline, "the sentinels to see each other and the replicas")?;
            }
        }
        Ok(())
    }
}
