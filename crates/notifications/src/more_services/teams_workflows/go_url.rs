//! The engine's check of a Workflows webhook URL, which reads the URL as Go's `net/url.Parse`
//! does. The WHATWG parser reqwest uses reads some URLs differently (`https:///x` has the
//! host `x` there and none in Go), so the parts the check looks at (the scheme, the host, the
//! reasons a URL is refused) follow Go's reading. Reasons never quote the URL: it carries the
//! webhook's signature.

/// The `WorkflowsURLPattern` of the engine, lowercased: a URL must contain one of these.
const WORKFLOWS_PATTERNS: [&str; 5] = [
    "api.powerautomate.com",
    "api.powerplatform.com",
    "flow.microsoft.com",
    "webhook.office.com/workflows",
    "/powerautomate/",
];

/// `validateWorkflowsWebhookURL`: its checks in its order, with its words.
pub(super) fn validate(url: &str) -> Result<(), String> {
    if url.is_empty() {
        return Err("webhook URL cannot be empty".into());
    }
    let parsed = parse(url).map_err(|reason| format!("invalid webhook URL format: {reason}"))?;
    let hostname = parsed.hostname();
    let localhost = hostname == "localhost" || hostname.starts_with("127.");
    if parsed.scheme != "https" && !localhost {
        return Err("webhook URL must use HTTPS scheme".into());
    }
    if parsed.scheme != "https" && parsed.scheme != "http" {
        return Err("webhook URL must use HTTP or HTTPS scheme".into());
    }
    if parsed.host.is_empty() {
        return Err("webhook URL must have a valid host".into());
    }
    if !matches_workflows_pattern(url) {
        return Err("webhook URL does not appear to be a valid Microsoft Teams Workflows URL (Power Automate). Expected patterns: api.powerautomate.com, api.powerplatform.com, flow.microsoft.com, or webhook.office.com/workflows".into());
    }
    Ok(())
}

/// The engine's pattern is matched case-insensitively with Unicode simple folding, under
/// which the long s folds to `s` (and the Kelvin sign to `k`, which lowercasing covers).
fn matches_workflows_pattern(url: &str) -> bool {
    let folded: String = url
        .chars()
        .flat_map(|c| {
            let c = if c == 'ſ' { 's' } else { c };
            c.to_lowercase()
        })
        .collect();
    WORKFLOWS_PATTERNS.iter().any(|p| folded.contains(p))
}

/// What the check reads of a URL parsed as Go parses it.
#[derive(Debug, PartialEq, Eq)]
struct GoUrl {
    /// Lowercased, as Go lowercases it.
    scheme: String,
    /// With its port, without user information.
    host: String,
}

impl GoUrl {
    /// The host without its port or IPv6 brackets (Go's `URL.Hostname`).
    fn hostname(&self) -> &str {
        let host = match self.host.rfind(':') {
            Some(i) if valid_optional_port(&self.host[i..]) => &self.host[..i],
            _ => self.host.as_str(),
        };
        host.strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host)
    }
}

fn parse(raw: &str) -> Result<GoUrl, String> {
    let (url, fragment) = raw.split_once('#').unwrap_or((raw, ""));
    if url.bytes().any(|b| b < b' ' || b == 0x7f) {
        return Err("net/url: invalid control character in URL".into());
    }
    let (scheme, rest) = scheme(url)?;
    let rest = match rest.strip_suffix('?') {
        Some(r) if !r.contains('?') => r,
        _ => rest.split_once('?').map_or(rest, |(r, _)| r),
    };
    let mut parsed = GoUrl {
        scheme: scheme.to_ascii_lowercase(),
        host: String::new(),
    };
    if !rest.starts_with('/') {
        if !parsed.scheme.is_empty() {
            // A rootless path is opaque: no host.
            return Ok(parsed);
        }
        let segment = rest.split('/').next().unwrap_or_default();
        if segment.contains(':') {
            return Err("first path segment in URL cannot contain colon".into());
        }
    }
    let mut path = rest;
    let has_authority =
        (!parsed.scheme.is_empty() || !rest.starts_with("///")) && rest.starts_with("//");
    if has_authority {
        let authority = &rest[2..];
        let (authority, p) = match authority.find('/') {
            Some(i) => authority.split_at(i),
            None => (authority, ""),
        };
        path = p;
        parsed.host = match authority.rfind('@') {
            Some(i) => {
                let host = parse_host(&authority[i + 1..])?;
                let user = &authority[..i];
                if !user
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-._:~!$&'()*+,;=%@".contains(c))
                {
                    return Err("net/url: invalid userinfo".into());
                }
                unescape(user, false)?;
                host
            }
            None => parse_host(authority)?,
        };
    }
    unescape(path, false)?;
    unescape(fragment, false)?;
    Ok(parsed)
}

