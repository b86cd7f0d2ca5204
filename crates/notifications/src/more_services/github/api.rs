//! The pieces of GitHub's REST API the service calls, as the engine's client (go-github) calls
//! them: where the API lives, how a repository URL names its repository, how a ref goes into a
//! path, and how a failed answer reads.

use serde_json::Value;

/// GitHub's API when no `enterpriseBaseURL` is set.
pub(super) const PUBLIC_API: &str = "https://api.github.com";

/// Where API requests go and where installation tokens come from, for `enterprise_base_url`.
///
/// As in the engine, only the API's address gains `api/v3/` when the URL lacks it (go-github's
/// enterprise URLs); tokens are fetched from the URL as written. That is why the engine's docs
/// ask for `/api/v3` in `enterpriseBaseURL`.
pub(super) fn bases(enterprise_base_url: &str) -> Result<(String, String), String> {
    if enterprise_base_url.is_empty() {
        return Ok((format!("{PUBLIC_API}/"), PUBLIC_API.to_owned()));
    }
    let mut url = reqwest::Url::parse(enterprise_base_url)
        .map_err(|e| format!("enterpriseBaseURL is not a URL: {e}"))?;
    let host = url.host_str().unwrap_or_default().to_owned();
    let mut path = url.path().to_owned();
    if !path.ends_with('/') {
        path.push('/');
    }
    if !path.ends_with("/api/v3/") && !host.starts_with("api.") && !host.contains(".api.") {
        path.push_str("api/v3/");
    }
    url.set_path(&path);
    Ok((
        url.to_string(),
        enterprise_base_url.trim_end_matches('/').to_owned(),
    ))
}

/// `owner/repo` of a repository URL as the engine reads it (git-urls, then the first two parts
/// of the path without `.git`): an `http(s)`, `ssh`, `git`, `git+ssh`, `ftp(s)`, `rsync` or
/// `file` URL, an scp-like `git@host:owner/repo`, or else a local path. A path of one part is
/// returned whole.
pub(super) fn full_name(repo_url: &str) -> String {
    let path = transport_path(repo_url)
        .or_else(|| scp_path(repo_url))
        .unwrap_or_else(|| repo_url.to_owned());
    let path = path.strip_suffix(".git").unwrap_or(&path);
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    if parts.len() >= 2 {
        parts[..2].join("/")
    } else {
        path.to_owned()
    }
}

fn transport_path(raw: &str) -> Option<String> {
    const TRANSPORTS: [&str; 9] = [
        "ssh", "git", "git+ssh", "http", "https", "ftp", "ftps", "rsync", "file",
    ];
    let (scheme, _) = raw.split_once(':')?;
    if !TRANSPORTS.contains(&scheme.to_ascii_lowercase().as_str()) {
        return None;
    }
    let url = reqwest::Url::parse(raw).ok()?;
    Some(percent_decode(url.path()))
}

