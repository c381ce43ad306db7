//! Where the request logger may send. It posts whole request and response bodies to `logger.url`,
//! so on a cluster a manifest could aim them at the cloud's metadata service (169.254.169.254),
//! at an admin port on the pod's own loopback, or at the platform's own components. [`SinkPolicy`]
//! is the one rule, with the mode as its parameter: link-local addresses (and the metadata
//! addresses clouds give outside that range) are always refused; loopback (and the unspecified
//! address, which connects to it) is refused on a cluster and allowed in `skiff up`, where the
//! user's own machine is the natural sink; host names of the platform's own Services (its
//! namespace) are refused on a cluster. Hosts on the allow-list (inferenceservice-config
//! `logger.allowedHosts`) pass anyway. Validation applies it to the URL as written; the sink
//! applies it again to every address the host resolves to ([`SinkPolicy::check_addr`]), so a name
//! that resolves to a refused address is refused too.

use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

/// Metadata services outside the link-local ranges: AWS's IPv6 endpoint (`fd00:ec2::254`).
const METADATA: [IpAddr; 1] = [IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254))];

/// A host pattern: a name, `*.suffix` (any name ending in `.suffix`), an address or a CIDR block.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    Name(String),
    Suffix(String),
    Net(IpAddr, u8),
}

impl Pattern {
    fn parse(text: &str) -> Result<Pattern, String> {
        let text = normalize(text);
        if let Some(suffix) = text.strip_prefix("*.") {
            return if suffix.is_empty() {
                Err("\"*.\" names no suffix".into())
            } else {
                Ok(Pattern::Suffix(suffix.into()))
            };
        }
        if let Some((addr, bits)) = text.split_once('/') {
            let addr: IpAddr = addr.parse().map_err(|e| format!("{text:?}: {e}"))?;
            let max = if addr.is_ipv4() { 32 } else { 128 };
            let bits = bits.parse::<u8>().ok().filter(|b| *b <= max);
            return bits.map(|b| Pattern::Net(addr, b)).ok_or_else(|| format!("{text:?}: the prefix must be 0..{max}"));
        }
        if let Ok(addr) = text.parse::<IpAddr>() {
            let bits = if addr.is_ipv4() { 32 } else { 128 };
            return Ok(Pattern::Net(addr, bits));
        }
        if text.is_empty() || text.contains(['/', ':', '@', ' ', '*']) {
            return Err(format!("{text:?} is not a host name, *.suffix, address or CIDR block"));
        }
        Ok(Pattern::Name(text))
    }

    fn matches(&self, host: &str, addr: Option<IpAddr>) -> bool {
        match self {
            Pattern::Name(name) => host == name,
            Pattern::Suffix(suffix) => host.strip_suffix(suffix.as_str()).is_some_and(|rest| rest.ends_with('.')),
            Pattern::Net(net, bits) => addr.is_some_and(|addr| in_net(unmap(addr), unmap(*net), *bits)),
        }
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::Name(name) => f.write_str(name),
            Pattern::Suffix(suffix) => write!(f, "*.{suffix}"),
            Pattern::Net(addr, bits) if (addr.is_ipv4() && *bits == 32) || *bits == 128 => write!(f, "{addr}"),
            Pattern::Net(addr, bits) => write!(f, "{addr}/{bits}"),
        }
    }
}

/// Which sinks the request logger may send to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkPolicy {
    allow_loopback: bool,
    protected: Vec<Pattern>,
    allowed: Vec<Pattern>,
}

impl Default for SinkPolicy {
    /// The strict rule without a platform: no loopback, no link-local, nothing protected by name.
    fn default() -> SinkPolicy {
        SinkPolicy { allow_loopback: false, protected: Vec::new(), allowed: Vec::new() }
    }
}

impl SinkPolicy {
    /// `skiff up`: loopback sinks are allowed (the user's own machine); link-local ones are not.
    pub fn standalone() -> SinkPolicy {
        SinkPolicy { allow_loopback: true, ..SinkPolicy::default() }
    }

    /// A cluster whose own components run in `system_namespace`: loopback and link-local sinks are
    /// refused, and so are the names of that namespace's Services (`*.<ns>`, `*.<ns>.svc`,
    /// `*.<ns>.svc.cluster.local`), the API server's, and `protected` (more hosts, such as the
    /// router's address); hosts matching `allowed` pass anyway. Errors name the bad pattern.
    pub fn cluster(system_namespace: &str, protected: &[String], allowed: &[String]) -> Result<SinkPolicy, String> {
        let own = ["", ".svc", ".svc.cluster.local"].map(|tail| format!("*.{system_namespace}{tail}"));
        let api = ["", ".svc", ".svc.cluster.local"].map(|tail| format!("kubernetes.default{tail}"));
        SinkPolicy::default().with(false, own.iter().chain(&api).chain(protected), allowed)
    }

