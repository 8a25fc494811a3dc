//! [`Daemon`]: a database server started by a test, listening on a
//! loopback port, its files in a temporary directory; killed on drop.

use std::io;
use std::net::TcpStream;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// A server process, its port and its directory.
#[derive(Debug)]
pub(crate) struct Daemon {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Daemon {
    /// Spawns `cmd` (named `name` in errors), which listens on `port` of
    /// 127.0.0.1 with its files in `dir`, and waits until it does.
    pub fn start(
        cmd: &mut Command,
        name: &str,
        port: u16,
        dir: tempfile::TempDir,
    ) -> io::Result<Self> {
        crate::server::die_with_this_process(cmd);
        let mut daemon = Self {
            child: cmd.spawn()?,
            port,
            _dir: dir,
        };
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = daemon.child.try_wait()? {
                return Err(io::Error::other(format!(
                    "{name} exited at start: {status}"
                )));
            }
            if started.elapsed() > Duration::from_secs(30) {
                return Err(io::Error::other(format!(
                    "{name} did not listen within 30 s"
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(daemon)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
