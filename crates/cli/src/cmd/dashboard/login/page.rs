//! The login page: server-rendered, no script, so it works before any session exists.

/// Text safe inside HTML.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// Text safe as a query parameter's value: all but unreserved characters and `/` encoded.
fn percent(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The page offering the ways in this dashboard was started with.
pub fn render(token: bool, oidc: Option<&str>, next: &str, error: Option<&str>) -> String {
    let next_query = percent(next);
    let next = escape(next);
    let error = error
        .map(|e| {
            format!(
                r#"<p class="error" role="alert" data-testid="login-error">{}</p>"#,
                escape(e)
            )
        })
        .unwrap_or_default();
    let oidc = oidc
        .map(|issuer| {
            format!(
                r#"<section><h2>Single sign-on</h2>
<p><a class="button" data-testid="login-oidc" href="/login/oidc?next={next_query}">Log in with OpenID Connect</a></p>
<p class="muted">at {}</p></section>"#,
                escape(issuer)
            )
        })
        .unwrap_or_default();
    let token = if token {
        format!(
            r#"<section><h2>Kubernetes token</h2>
<form method="post" action="/login/token">
<input type="hidden" name="next" value="{next}">
<label for="token">A bearer token of yours (for a service account: <code>kubectl create token NAME</code>)</label>
<textarea id="token" name="token" rows="4" required autocomplete="off" spellcheck="false" data-testid="login-token"></textarea>
<button type="submit" data-testid="login-token-submit">Log in</button>
</form></section>"#
        )
    } else {
        String::new()
    };
    format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Log in · Sluice Rollouts</title><link rel="icon" href="data:,">
<style>
body{{font:15px/1.5 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}}
main{{max-width:32rem;margin:4rem auto;background:#fff;padding:2rem;border-radius:8px;box-shadow:0 1px 4px #0002}}
h1{{font-size:1.4rem;margin-top:0}} h2{{font-size:1.05rem}}
textarea{{width:100%;box-sizing:border-box;font:12px monospace}} label{{display:block;margin-bottom:.3rem}}
.button,button{{display:inline-block;background:#2456c9;color:#fff;border:0;border-radius:4px;padding:.5rem 1rem;text-decoration:none;font:inherit;cursor:pointer;margin-top:.5rem}}
.error{{background:#fde8e8;color:#8a1c1c;padding:.6rem;border-radius:4px}} .muted{{color:#667}}
</style></head>
<body><main><h1>Sluice Rollouts</h1>
<p>Log in: everything you see and do here is done as you, so the cluster's RBAC decides.</p>
{error}{oidc}{token}</main></body></html>"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_comes_from_the_request_is_escaped() {
        let page = render(true, Some("http://idp"), "/x\"><script>", Some("<b>no</b>"));
        assert!(!page.contains("<script>"));
        assert!(page.contains("&lt;b&gt;no&lt;/b&gt;"));
        assert!(page.contains("login-oidc") && page.contains("login-token"));
        assert!(!render(true, None, "/", None).contains("login-oidc"));
        assert!(render(false, Some("i"), "/a?b=c&d", None).contains("next=/a%3Fb%3Dc%26d"));
    }
}
