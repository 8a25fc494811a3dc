//! [`Certs`]: a throwaway CA with a server certificate for `localhost` and
//! `127.0.0.1` and a client certificate, as PEM files in a temporary
//! directory, for TLS servers (`redis-server --tls-port`, PostgreSQL
//! `ssl = on`) started by tests.

use std::io;
use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};

/// A CA and the certificates it signed, each a PEM file.
#[derive(Debug)]
pub struct Certs {
    dir: tempfile::TempDir,
}

impl Certs {
    /// A new CA, with a server certificate for `localhost` and
    /// `127.0.0.1` and a client certificate, all signed by it.
    pub fn generate() -> io::Result<Self> {
        let err = |e: rcgen::Error| io::Error::other(e.to_string());
        let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, "seckill test CA");
        let ca =
            CertifiedIssuer::self_signed(ca, KeyPair::generate().map_err(err)?).map_err(err)?;
        let dir = tempfile::Builder::new()
            .prefix("seckill-certs-")
            .tempdir()?;
        std::fs::write(dir.path().join("ca.pem"), ca.pem())?;
        for (name, sans) in [
            (
                "server",
                vec!["localhost".to_owned(), "127.0.0.1".to_owned()],
            ),
            ("client", vec!["seckill-client".to_owned()]),
        ] {
            let key = KeyPair::generate().map_err(err)?;
            let cert = CertificateParams::new(sans)
                .map_err(err)?
                .signed_by(&key, &ca)
                .map_err(err)?;
            std::fs::write(dir.path().join(format!("{name}.pem")), cert.pem())?;
            let key_file = dir.path().join(format!("{name}.key"));
            std::fs::write(&key_file, key.serialize_pem())?;
            // PostgreSQL refuses a key others can read.
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600))?;
        }
        Ok(Self { dir })
    }

    /// The CA's certificate.
    pub fn ca(&self) -> PathBuf {
        self.file("ca.pem")
    }

    /// The server's certificate and key.
    pub fn server(&self) -> (PathBuf, PathBuf) {
        (self.file("server.pem"), self.file("server.key"))
    }

    /// The client's certificate and key.
    pub fn client(&self) -> (PathBuf, PathBuf) {
        (self.file("client.pem"), self.file("client.key"))
    }

    /// The directory holding them all.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}
