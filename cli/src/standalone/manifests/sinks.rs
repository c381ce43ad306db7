//! Sinks a request logger may not post to in `skiff up`: Skiff's own ports. Loopback sinks are
//! allowed in standalone mode (the user's own machine, [`skiff_api::validate::SinkPolicy::standalone`]),
//! but a logger aimed at the router, the admin endpoint (the models web app, `/status`) or the
//! activator would feed Skiff its own requests' bodies. A URL names one of them when its port is
//! the listener's and its host is a loopback or unspecified address, a `localhost` name, or the
//! listener's own address.

use std::net::{IpAddr, SocketAddr};

use skiff_api::InferenceService;
use skiff_api::revision::Component;

/// Refuses a logger of `isvc` whose URL names one of `own` (what each is, its address), naming
/// the field (`spec.predictor.logger.url`).
pub fn refuse_own(isvc: &InferenceService, own: &[(&'static str, SocketAddr)]) -> Result<(), String> {
    for component in Component::ALL {
        let Some(url) = component.spec(isvc).and_then(|spec| spec.logger.as_ref()?.url.as_deref()) else { continue };
        if let Some((what, addr)) = own.iter().find(|(_, addr)| names(url, *addr)) {
            return Err(format!(
                "spec.{}.logger.url: {url} is skiff up's own {what} ({addr}); a request logger may not post to \
                 Skiff's own ports (other loopback ports are allowed)",
                component.name()
            ));
        }
    }
    Ok(())
}

/// Whether `url` reaches the listener at `addr` on this machine.
fn names(url: &str, addr: SocketAddr) -> bool {
    let Ok(uri) = url.parse::<http::Uri>() else { return false };
    let Some(host) = uri.host() else { return false };
    if uri.port_u16().unwrap_or(80) != addr.port() {
        return false;
    }
    let host = host.trim_start_matches('[').trim_end_matches(']').trim_end_matches('.').to_ascii_lowercase();
    match host.parse::<IpAddr>() {
        Ok(ip) => {
            let ip = ip.to_canonical();
            ip.is_loopback() || ip.is_unspecified() || ip == addr.ip().to_canonical()
        }
        Err(_) => host == "localhost" || host.ends_with(".localhost"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_of_an_own_port_are_refused_and_other_ports_are_not() {
        let admin: SocketAddr = "127.0.0.1:9091".parse().unwrap();
        for url in [
            "http://127.0.0.1:9091/events",
            "http://localhost:9091",
            "http://LOCALHOST.:9091/",
            "http://127.0.0.2:9091/",
            "http://[::1]:9091/",
            "http://[::ffff:127.0.0.1]:9091/",
            "http://0.0.0.0:9091/",
        ] {
            assert!(names(url, admin), "{url}");
        }
        for url in ["http://127.0.0.1:9092/", "http://127.0.0.1/", "http://sink.example:9091/", "not a url"] {
            assert!(!names(url, admin), "{url}");
        }
        let router: SocketAddr = "192.168.1.5:80".parse().unwrap();
        assert!(names("http://192.168.1.5/", router) && names("http://localhost/", router));
    }
}
