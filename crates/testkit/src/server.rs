//! [`RedisServer`]: one private `redis-server`, and its [`Options`].

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a fresh server may take to answer `PING` before we give up.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
/// Attempts at finding a free port: another process can grab the port between
/// our probe and `redis-server` binding it.
const PORT_ATTEMPTS: usize = 10;

/// When an append-only file is fsynced (`appendfsync`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fsync {
    /// `appendfsync always`: every write is on disk before it is acknowledged.
    Always,
    /// `appendfsync everysec`: up to about a second of writes can be lost.
    EverySec,
}

/// How to start a [`RedisServer`].
#[derive(Clone, Debug, Default)]
pub struct Options {
    aof: Option<Fsync>,
    args: Vec<String>,
    binary: Option<PathBuf>,
    cluster: bool,
    tls: Option<Tls>,
    /// A sentinel's configuration lines: started with `--sentinel`.
    sentinel: Option<Vec<String>>,
}

/// A TLS port's files, and whether it asks clients for a certificate.
#[derive(Clone, Debug)]
struct Tls {
    cert: PathBuf,
    key: PathBuf,
    ca: PathBuf,
    client_certificates: bool,
}

impl Options {
    /// Persist with an append-only file, fsynced as given.
    pub fn aof(mut self, fsync: Fsync) -> Self {
        self.aof = Some(fsync);
        self
    }

    /// Passes an extra `--name value` pair to `redis-server`.
    pub fn arg(mut self, name: &str, value: &str) -> Self {
        self.args.push(format!("--{name}"));
        self.args.push(value.to_owned());
        self
    }

    /// Runs this `redis-server` binary instead of `$SECKILL_REDIS_SERVER` or
    /// the one on `PATH`.
    pub fn binary(mut self, path: impl Into<PathBuf>) -> Self {
        self.binary = Some(path.into());
        self
    }

    /// A cluster node (`cluster-enabled yes`, node timeout 2 s) on a port
    /// whose cluster bus port (port + 10000) is free too; see
    /// [`RedisCluster`]. Set as the README advises for a flash sale:
    /// `cluster-require-full-coverage no`, so the masters that are up keep
    /// serving their slots while another's are down.
    pub fn cluster_node(mut self) -> Self {
        self.cluster = true;
        self.arg("cluster-enabled", "yes")
            .arg("cluster-config-file", "nodes.conf")
            .arg("cluster-node-timeout", "2000")
            .arg("cluster-require-full-coverage", "no")
            // Replicas sync at once, not after 5 s waiting for more.
            .arg("repl-diskless-sync-delay", "0")
    }

    /// A replica of the server on `port` of this host (`replicaof`).
    pub fn replica_of(mut self, port: u16) -> Self {
        self.args
            .extend(["--replicaof".into(), "127.0.0.1".into(), port.to_string()]);
        self
    }

    /// A sentinel (`redis-server FILE --sentinel`) whose configuration
    /// file starts with `lines`; the sentinel rewrites the file as it
    /// learns, and a restart keeps what it wrote.
    pub fn sentinel(mut self, lines: Vec<String>) -> Self {
        self.sentinel = Some(lines);
        self
    }

    /// Listens for TLS too, on a port of its own ([`RedisServer::tls_url`]),
    /// with the server certificate of `certs`; with `client_certificates`
    /// it refuses a client without one signed by their CA (mutual TLS).
    /// The plain port stays open, for readiness and for tests to look.
    pub fn tls(mut self, certs: &crate::Certs, client_certificates: bool) -> Self {
        let (cert, key) = certs.server();
        self.tls = Some(Tls {
            cert,
            key,
            ca: certs.ca(),
            client_certificates,
        });
        self
    }

    /// Starts a server with these options.
    pub fn start(self) -> io::Result<RedisServer> {
        let mut last_err = io::Error::other("no free port found");
        for _ in 0..PORT_ATTEMPTS {
            let port = if self.cluster {
                free_cluster_port()?
            } else {
                free_port()?
            };
            let tls_port = match self.tls {
                Some(_) => Some(free_port()?),
                None => None,
            };
            let mut server = RedisServer {
                child: None,
                port,
                tls_port,
                options: self.clone(),
                dir: tempfile::Builder::new()
                    .prefix("seckill-redis-")
                    .tempdir()?,
                held: Vec::new(),
            };
            match server.spawn() {
                Ok(()) => return Ok(server),
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(e),
                Err(e) => last_err = e,
            }
        }
        Err(last_err)
    }
}

