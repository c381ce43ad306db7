//! Pod addresses and interface names (pure).

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use crate::error::{Error, Result};

/// An IPv4 network in CIDR form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    /// Network address (host bits cleared).
    pub network: Ipv4Addr,
    /// Prefix length.
    pub prefix: u8,
}

impl Cidr {
    /// Parses `a.b.c.d/n` (host bits are cleared); prefixes from 8 to 30 are accepted.
    pub fn parse(s: &str) -> Result<Cidr> {
        let bad = || Error::Config(format!("pod CIDR {s:?}: expected a.b.c.d/n with 8 <= n <= 30"));
        let (addr, prefix) = s.split_once('/').ok_or_else(bad)?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| bad())?;
        let prefix: u8 = prefix.parse().map_err(|_| bad())?;
        if !(8..=30).contains(&prefix) {
            return Err(bad());
        }
        let mask = u32::MAX << (32 - prefix);
        Ok(Cidr { network: Ipv4Addr::from(u32::from(addr) & mask), prefix })
    }

    /// The first host address, used by the bridge (the pods' gateway and the node's address).
    pub fn gateway(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.network) + 1)
    }

    fn size(&self) -> u32 {
        1u32 << (32 - self.prefix)
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

/// Hands out pod IPs from a CIDR: never the network, gateway or broadcast address. Like CNI's
/// host-local IPAM it goes round the range, taking the next free address after the last one it
/// gave, so that a released address is not reused at once (the host may still have the old pod's
/// MAC for it in its neighbour table).
#[derive(Debug, Clone)]
pub struct Ipam {
    cidr: Cidr,
    used: BTreeSet<u32>,
    /// Offset in the range of the last address handed out (1 = the gateway: none yet).
    last: u32,
}

impl Ipam {
    /// An allocator with nothing in use.
    pub fn new(cidr: Cidr) -> Self {
        Ipam { cidr, used: BTreeSet::new(), last: 1 }
    }

    /// Takes the next free address after the last one handed out, wrapping round.
    pub fn allocate(&mut self) -> Result<Ipv4Addr> {
        let base = u32::from(self.cidr.network);
        let first = 2;
        let count = self.cidr.size() - 3;
        let found = (1..=count)
            .map(|step| first + (self.last + step - first) % count)
            .find(|offset| !self.used.contains(&(base + offset)));
        match found {
            Some(offset) => {
                self.last = offset;
                self.used.insert(base + offset);
                Ok(Ipv4Addr::from(base + offset))
            }
            None => Err(Error::NoFreeIp(self.cidr.to_string())),
        }
    }

    /// Gives an address back.
    pub fn release(&mut self, ip: Ipv4Addr) {
        self.used.remove(&u32::from(ip));
    }

    /// Addresses in use.
    pub fn in_use(&self) -> usize {
        self.used.len()
    }
}

/// The network namespace of a pod: `<prefix>-<uid>` (the bridge name is the prefix, so agents with
/// different bridges never touch each other's namespaces).
pub fn netns_name(prefix: &str, uid: &str) -> String {
    format!("{prefix}-{uid}")
}

/// The host end of a pod's veth pair: `skv` + 12 hex digits of the UID (interface names are
/// limited to 15 bytes).
pub fn veth_name(uid: &str) -> String {
    let hex: String = uid.chars().filter(char::is_ascii_hexdigit).take(12).collect();
    format!("skv{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_parsing() {
        let c = Cidr::parse("10.244.0.7/24").unwrap();
        assert_eq!(c.network, Ipv4Addr::new(10, 244, 0, 0));
        assert_eq!(c.gateway(), Ipv4Addr::new(10, 244, 0, 1));
        assert_eq!(c.to_string(), "10.244.0.0/24");
        assert!(Cidr::parse("10.244.0.0").is_err());
        assert!(Cidr::parse("10.244.0.0/31").is_err());
        assert!(Cidr::parse("nope/24").is_err());
    }

    #[test]
    fn allocation_skips_reserved_and_goes_round() {
        let mut ipam = Ipam::new(Cidr::parse("10.244.0.0/30").unwrap());
        assert_eq!(ipam.allocate().unwrap(), Ipv4Addr::new(10, 244, 0, 2));
        assert!(ipam.allocate().is_err(), "a /30 has one pod address");
        ipam.release(Ipv4Addr::new(10, 244, 0, 2));
        assert_eq!(ipam.in_use(), 0);
        let mut big = Ipam::new(Cidr::parse("10.244.0.0/24").unwrap());
        let ips: Vec<_> = (0..253).map(|_| big.allocate().unwrap()).collect();
        assert_eq!(ips[0], Ipv4Addr::new(10, 244, 0, 2));
        assert_eq!(ips[252], Ipv4Addr::new(10, 244, 0, 254));
        assert!(big.allocate().is_err());
        big.release(Ipv4Addr::new(10, 244, 0, 9));
        assert_eq!(big.allocate().unwrap(), Ipv4Addr::new(10, 244, 0, 9));
    }

    #[test]
    fn a_released_address_waits_for_its_turn() {
        let mut ipam = Ipam::new(Cidr::parse("10.244.0.0/29").unwrap());
        let a = ipam.allocate().unwrap();
        let b = ipam.allocate().unwrap();
        assert_eq!((a, b), (Ipv4Addr::new(10, 244, 0, 2), Ipv4Addr::new(10, 244, 0, 3)));
        ipam.release(a);
        assert_eq!(ipam.allocate().unwrap(), Ipv4Addr::new(10, 244, 0, 4), "not the one just released");
        ipam.release(b);
        let rest: Vec<_> = (0..3).map(|_| ipam.allocate().unwrap()).collect();
        assert_eq!(rest, [Ipv4Addr::new(10, 244, 0, 5), Ipv4Addr::new(10, 244, 0, 6), Ipv4Addr::new(10, 244, 0, 2)]);
        assert_eq!(ipam.allocate().unwrap(), Ipv4Addr::new(10, 244, 0, 3), "wraps round to the free ones");
        assert!(ipam.allocate().is_err());
    }

    #[test]
    fn names_fit_kernel_limits() {
        let uid = "3bbd7c83-5408-4f6e-8404-06bcc4b2db2f";
        assert_eq!(veth_name(uid), "skv3bbd7c835408");
        assert!(veth_name(uid).len() <= 15);
        assert_eq!(netns_name("skiff0", uid), "skiff0-3bbd7c83-5408-4f6e-8404-06bcc4b2db2f");
    }
}
