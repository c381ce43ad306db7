//! TLS of the kubelet API, as the kubelet does it: the node's serving certificate, and client
//! certificates checked against the cluster CA, whose subject names the user (CN) and groups (O).

use std::path::Path;
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ServerConfig, WebPkiClientVerifier};

use crate::error::{Error, Result};

/// Who a client certificate says the caller is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The subject's common name.
    pub user: String,
    /// The subject's organizations.
    pub groups: Vec<String>,
}

impl Identity {
    /// Reads user and groups from a DER certificate (already verified by the TLS handshake).
    pub fn from_der(der: &[u8]) -> Result<Self> {
        let (_, cert) =
            x509_parser::parse_x509_certificate(der).map_err(|e| Error::Tls(format!("client certificate: {e}")))?;
        let subject = cert.subject();
        let user = subject
            .iter_common_name()
            .find_map(|a| a.as_str().ok())
            .filter(|cn| !cn.is_empty())
            .ok_or_else(|| Error::Tls("client certificate has no common name".into()))?
            .to_string();
        let groups = subject.iter_organization().filter_map(|a| a.as_str().ok()).map(String::from).collect();
        Ok(Identity { user, groups })
    }
}

/// A server configuration: `cert`/`key` serve, clients may present a certificate signed by
/// `client_ca` (one without is let in and refused per request, with 401). HTTP/1.1 only.
pub fn server_config(cert: &Path, key: &Path, client_ca: &Path) -> Result<Arc<ServerConfig>> {
    let pem = |path: &Path, e: rustls::pki_types::pem::Error| Error::Tls(format!("{}: {e}", path.display()));
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| pem(cert, e))?;
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| pem(key, e))?;
    let mut roots = RootCertStore::empty();
    for ca in CertificateDer::pem_file_iter(client_ca).map_err(|e| pem(client_ca, e))? {
        roots
            .add(ca.map_err(|e| pem(client_ca, e))?)
            .map_err(|e| Error::Tls(format!("{}: {e}", client_ca.display())))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()
        .map_err(|e| Error::Tls(format!("client CA {}: {e}", client_ca.display())))?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Tls(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key_der)
        .map_err(|e| Error::Tls(format!("{}: {e}", cert.display())))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A certificate for `CN=kube-apiserver-kubelet-client, O=system:masters, O=team` (made with
    /// `openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj ...`).
    const CLIENT: &str = "-----BEGIN CERTIFICATE-----
MIIB9jCCAZugAwIBAgIUP+DarV1KaVpZyEKDMgYaBZTggYwwCgYIKoZIzj0EAwIw
UDEmMCQGA1UEAwwda3ViZS1hcGlzZXJ2ZXIta3ViZWxldC1jbGllbnQxFzAVBgNV
BAoMDnN5c3RlbTptYXN0ZXJzMQ0wCwYDVQQKDAR0ZWFtMB4XDTI2MTEyMjIwMzIw
M1oXDTM2MTExOTIwMzIwM1owUDEmMCQGA1UEAwwda3ViZS1hcGlzZXJ2ZXIta3Vi
ZWxldC1jbGllbnQxFzAVBgNVBAoMDnN5c3RlbTptYXN0ZXJzMQ0wCwYDVQQKDAR0
ZWFtMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEQSqFhaR6bQGMDfEr3kVog6K/
cLHLDPSrCxa1r36XrAqKuPGK7CouEwK+WLMj6JA3GmPJaGx+4k2HVyX9XiEVP6NT
MFEwHQYDVR0OBBYEFP+H094AvZOF5ATxCO49Ra3P5l6pMB8GA1UdIwQYMBaAFP+H
094AvZOF5ATxCO49Ra3P5l6pMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwID
SQAwRgIhAK6k9NxTFcmoBvBTAl5ERI4in9GBfTwyLVnaeFKjEdCEAiEA98kIH7Nu
2egxJQ48+7F/mGXmTnqwZRRMXF2GVbJD8N4=
-----END CERTIFICATE-----";

    #[test]
    fn identity_from_subject() {
        let der = CertificateDer::from_pem_slice(CLIENT.as_bytes()).unwrap();
        let id = Identity::from_der(&der).unwrap();
        assert_eq!(id.user, "kube-apiserver-kubelet-client");
        assert_eq!(id.groups, vec!["system:masters".to_string(), "team".to_string()]);
    }

    #[test]
    fn garbage_is_refused() {
        assert!(Identity::from_der(b"not a certificate").is_err());
    }

    #[test]
    fn missing_files_are_named() {
        let e = server_config(Path::new("/nonexistent/a.crt"), Path::new("/b"), Path::new("/c")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/a.crt"), "{e}");
    }
}