/// Spawns `cmd` from a thread that lives as long as the process.
///
/// `PR_SET_PDEATHSIG` fires when the *thread* that forked the child exits,
/// not the process: a server started by a short-lived thread (a test of a
/// `cargo test` run setting up a rig that later tests share) would be killed
/// when that thread ends. Forking from one thread that never ends ties the
/// server's life to the process instead.
fn spawn_for_process(cmd: Command) -> io::Result<Child> {
    use std::sync::mpsc::{Sender, channel};
    use std::sync::{Mutex, OnceLock};
    type Request = (Command, Sender<io::Result<Child>>);
    static SPAWNER: OnceLock<Option<Mutex<Sender<Request>>>> = OnceLock::new();
    let gone = || io::Error::other("the redis-server spawner thread could not start");
    let spawner = SPAWNER.get_or_init(|| {
        let (requests, incoming) = channel::<Request>();
        std::thread::Builder::new()
            .name("redis-spawner".into())
            .spawn(move || {
                for (mut cmd, answer) in incoming {
                    let _ = answer.send(cmd.spawn());
                }
            })
            .ok()
            .map(|_| Mutex::new(requests))
    });
    let (answer, answered) = channel();
    spawner
        .as_ref()
        .ok_or_else(gone)?
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .send((cmd, answer))
        .map_err(|_| gone())?;
    answered.recv().map_err(|_| gone())?
}

/// A `redis-server` process owned by this process.
///
/// Dropping it kills the server and removes its directory. The server is
/// also told to die with this process (`PR_SET_PDEATHSIG`), so a killed test
/// run leaves no servers behind.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    tls_port: Option<u16>,
    options: Options,
    dir: tempfile::TempDir,
    /// The server's ports, held while it is down; see [`hold`].
    held: Vec<socket2::Socket>,
}

impl RedisServer {
    /// Starts a server without persistence on a free port.
    pub fn start() -> io::Result<Self> {
        Options::default().start()
    }

    /// Starts a server without persistence and `n` replicas of it, each
    /// synced (see [`RedisServer::wait_synced`]) and listed online by the
    /// master.
    pub fn start_with_replicas(n: usize) -> io::Result<(Self, Vec<Self>)> {
        let master = Self::start()?;
        let replicas = (0..n)
            .map(|_| Options::default().replica_of(master.port).start())
            .collect::<io::Result<Vec<_>>>()?;
        for replica in &replicas {
            replica.wait_synced()?;
        }
        // The master counts a replica once it reports after its sync.
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        while crate::redis_cli::cli(master.port, &["info", "replication"])?
            .matches("state=online")
            .count()
            < n
        {
            crate::redis_cli::settle_or_fail(deadline, "the master to list its replicas online")?;
        }
        Ok((master, replicas))
    }

    /// Starts `n` independent servers.
    pub fn start_many(n: usize) -> io::Result<Vec<Self>> {
        (0..n).map(|_| Self::start()).collect()
    }

    /// `redis://127.0.0.1:PORT/`
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// `rediss://localhost:TLS_PORT/`, the name its certificate has, if
    /// it was started with [`Options::tls`].
    pub fn tls_url(&self) -> Option<String> {
        self.tls_port
            .map(|port| format!("rediss://localhost:{port}/"))
    }

    /// The TLS port, if it was started with [`Options::tls`].
    pub fn tls_port(&self) -> Option<u16> {
        self.tls_port
    }

    /// The TCP port the server listens on (kept across restarts).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's working directory (AOF files live here).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Waits (at most 10 s) until this replica says its link to its
    /// master is up, so what the master writes next reaches it.
    pub fn wait_synced(&self) -> io::Result<()> {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        while !crate::redis_cli::synced_replica(self.port) {
            crate::redis_cli::settle_or_fail(deadline, "a replica to sync")?;
        }
        Ok(())
    }

