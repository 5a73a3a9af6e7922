//! [`http_agent`]: the HTTP client every download uses — the system's certificate store (so
//! proxies the system trusts work), connect, answer and stall timeouts, and Stemflow's user
//! agent.

use std::time::Duration;

use ureq::tls::{RootCerts, TlsConfig};

/// Longest wait for a connection (DNS and TCP).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);
/// Longest wait for the answer's headers once connected.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest a read may wait for data: a connection silent this long is dropped (and a download
/// resumed by its retry).
const STALL_TIMEOUT: Duration = Duration::from_secs(30);

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
        .timeout_connect(Some(CONNECT_TIMEOUT))
        .timeout_recv_response(Some(ANSWER_TIMEOUT))
        // A stall, not a total: an 84 MB checkpoint on a slow line takes minutes, and a total
        // body budget would cut every such download short.
        .timeout_per_read(Some(STALL_TIMEOUT))
        .http_status_as_error(is_status_error)
        .user_agent(concat!("stemflow/", env!("CARGO_PKG_VERSION")))
        .build()
        .into()
}