/// Go's `getScheme`: a scheme is a letter then letters, digits, `+`, `-` or `.` up to a colon;
/// anything else before the first colon means there is none.
fn scheme(url: &str) -> Result<(&str, &str), String> {
    for (i, b) in url.bytes().enumerate() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' if i > 0 => {}
            b':' if i == 0 => return Err("missing protocol scheme".into()),
            b':' => return Ok((&url[..i], &url[i + 1..])),
            _ => return Ok(("", url)),
        }
    }
    Ok(("", url))
}

fn parse_host(host: &str) -> Result<String, String> {
    if let Some(open) = host.rfind('[') {
        if open > 0 {
            return Err("invalid IP-literal".into());
        }
        let Some(close) = host.rfind(']') else {
            return Err("missing ']' in host".into());
        };
        let port = &host[close + 1..];
        if !valid_optional_port(port) {
            return Err(format!("invalid port {port:?} after host"));
        }
        unescape(host, false)?;
        return Ok(host.to_owned());
    }
    if let Some(i) = host.rfind(':')
        && !valid_optional_port(&host[i..])
    {
        return Err(format!("invalid port {:?} after host", &host[i..]));
    }
    unescape(host, true)?;
    Ok(host.to_owned())
}

/// Bytes Go takes unescaped in a host name.
fn host_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-_.~!$&'()*+,;=:[]<>\"".contains(&b)
}

/// A `:` followed by digits only, or nothing.
fn valid_optional_port(port: &str) -> bool {
    port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))
}