    /// Whether the process is running (it may still be paused).
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.as_mut().map(Child::try_wait), Some(Ok(None)))
    }

    /// Kills the server with SIGKILL, as a crash would, and waits for it.
    /// Its ports stay held until it starts again (see [`hold`]), so a
    /// restart finds them free and connecting meanwhile is refused.
    pub fn kill(&mut self) {
        self.stop();
        let bus = self.options.cluster.then(|| self.port + 10_000);
        self.held = [Some(self.port), self.tls_port, bus]
            .into_iter()
            .flatten()
            .filter_map(hold)
            .collect();
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the server if it runs, then starts it again on the same port
    /// and directory, so an append-only file is replayed.
    pub fn restart(&mut self) -> io::Result<()> {
        self.kill();
        self.spawn()
    }

    /// Freezes the server with SIGSTOP: connections stay open, nothing answers.
    pub fn pause(&self) -> io::Result<()> {
        self.signal(libc::SIGSTOP)
    }

    /// Lets a paused server run again (SIGCONT).
    pub fn resume(&self) -> io::Result<()> {
        self.signal(libc::SIGCONT)
    }

    fn signal(&self, signal: libc::c_int) -> io::Result<()> {
        let child = self
            .child
            .as_ref()
            .ok_or_else(|| io::Error::other("redis-server is not running"))?;
        let pid = libc::pid_t::try_from(child.id()).map_err(io::Error::other)?;
        // SAFETY: plain syscall on a pid we own and have not reaped.
        if unsafe { libc::kill(pid, signal) } == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    fn spawn(&mut self) -> io::Result<()> {
        let binary = self.options.binary.clone().unwrap_or_else(default_binary);
        let mut cmd = Command::new(binary);
        if let Some(lines) = &self.options.sentinel {
            let file = self.dir.path().join("sentinel.conf");
            if !file.exists() {
                std::fs::write(&file, lines.join("\n") + "\n")?;
            }
            cmd.arg(file).arg("--sentinel");
        }
        cmd.arg("--port")
            .arg(self.port.to_string())
            .arg("--bind")
            .arg("127.0.0.1")
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--save")
            .arg("")
            .arg("--logfile")
            .arg("redis.log")
            .arg("--daemonize")
            .arg("no")
            .arg("--protected-mode")
            .arg("no");
        match self.options.aof {
            Some(fsync) => {
                let fsync = match fsync {
                    Fsync::Always => "always",
                    Fsync::EverySec => "everysec",
                };
                cmd.args(["--appendonly", "yes", "--appendfsync", fsync]);
            }
            None => {
                cmd.args(["--appendonly", "no"]);
            }
        }
        if let (Some(tls), Some(port)) = (&self.options.tls, self.tls_port) {
            // And on 127.0.0.2, an address the test certificate is not for.
            cmd.args(["--bind", "127.0.0.1", "127.0.0.2"]);
            cmd.arg("--tls-port").arg(port.to_string());
            cmd.arg("--tls-cert-file").arg(&tls.cert);
            cmd.arg("--tls-key-file").arg(&tls.key);
            cmd.arg("--tls-ca-cert-file").arg(&tls.ca);
            let clients = if tls.client_certificates { "yes" } else { "no" };
            cmd.args(["--tls-auth-clients", clients]);
        }
        cmd.args(&self.options.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        die_with_this_process(&mut cmd);
        let child = spawn_for_process(cmd).map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                io::Error::new(
                    e.kind(),
                    "redis-server not found: install it (apt-get install -y redis-server) \
                     or set SECKILL_REDIS_SERVER to its path",
                )
            } else {
                e
            }
        })?;
        self.child = Some(child);
        self.wait_for_ping()?;
        self.held.clear();
        Ok(())
    }

    fn wait_for_ping(&mut self) -> io::Result<()> {
        let started = Instant::now();
        loop {
            if !self.is_running() {
                self.child = None;
                // The log goes with the directory when the test ends, so
                // its last lines travel in the error.
                let log =
                    std::fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default();
                let lines: Vec<&str> = log.lines().collect();
                return Err(io::Error::other(format!(
                    "redis-server exited at start-up on port {}; its log ends: {}",
                    self.port,
                    lines[lines.len().saturating_sub(5)..].join(" | ")
                )));
            }
            if ping(self.port).is_ok() {
                return Ok(());
            }
            if started.elapsed() > STARTUP_TIMEOUT {
                self.kill();
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("redis-server on port {} did not answer PING", self.port),
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Binds `port` on 127.0.0.1 without listening, so no other process is
/// handed it (an ephemeral `bind` skips a bound port) while connecting to it
/// is refused as to a closed port. Without this a test that kills a server
/// and restarts it seconds later could find its port taken by a server of a
/// test running beside it. `SO_REUSEADDR` on both sides lets `redis-server`
/// bind it while this is held, since this one does not listen.
fn hold(port: u16) -> Option<socket2::Socket> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
    socket.set_reuse_address(true).ok()?;
    let addr = std::net::SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    socket.bind(&addr.into()).ok()?;
    Some(socket)
}

/// Has the process `cmd` starts killed when the thread that starts it
/// ends (`PR_SET_PDEATHSIG`), so a killed test run leaves no server behind.
/// Set after any change of user, which would clear it.
pub(crate) fn die_with_this_process(cmd: &mut Command) {
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork
    // and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// `$SECKILL_REDIS_SERVER`, else `redis-server` from `PATH`.
fn default_binary() -> PathBuf {
    std::env::var_os("SECKILL_REDIS_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("redis-server"))
}

pub(crate) fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}

/// A free port below 55536 whose port + 10000 (the cluster bus) is free too.
fn free_cluster_port() -> io::Result<u16> {
    for _ in 0..1000 {
        let port = free_port()?;
        if port < 55536 && TcpListener::bind((Ipv4Addr::LOCALHOST, port + 10000)).is_ok() {
            return Ok(port);
        }
    }
    Err(io::Error::other("no free port pair for a cluster node"))
}

/// One `PING` over a plain socket: the server is up when it answers `+PONG`
/// (or `-NOAUTH`, when it has a password). A server still loading its AOF
/// answers `-LOADING`, which is not ready.
fn ping(port: u16) -> io::Result<()> {
    let mut stream = TcpStream::connect((Ipv4Addr::LOCALHOST, port))?;
    stream.set_read_timeout(Some(Duration::from_millis(500)))?;
    stream.write_all(b"PING\r\n")?;
    let mut reply = [0u8; 7];
    stream.read_exact(&mut reply)?;
    if &reply == b"+PONG\r\n" || &reply == b"-NOAUTH" {
        Ok(())
    } else {
        Err(io::Error::other("not ready"))
    }
}
