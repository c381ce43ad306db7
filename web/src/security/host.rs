//! DNS rebinding and cross-site requests: the request's `Host` must be one of the names the app
//! answers to (421 otherwise), and a mutating request must come from the app's own origin
//! (`Origin` equal to the `Host` it was sent to, `Sec-Fetch-Site` neither `cross-site` nor
//! `same-site`; 403 otherwise). Pure functions of the headers.

use http::HeaderMap;
use http::header::ORIGIN;

use crate::config::AllowedHosts;
use crate::error::{Error, Result};

/// An authority (`name`, `name:port`, `[v6]:port`) split into its host (lowercase, no trailing
/// dot, IPv6 in brackets) and port; `None` if it is not one.
pub fn split_authority(authority: &str) -> Option<(String, Option<u16>)> {
    let authority = authority.trim();
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (address, after) = rest.split_once(']')?;
        address.parse::<std::net::Ipv6Addr>().ok()?;
        (format!("[{}]", address.to_ascii_lowercase()), after)
    } else {
        match authority.rsplit_once(':') {
            Some((host, _)) => (host.to_ascii_lowercase(), &authority[host.len()..]),
            None => (authority.to_ascii_lowercase(), ""),
        }
    };
    let port = match port {
        "" => None,
        port => Some(port.strip_prefix(':')?.parse().ok()?),
    };
    let host = host.trim_end_matches('.').to_owned();
    let valid = !host.is_empty()
        && (host.starts_with('[') || host.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.'));
    valid.then_some((host, port))
}

/// Checks the authorities a request names (its `Host` header and, in HTTP/2 or an absolute
/// request target, its URI's): unless any is allowed, there is one, and every one is allowed.
pub fn check_host(allowed: &AllowedHosts, authorities: &[&str]) -> Result<()> {
    if *allowed == AllowedHosts::Any {
        return Ok(());
    }
    if authorities.is_empty() {
        return Err(Error::MisdirectedHost("the request names no Host".into()));
    }
    for authority in authorities {
        let host = split_authority(authority).map(|(host, _)| host);
        if !host.as_deref().is_some_and(|h| allowed.allows(h)) {
            return Err(Error::MisdirectedHost(format!(
                "Host {authority:?} is not a name this app answers to (it answers to {allowed}); a page whose \
                 name was made to resolve to this machine (DNS rebinding) is refused. Add the name with `skiff \
                 up --web-host NAME`, or APP_ALLOWED_HOSTS on a cluster"
            )));
        }
    }
    Ok(())
}

/// The port an origin of `scheme` uses when it names none.
fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