/// Go's `unescape` checks: every `%` is followed by two hex digits; in a host only bytes
/// beyond ASCII (and `%25`) may be escaped, and only [`host_byte`]s are taken unescaped.
fn unescape(s: &str, host: bool) -> Result<(), String> {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let end = (i + 3).min(bytes.len());
            let escape = String::from_utf8_lossy(&bytes[i..end]);
            let well_formed = bytes.len() > i + 2
                && bytes[i + 1].is_ascii_hexdigit()
                && bytes[i + 2].is_ascii_hexdigit();
            if !well_formed || (host && bytes[i + 1] < b'8' && escape != "%25") {
                return Err(format!("invalid URL escape {escape:?}"));
            }
            i += 3;
        } else if host && b < 0x80 && !host_byte(b) {
            return Err(format!(
                "invalid character {:?} in host name",
                (b as char).to_string()
            ));
        } else {
            i += 1;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{parse, validate};

    #[test]
    fn the_engines_checks_in_its_words() {
        let ok = [
            "https://api.powerautomate.com/webhook/abc123",
            "https://API.PowerPlatform.com/webhook/abc123",
            "https://flow.microsoft.com/webhook/abc123",
            "https://x.webhook.office.com/workflows/1",
            "https://example.com/powerautomate/webhook",
            "http://localhost:8080/powerautomate/webhook",
            "http://127.0.0.2/powerautomate/webhook",
            "https://prod-1.westeurope.logic.azure.com/powerautomate/x?sig=a%2Fb",
            "https://u:p@api.powerautomate.com/",
            "https://api.powerautomate.com%c3%a9/",
            "https://api.powerautomate.com/?%zz",
            "http://localhost:/powerautomate/",
            "https://api.powerautomate.com?",
        ];
        for url in ok {
            assert_eq!(validate(url), Ok(()), "{url}");
        }
        let refused = [
            ("", "webhook URL cannot be empty"),
            (
                "://invalid",
                "invalid webhook URL format: missing protocol scheme",
            ),
            ("/webhook", "webhook URL must use HTTPS scheme"),
            (
                "http://api.powerautomate.com/webhook",
                "webhook URL must use HTTPS scheme",
            ),
            (
                "ftp://api.powerautomate.com/webhook",
                "webhook URL must use HTTPS scheme",
            ),
            (
                "ftp://localhost/powerautomate/",
                "webhook URL must use HTTP or HTTPS scheme",
            ),
            ("https:///webhook", "webhook URL must have a valid host"),
            (
                "https:api.powerautomate.com",
                "webhook URL must have a valid host",
            ),
            (
                "https://api.power automate.com/x",
                "invalid webhook URL format: invalid character \" \" in host name",
            ),
            (
                "https://api.powerautomate.com:x/",
                "invalid webhook URL format: invalid port \":x\" after host",
            ),
            (
                "https://u{@api.powerautomate.com/",
                "invalid webhook URL format: net/url: invalid userinfo",
            ),
            (
                "https://api.powerautomate.com%41/",
                "invalid webhook URL format: invalid URL escape \"%41\"",
            ),
            (
                "https://api.powerautomate.com/#%zz",
                "invalid webhook URL format: invalid URL escape \"%zz\"",
            ),
            (
                "https://x[y]/powerautomate/",
                "invalid webhook URL format: invalid IP-literal",
            ),
            (
                "https://[::1/powerautomate/",
                "invalid webhook URL format: missing ']' in host",
            ),
            (
                "//127.0.0.1/powerautomate/",
                "webhook URL must use HTTP or HTTPS scheme",
            ),
            (
                "http://Localhost/powerautomate/",
                "webhook URL must use HTTPS scheme",
            ),
            (
                "http://localhost:8080:90/powerautomate/",
                "webhook URL must use HTTPS scheme",
            ),
            (
                "http://[::1]:80/powerautomate/",
                "webhook URL must use HTTPS scheme",
            ),
            (
                "https://api.powerautomate.com/%zz",
                "invalid webhook URL format: invalid URL escape \"%zz\"",
            ),
            (
                "https://api.powerautomate.com/\n",
                "invalid webhook URL format: net/url: invalid control character in URL",
            ),
        ];
        for (url, words) in refused {
            assert_eq!(validate(url), Err(words.to_owned()), "{url:?}");
        }
        let e = validate("https://example.com/webhook").unwrap_err();
        assert!(
            e.starts_with(
                "webhook URL does not appear to be a valid Microsoft Teams Workflows URL"
            ),
            "{e}"
        );
        // Unicode simple folding, as Go's (?i).
        assert_eq!(validate("https://flow.microſoft.com/x"), Ok(()));
    }

    #[test]
    fn hosts_read_as_go_reads_them() {
        let host = |u: &str| parse(u).map(|p| (p.scheme.clone(), p.hostname().to_owned()));
        assert_eq!(
            host("HTTPS://u:p@h.example:443/x"),
            Ok(("https".into(), "h.example".into()))
        );
        assert_eq!(host("http://[::1]:80/x"), Ok(("http".into(), "::1".into())));
        assert_eq!(
            host("//127.0.0.1/x"),
            Ok((String::new(), "127.0.0.1".into()))
        );
        assert_eq!(host("///x"), Ok((String::new(), String::new())));
        assert_eq!(
            host("a:b/c").map(|(s, _)| s),
            Ok("a".into()),
            "a scheme, opaque"
        );
        assert_eq!(
            host("1a:b/c"),
            Err("first path segment in URL cannot contain colon".into())
        );
    }
}
