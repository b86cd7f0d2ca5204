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
    fn other_addresses_need_a_choice() {
        let error = mode(ip("0.0.0.0"), false, false).unwrap_err().to_string();
        assert!(error.contains("--read-only"), "{error}");
        assert!(error.contains("--allow-writes"), "{error}");
        assert_eq!(mode(ip("0.0.0.0"), true, false).unwrap(), Mode::ReadOnly);
        assert_eq!(mode(ip("10.1.2.3"), false, true).unwrap(), Mode::ReadWrite);
    }
}