    /// This policy with `allow_loopback`, more `protected` and `allowed` patterns.
    fn with<'a>(
        mut self,
        allow_loopback: bool,
        protected: impl IntoIterator<Item = &'a String>,
        allowed: impl IntoIterator<Item = &'a String>,
    ) -> Result<SinkPolicy, String> {
        self.allow_loopback = allow_loopback;
        for pattern in protected {
            self.protected.push(Pattern::parse(pattern)?);
        }
        for pattern in allowed {
            self.allowed.push(Pattern::parse(pattern)?);
        }
        Ok(self)
    }

    /// The policy the logger's flags describe (see [`SinkPolicy::args`]).
    pub fn from_flags(allow_loopback: bool, protected: &[String], allowed: &[String]) -> Result<SinkPolicy, String> {
        SinkPolicy::default().with(allow_loopback, protected, allowed)
    }

    /// This policy as the logger's flags hold it: whether loopback is allowed, the protected
    /// hosts and the allowed ones ([`super::LoggerArgs::with_sinks`]; [`SinkPolicy::from_flags`]
    /// reads them back).
    pub(crate) fn to_flags(&self) -> (bool, Vec<String>, Vec<String>) {
        let list = |patterns: &[Pattern]| patterns.iter().map(Pattern::to_string).collect();
        (self.allow_loopback, list(&self.protected), list(&self.allowed))
    }

    /// Checks a sink URL as written: `http://` with a host, and the host allowed.
    pub fn check_url(&self, url: &str) -> Result<(), String> {
        let uri = url.parse::<http::Uri>().ok().filter(|uri| uri.scheme_str() == Some("http"));
        let Some(host) = uri.as_ref().and_then(http::Uri::host).filter(|h| !h.is_empty()) else {
            return Err(format!("must be an http:// URL with a host (https sinks are not supported yet), not {url:?}"));
        };
        self.check_host(host)
    }

    /// Checks a host as written in the URL: a name, or an address literal (`[...]` for IPv6).
    pub fn check_host(&self, host: &str) -> Result<(), String> {
        let name = normalize(host);
        let literal = name.parse::<IpAddr>().ok();
        self.check(&name, literal)
    }

    /// Checks `addr`, an address `host` resolved to, before the logger connects to it.
    pub fn check_addr(&self, host: &str, addr: IpAddr) -> Result<(), String> {
        self.check(&normalize(host), Some(addr))
    }

    fn check(&self, host: &str, addr: Option<IpAddr>) -> Result<(), String> {
        if self.allowed.iter().any(|p| p.matches(host, addr)) {
            return Ok(());
        }
        let shown = match addr {
            Some(addr) if addr.to_string() != host => format!("{host} ({addr})"),
            _ => host.to_owned(),
        };
        let refused = |why: &str| {
            Err(format!(
                "{shown} is {why}; sinks there are refused unless inferenceservice-config logger.allowedHosts lists them"
            ))
        };
        let loopback_name = host == "localhost" || host.ends_with(".localhost");
        match addr.map(unmap) {
            Some(addr) if is_link_local(addr) => return refused("link-local (cloud metadata services answer there)"),
            Some(addr) if METADATA.contains(&addr) => return refused("a cloud metadata address"),
            Some(addr) if (addr.is_loopback() || is_unspecified(addr)) && !self.allow_loopback => {
                return refused("loopback (the pod's own ports)");
            }
            _ if loopback_name && !self.allow_loopback => return refused("loopback (the pod's own ports)"),
            _ => {}
        }
        if let Some(pattern) = self.protected.iter().find(|p| p.matches(host, addr)) {
            return refused(&format!("one of the platform's own components ({pattern})"));
        }
        Ok(())
    }
}

/// Lower case, without a trailing dot or IPv6 brackets.
fn normalize(host: &str) -> String {
    let host = host.trim().trim_end_matches('.');
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    host.to_ascii_lowercase()
}

/// An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) as the IPv4 address it reaches.
fn unmap(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, IpAddr::V4),
        v4 => v4,
    }
}

/// 169.254.0.0/16 and fe80::/10.
fn is_link_local(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
    }
}

/// 0.0.0.0/8 and `::`: connecting there reaches the local host.
fn is_unspecified(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(v4) => v4.octets()[0] == 0,
        IpAddr::V6(v6) => v6.is_unspecified(),
    }
}

fn in_net(addr: IpAddr, net: IpAddr, bits: u8) -> bool {
    match (addr, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests;
