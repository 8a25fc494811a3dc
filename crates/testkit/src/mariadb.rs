//! [`MariaServer`]: a private MariaDB for tests: `mariadb-install-db` into
//! a temporary directory, `mariadbd` on a free loopback port with a
//! database `seckill`, TLS on request. Grants are skipped: any user may
//! connect, as a throwaway server for one test allows.

use std::io;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::Certs;
use crate::daemon::Daemon;

/// A `mariadbd` process owned by this process; killed on drop.
#[derive(Debug)]
pub struct MariaServer(Daemon);

impl MariaServer {
    /// Starts one (with the server certificate of `tls`, if given);
    /// `Ok(None)` when MariaDB's binaries are not installed, for the
    /// caller to say it skipped.
    pub fn start(tls: Option<&Certs>) -> io::Result<Option<Self>> {
        let (Some(install), Some(server)) = (
            find(&["mariadb-install-db", "mysql_install_db"]),
            find(&["mariadbd", "mysqld"]),
        ) else {
            return Ok(None);
        };
        let dir = tempfile::Builder::new()
            .prefix("seckill-maria-")
            .tempdir()?;
        let data = dir.path().join("data");
        let out = Command::new(install)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .args(["--user=root", "--auth-root-authentication-method=normal"])
            .arg("--skip-test-db")
            .output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "mariadb-install-db: {}",
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        let init = dir.path().join("init.sql");
        std::fs::write(&init, "CREATE DATABASE IF NOT EXISTS seckill;\n")?;
        let port = crate::server::free_port()?;
        let path = |name: &str| dir.path().join(name).display().to_string();
        let mut cmd = Command::new(server);
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .args(["--user=root", "--skip-grant-tables"])
            .arg(format!("--port={port}"))
            // And on 127.0.0.2, an address the test certificate is not for.
            .arg("--bind-address=127.0.0.1,127.0.0.2")
            .arg(format!("--socket={}", path("sock")))
            .arg(format!("--pid-file={}", path("pid")))
            .arg(format!("--log-error={}", path("error.log")))
            .arg(format!("--init-file={}", init.display()));
        if let Some(certs) = tls {
            let (cert, key) = certs.server();
            cmd.arg(format!("--ssl-cert={}", cert.display()))
                .arg(format!("--ssl-key={}", key.display()))
                .arg(format!("--ssl-ca={}", certs.ca().display()));
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        Ok(Some(Self(Daemon::start(&mut cmd, "mariadbd", port, dir)?)))
    }

    /// The port it listens on, on 127.0.0.1 and 127.0.0.2.
    pub fn port(&self) -> u16 {
        self.0.port()
    }

    /// `mysql://root@localhost:PORT/seckill` (`localhost`: the name its
    /// test certificate has).
    pub fn url(&self) -> String {
        format!("mysql://root@localhost:{}/seckill", self.port())
    }
}

/// The first of `names` found in `PATH`, `/usr/sbin` or `/usr/bin`.
fn find(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    dirs.extend(["/usr/sbin".into(), "/usr/bin".into()]);
    names
        .iter()
        .flat_map(|name| dirs.iter().map(move |dir| dir.join(name)))
        .find(|candidate| candidate.is_file())
}
