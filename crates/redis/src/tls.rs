//! [`Tls`]: what a `rediss://` connection trusts and shows beyond its URL:
//! a CA instead of the system's roots, a client certificate for mutual
//! TLS, or, asked for by name, no verification at all.

use std::path::Path;

use redis::{ClientTlsConfig, ConnectionAddr, ConnectionInfo, IntoConnectionInfo};
use redis::{ErrorKind, RedisError, RedisResult, TlsCertificates};

/// TLS settings for every connection to a [`crate::Target`] whose URLs
/// are `rediss://`. The default trusts the system's roots and verifies
/// the server's certificate and host name.
///
/// ```
/// let tls = seckill_redis::Tls::default().insecure();
/// assert!(tls.is_insecure());
/// assert_eq!(format!("{tls:?}"), "Tls { ca: false, client_certificate: false, insecure: true }");
/// ```
#[derive(Clone, Default)]
pub struct Tls {
    ca: Option<Vec<u8>>,
    client: Option<ClientTlsConfig>,
    insecure: bool,
}

/// Whether each part is set; never a key.
impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("ca", &self.ca.is_some())
            .field("client_certificate", &self.client.is_some())
            .field("insecure", &self.insecure)
            .finish()
    }
}

impl Tls {
    /// Reads the CA (PEM certificates to trust instead of the system's)
    /// and a client certificate and key (PEM) for mutual TLS, each
    /// optional; an error names the file that could not be read.
    pub fn from_files(
        ca: Option<&Path>,
        cert: Option<&Path>,
        key: Option<&Path>,
    ) -> RedisResult<Self> {
        let read = |what: &str, path: &Path| {
            std::fs::read(path).map_err(|e| {
                RedisError::from((
                    ErrorKind::InvalidClientConfig,
                    "cannot read a TLS file",
                    format!("{what} {}: {e}", path.display()),
                ))
            })
        };
        let client = match (cert, key) {
            (Some(cert), Some(key)) => Some(ClientTlsConfig {
                client_cert: read("client certificate", cert)?,
                client_key: read("client key", key)?,
            }),
            (None, None) => None,
            _ => {
                return Err(RedisError::from((
                    ErrorKind::InvalidClientConfig,
                    "a client certificate needs its key, and a key its certificate",
                )));
            }
        };
        let ca = ca.map(|path| read("CA", path)).transpose()?;
        let tls = Self {
            ca,
            client,
            insecure: false,
        };
        // Parsed now, so a bad file fails at start, not at the first call.
        if let Some(certs) = tls.certificates() {
            let probe = ConnectionAddr::TcpTls {
                host: "localhost".to_owned(),
                port: 6379,
                insecure: false,
                tls_params: None,
            };
            redis::Client::build_with_tls(probe.into_connection_info()?, certs)?;
        }
        Ok(tls)
    }

    /// Accepts any certificate from the server: for a test, or a server
    /// whose certificate cannot be checked yet. A man in the middle can
    /// then read and change everything.
    #[must_use]
    pub fn insecure(mut self) -> Self {
        self.insecure = true;
        self
    }

    /// Whether certificates go unchecked.
    pub fn is_insecure(&self) -> bool {
        self.insecure
    }

    /// The certificates, if any is set beyond the system's roots.
    pub(crate) fn certificates(&self) -> Option<TlsCertificates> {
        (self.ca.is_some() || self.client.is_some()).then(|| TlsCertificates {
            client_tls: self.client.clone(),
            root_cert: self.ca.clone(),
        })
    }

    /// A client for `info` with these settings; `info` must be
    /// `rediss://` if any is set.
    pub(crate) fn client(&self, mut info: ConnectionInfo) -> RedisResult<redis::Client> {
        let set = self.insecure || self.certificates().is_some();
        match info.addr().clone() {
            ConnectionAddr::TcpTls { host, port, .. } if self.insecure => {
                info = info.set_addr(ConnectionAddr::TcpTls {
                    host,
                    port,
                    insecure: true,
                    tls_params: None,
                });
            }
            ConnectionAddr::TcpTls { .. } => {}
            _ if set => {
                return Err(RedisError::from((
                    ErrorKind::InvalidClientConfig,
                    "TLS settings (a CA, a client certificate, insecure) need a rediss:// URL",
                )));
            }
            _ => return redis::Client::open(info),
        }
        match self.certificates() {
            Some(certs) => redis::Client::build_with_tls(info, certs),
            None => redis::Client::open(info),
        }
    }
}

/// `error` with a plain explanation added where it is a TLS failure whose
/// own words are rustls' names (`UnknownIssuer`, `NotValidForName`).
pub(crate) fn explain(error: RedisError) -> RedisError {
    let text = error.to_string();
    let has = |words: &[&str]| {
        let lower = text.to_lowercase();
        words.iter().any(|w| lower.contains(w))
    };
    let why = if has(&["unknownissuer", "badsignature", "unknown issuer"]) {
        "the server's certificate is not signed by a CA this client trusts \
         (give its CA with --redis-ca-file)"
    } else if has(&["notvalidforname", "not valid for name"]) {
        "the server's certificate is not issued for the host name in the URL"
    } else if has(&["expired"]) {
        "the server's certificate has expired"
    } else if has(&["certificaterequired", "certificate required"]) {
        "the server asks for a client certificate (--redis-client-cert-file and \
         --redis-client-key-file)"
    } else if has(&["invalidcontenttype", "corruptmessage"]) {
        "the server did not answer in TLS: is it a plain redis:// port?"
    } else {
        return error;
    };
    std::io::Error::other(format!("TLS failed: {why} ({text})")).into()
}