/// Checks that a mutating request comes from the app's own pages: `Sec-Fetch-Site` is not
/// `cross-site` or `same-site` (another port of the same name is the same site), and `Origin`,
/// when there is one (browsers send it on every POST, PUT, PATCH and DELETE), names the host and
/// port the request was sent to (`authority`, its `Host`; the scheme gives the port when one
/// names none; the scheme itself is not compared, as a TLS-terminating proxy hides it). Clients
/// that are not browsers send neither; they still need the CSRF token.
pub fn check_origin(headers: &HeaderMap, authority: &str) -> Result<()> {
    match headers.get("sec-fetch-site").map(|v| v.as_bytes()) {
        Some(b"cross-site") => {
            return Err(Error::CrossSite(
                "Sec-Fetch-Site is cross-site: a page of another site sent this request".into(),
            ));
        }
        Some(b"same-site") => {
            return Err(Error::CrossSite(
                "Sec-Fetch-Site is same-site: a page of another origin of this site (another port or \
                 subdomain) sent this request"
                    .into(),
            ));
        }
        _ => {}
    }
    let Some(origin) = headers.get(ORIGIN) else { return Ok(()) };
    let origin = origin.to_str().unwrap_or("");
    let parsed = origin.split_once("://").and_then(|(scheme, rest)| {
        let (host, port) = split_authority(rest).filter(|_| !rest.contains('/'))?;
        Some((host, port.or(default_port(scheme))?, scheme))
    });
    let Some((origin_host, origin_port, scheme)) = parsed else {
        return Err(Error::CrossSite(format!(
            "Origin {origin:?} is not scheme://host[:port] (an opaque or sandboxed page sent this request)"
        )));
    };
    let same = split_authority(authority)
        .is_some_and(|(host, port)| host == origin_host && port.or(default_port(scheme)) == Some(origin_port));
    if same {
        Ok(())
    } else {
        Err(Error::CrossSite(format!("Origin {origin} is not this app's origin (the request was sent to {authority})")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::tests::headers;

    #[test]
    fn authorities_split_into_host_and_port() {
        assert_eq!(split_authority("LocalHost.:9091"), Some(("localhost".into(), Some(9091))));
        assert_eq!(split_authority("127.0.0.1"), Some(("127.0.0.1".into(), None)));
        assert_eq!(split_authority("[::1]:80"), Some(("[::1]".into(), Some(80))));
        assert_eq!(split_authority("[::1]"), Some(("[::1]".into(), None)));
        for bad in ["", ":80", "a:b", "[::1", "[zz]:1", "evil.example:80:80", "a b", "a@b", "x:99999"] {
            assert_eq!(split_authority(bad), None, "{bad}");
        }
    }

    #[test]
    fn only_the_loopback_names_and_the_added_ones_are_answered() {
        let allowed = AllowedHosts::loopback_and(&["Models.Lan".into()]).unwrap();
        for good in ["127.0.0.1:9091", "localhost", "[::1]:9091", "models.lan:9091", "MODELS.LAN."] {
            assert!(check_host(&allowed, &[good]).is_ok(), "{good}");
        }
        for bad in ["evil.example:9091", "127.0.0.2:9091", "localhost.evil.example", "0.0.0.0", "attacker"] {
            let error = check_host(&allowed, &[bad]).unwrap_err();
            assert_eq!(error.status(), http::StatusCode::MISDIRECTED_REQUEST, "{bad}");
            assert!(error.to_string().contains(bad) && error.to_string().contains("--web-host"), "{error}");
        }
        assert!(check_host(&allowed, &[]).is_err(), "no Host at all");
        assert!(check_host(&allowed, &["localhost:1", "evil.example:1"]).is_err(), "every authority counts");
        assert!(check_host(&AllowedHosts::Any, &["anything.example"]).is_ok());
        assert!(check_host(&AllowedHosts::Any, &[]).is_ok());
    }

    #[test]
    fn mutations_from_another_origin_are_refused() {
        let host = "127.0.0.1:9091";
        let same = headers(&[("origin", "http://127.0.0.1:9091"), ("sec-fetch-site", "same-origin")]);
        assert!(check_origin(&same, host).is_ok());
        assert!(check_origin(&headers(&[]), host).is_ok(), "no browser headers: a plain client");
        assert!(check_origin(&headers(&[("sec-fetch-site", "none")]), host).is_ok(), "typed by the user");
        assert!(check_origin(&headers(&[("origin", "http://localhost")]), "localhost:80").is_ok(), "default port");
        for (pairs, reason) in [
            (&[("sec-fetch-site", "cross-site")][..], "cross-site"),
            (&[("sec-fetch-site", "same-site")][..], "same-site"),
            (&[("origin", "http://127.0.0.1:8000")][..], "not this app's origin"),
            (&[("origin", "http://evil.example:9091")][..], "not this app's origin"),
            (&[("origin", "https://127.0.0.1")][..], "not this app's origin"),
            (&[("origin", "null")][..], "not scheme://host"),
        ] {
            let error = check_origin(&headers(pairs), host).unwrap_err();
            assert_eq!(error.status(), http::StatusCode::FORBIDDEN);
            assert!(error.to_string().contains(reason), "{pairs:?}: {error}");
        }
    }
}
