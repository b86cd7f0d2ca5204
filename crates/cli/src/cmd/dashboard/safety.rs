//! Who may change what through the dashboard: decided once, from the flags, before anything
//! listens. A dashboard reachable from other machines acts with the user's identity, so it
//! must be asked for explicitly.

use std::net::IpAddr;

/// Whether the dashboard's API accepts changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    ReadWrite,
    ReadOnly,
}

/// The mode for listening on `address`: a loopback address may write unless `--read-only`;
/// any other address needs `--read-only` or `--allow-writes`, since everyone who reaches it
/// would act with the user's kubeconfig identity.
pub fn mode(address: IpAddr, read_only: bool, allow_writes: bool) -> anyhow::Result<Mode> {
    if read_only {
        return Ok(Mode::ReadOnly);
    }
    if address.is_loopback() || allow_writes {
        return Ok(Mode::ReadWrite);
    }
    anyhow::bail!(
        "--address {address} makes the dashboard reachable from other machines, where anyone \
         could act on Rollouts with your kubeconfig identity: add --read-only to serve it \
         without changes, or --allow-writes to accept that"
    )
}

/// Whether a request naming `host` (its `Host` header) may be served by a dashboard bound to
/// `bound`. On a loopback address only loopback names are: a web page elsewhere whose name
/// an attacker points at 127.0.0.1 (DNS rebinding) would otherwise talk to the dashboard as if
/// it were the dashboard's own page.
pub fn host_allowed(host: Option<&str>, bound: IpAddr) -> bool {
    if !bound.is_loopback() {
        return true;
    }
    let Some(host) = host else {
        return false;
    };
    // `name:port`, `[v6]:port`, or either without the port.
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn loopback_writes_unless_read_only() {
        assert_eq!(
            mode(ip("127.0.0.1"), false, false).unwrap(),
            Mode::ReadWrite
        );
        assert_eq!(mode(ip("::1"), false, false).unwrap(), Mode::ReadWrite);
        assert_eq!(mode(ip("127.0.0.1"), true, false).unwrap(), Mode::ReadOnly);
    }

    #[test]
    fn on_loopback_only_loopback_names_are_served() {
        let local = ip("127.0.0.1");
        for host in [
            "127.0.0.1:3100",
            "localhost:3100",
            "LOCALHOST",
            "[::1]:3100",
            "127.0.0.2",
        ] {
            assert!(host_allowed(Some(host), local), "{host}");
        }
        for host in [
            "evil.example:3100",
            "10.0.0.1:3100",
            "[::ffff:a00:1]:80",
            "",
        ] {
            assert!(!host_allowed(Some(host), local), "{host}");
        }
        assert!(!host_allowed(None, local));
        assert!(host_allowed(Some("dashboard.team:3100"), ip("0.0.0.0")));
    }

    #[test]
    fn other_addresses_need_a_choice() {
        let error = mode(ip("0.0.0.0"), false, false).unwrap_err().to_string();
        assert!(error.contains("--read-only"), "{error}");
        assert!(error.contains("--allow-writes"), "{error}");
        assert_eq!(mode(ip("0.0.0.0"), true, false).unwrap(), Mode::ReadOnly);
        assert_eq!(mode(ip("10.1.2.3"), false, true).unwrap(), Mode::ReadWrite);
    }
}
