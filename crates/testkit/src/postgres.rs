//! [`PgServer`]: a private PostgreSQL for tests: `initdb` into a temporary
//! directory, `postgres` on a free loopback port, with TLS on request.
//! PostgreSQL will not run as root, so under root it runs as the
//! `postgres` user the Debian package creates.

use std::ffi::CString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::Certs;
use crate::daemon::Daemon;

/// A `postgres` process owned by this process; killed on drop.
#[derive(Debug)]
pub struct PgServer(Daemon);

impl PgServer {
    /// Starts one (with `ssl = on` and the server certificate of `tls`, if
    /// given); `Ok(None)` when PostgreSQL's binaries are not installed, for
    /// the caller to say it skipped.
    pub fn start(tls: Option<&Certs>) -> io::Result<Option<Self>> {
        let Some(bin) = binaries() else {
            return Ok(None);
        };
        let dir = tempfile::Builder::new().prefix("seckill-pg-").tempdir()?;
        let data = dir.path().join("data");
        let owner = Owner::for_server()?;
        owner.give(dir.path())?;
        let mut initdb = owner.command(&bin.join("initdb"));
        initdb.args(["-U", "postgres", "--auth=trust", "--no-sync", "-D"]);
        run(initdb.arg(&data))?;
        let port = crate::server::free_port()?;
        let mut conf = format!(
            "port = {port}\nlisten_addresses = '127.0.0.1,127.0.0.2'\nunix_socket_directories = '{}'\n\
             fsync = off\nmax_connections = 50\n",
            dir.path().display()
        );
        if let Some(certs) = tls {
            let (cert, key) = certs.server();
            for (from, to) in [(cert, "server.crt"), (key, "server.key")] {
                let to = data.join(to);
                std::fs::copy(from, &to)?;
                owner.give(&to)?;
            }
            conf.push_str("ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n");
        }
        let conf_file = data.join("postgresql.auto.conf");
        std::fs::write(&conf_file, conf)?;
        owner.give(&conf_file)?;
        let mut postgres = owner.command(&bin.join("postgres"));
        postgres
            .arg("-D")
            .arg(&data)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        Ok(Some(Self(Daemon::start(
            &mut postgres,
            "postgres",
            port,
            dir,
        )?)))
    }

    /// The port it listens on, on 127.0.0.1 and 127.0.0.2 (an address its
    /// test certificate is not for).
    pub fn port(&self) -> u16 {
        self.0.port()
    }

    /// `postgres://postgres@HOST:PORT/postgres`, `HOST` being `localhost`
    /// (the name its test certificate has).
    pub fn url(&self) -> String {
        format!("postgres://postgres@localhost:{}/postgres", self.port())
    }
}

/// The directory of `initdb` and `postgres`: `pg_config --bindir`, else
/// the newest `/usr/lib/postgresql/*/bin`.
fn binaries() -> Option<PathBuf> {
    let has = |dir: &Path| dir.join("initdb").exists() && dir.join("postgres").exists();
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output() {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if has(&dir) {
            return Some(dir);
        }
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| Some(e.ok()?.path().join("bin")))
        .filter(|d| has(d))
        .collect();
    dirs.sort();
    dirs.pop()
}

fn run(cmd: &mut Command) -> io::Result<()> {
    let out = cmd.output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        )))
    }
}

/// Who runs the server: this process, or under root the `postgres` user.
struct Owner(Option<(libc::uid_t, libc::gid_t)>);

impl Owner {
    fn for_server() -> io::Result<Self> {
        // SAFETY: plain syscalls; the passwd entry is read before any other
        // call to getpwnam in this process can overwrite it.
        unsafe {
            if libc::geteuid() != 0 {
                return Ok(Self(None));
            }
            let name = CString::new("postgres").map_err(io::Error::other)?;
            let entry = libc::getpwnam(name.as_ptr());
            if entry.is_null() {
                return Err(io::Error::other(
                    "PostgreSQL will not run as root, and there is no `postgres` user",
                ));
            }
            Ok(Self(Some(((*entry).pw_uid, (*entry).pw_gid))))
        }
    }

    /// Makes `path` the server user's (mode 0700 for a directory, 0600 for
    /// a file, as PostgreSQL wants for its data and its key).
    fn give(&self, path: &Path) -> io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let mode = if path.is_dir() { 0o700 } else { 0o600 };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
        if let Some((uid, gid)) = self.0 {
            std::os::unix::fs::chown(path, Some(uid), Some(gid))?;
        }
        Ok(())
    }

    /// `program`, run as the server user.
    fn command(&self, program: &Path) -> Command {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new(program);
        if let Some((uid, gid)) = self.0 {
            cmd.uid(uid).gid(gid).env("HOME", "/tmp");
        }
        cmd
    }
}