/// git-urls' scp syntax: `[user@]host:path` and anything after the path's characters.
fn scp_path(raw: &str) -> Option<String> {
    if raw.len() > 2048 {
        return None;
    }
    let is_user = |c: char| c.is_ascii_alphanumeric() || "-._~".contains(c);
    let is_host = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
    let is_path = |c: char| c.is_ascii_alphanumeric() || "./_-".contains(c);
    let rest = match raw.split_once('@') {
        Some((user, rest)) if !user.is_empty() && user.chars().all(is_user) => rest,
        _ => raw,
    };
    let (host, tail) = rest.split_once(':')?;
    if host.is_empty() || !host.chars().all(is_host) {
        return None;
    }
    let end = tail.find(|c: char| !is_path(c)).unwrap_or(tail.len());
    let path = &tail[..end];
    (!path.is_empty()).then(|| path.to_owned())
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A ref in a path: each `/`-separated part escaped as Go's `url.PathEscape` does.
pub(super) fn escape_ref(reference: &str) -> String {
    reference
        .split('/')
        .map(|part| {
            part.bytes()
                .map(|b| {
                    if b.is_ascii_alphanumeric() || b"-_.~$&+,:;=@".contains(&b) {
                        (b as char).to_string()
                    } else {
                        format!("%{b:02X}")
                    }
                })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// The engine's truncation: over `n` characters, the first `n - 3` and `...`.
pub(super) fn trunc(message: &str, n: usize) -> String {
    if message.chars().count() > n {
        let mut out: String = message.chars().take(n - 3).collect();
        out.push_str("...");
        out
    } else {
        message.to_owned()
    }
}

/// A failed answer as go-github words it (`<method> <url>: <status> <message> <errors>`), with
/// the path in place of the URL.
pub(super) fn error_text(method: &str, path: &str, status: u16, answer: &str) -> String {
    let answer: Value = serde_json::from_str(answer).unwrap_or(Value::Null);
    let message = answer
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let errors: Vec<String> = answer
        .get("errors")
        .and_then(Value::as_array)
        .map(|errors| {
            errors
                .iter()
                .map(|e| {
                    let field = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or_default();
                    let message = e.as_str().unwrap_or_else(|| field("message"));
                    format!(
                        "{{Resource:{} Field:{} Code:{} Message:{message}}}",
                        field("resource"),
                        field("field"),
                        field("code")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    format!("{method} {path}: {status} {message} [{}]", errors.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_urls_name_their_repository_as_the_engine_reads_them() {
        for (url, name) in [
            (
                "https://github.com/argoproj/argo-rollouts",
                "argoproj/argo-rollouts",
            ),
            (
                "https://github.com/argoproj/argo-rollouts.git",
                "argoproj/argo-rollouts",
            ),
            (
                "https://github.com/argoproj/argo-rollouts/tree/main",
                "argoproj/argo-rollouts",
            ),
            (
                "git@github.com:argoproj/argo-rollouts.git",
                "argoproj/argo-rollouts",
            ),
            (
                "ssh://git@github.com/argoproj/argo-rollouts",
                "argoproj/argo-rollouts",
            ),
            (
                "github.com:argoproj/argo-rollouts",
                "argoproj/argo-rollouts",
            ),
            ("argoproj/argo-rollouts", "argoproj/argo-rollouts"),
            ("<no value>", "<no value>"),
            ("https://github.com/solo", "/solo"),
        ] {
            assert_eq!(full_name(url), name, "{url}");
        }
    }

    #[test]
    fn enterprise_urls_gain_api_v3_for_the_api_but_not_for_tokens() {
        assert_eq!(
            bases("").unwrap(),
            (
                "https://api.github.com/".into(),
                "https://api.github.com".into()
            )
        );
        assert_eq!(
            bases("https://git.example.com/api/v3").unwrap(),
            (
                "https://git.example.com/api/v3/".into(),
                "https://git.example.com/api/v3".into()
            )
        );
        assert_eq!(
            bases("https://git.example.com").unwrap(),
            (
                "https://git.example.com/api/v3/".into(),
                "https://git.example.com".into()
            )
        );
        assert_eq!(
            bases("https://api.example.com/").unwrap().0,
            "https://api.example.com/"
        );
        assert!(bases("not a url").is_err());
    }

    #[test]
    fn refs_truncation_and_errors_read_as_the_engines() {
        assert_eq!(escape_ref("feature/a b"), "feature/a%20b");
        assert_eq!(escape_ref("<no value>"), "%3Cno%20value%3E");
        assert_eq!(trunc("abcdef", 5), "ab...");
        assert_eq!(trunc("abcde", 5), "abcde");
        assert_eq!(
            error_text(
                "POST",
                "/api/v3/repos/o/r/statuses/x",
                422,
                r#"{"message":"Validation Failed","errors":[{"resource":"Status","code":"custom","field":"state","message":"bad"}]}"#
            ),
            "POST /api/v3/repos/o/r/statuses/x: 422 Validation Failed [{Resource:Status Field:state Code:custom Message:bad}]"
        );
        assert_eq!(error_text("GET", "/p", 500, "oops"), "GET /p: 500  []");
    }
}
