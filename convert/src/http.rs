//! [`http_agent`]: the HTTP client every download uses — the system's certificate store (so
//! proxies the system trusts work), connect and read timeouts, and Stemflow's user agent.

use std::time::Duration;

use ureq::tls::{RootCerts, TlsConfig};

/// An agent going through `proxy` (`ureq::Proxy::try_from_env()` for the environment's). With
/// `is_status_error`, an HTTP error status is an `Err`; without, the caller reads the status
/// (a resumed download tells 200, 206 and 416 apart).
pub(crate) fn http_agent(proxy: Option<ureq::Proxy>, is_status_error: bool) -> ureq::Agent {
    ureq::Agent::config_builder()
        .tls_config(
            TlsConfig::builder()
                .root_certs(RootCerts::PlatformVerifier)
                .build(),
        )
        .proxy(proxy)
        .timeout_connect(Some(Duration::from_secs(20)))
        .timeout_recv_body(Some(Duration::from_secs(60)))
        .http_status_as_error(is_status_error)
        .user_agent(concat!("stemflow/", env!("CARGO_PKG_VERSION")))
        .build()
        .into()
}
