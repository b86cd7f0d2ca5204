//! The web page, built from crates/cli/dashboard-ui (`make dashboard-ui`) and compiled into
//! the binary: nothing is read from disk or fetched from elsewhere at run time.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

const INDEX_HTML: &str = include_str!("../../../dashboard-ui/dist/index.html");
const APP_JS: &str = include_str!("../../../dashboard-ui/dist/app.js");
const APP_CSS: &str = include_str!("../../../dashboard-ui/dist/app.css");

/// Everything the page loads comes from this server; the policy makes the browser refuse
/// anything else, so a mistake in the page cannot load code from a CDN.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'";

/// The file at `path`; any other path is the page itself, which routes in the browser
/// (`/rollouts/NS`, `/rollout/NS/NAME`).
pub fn file(path: &str) -> Response {
    let (content_type, body) = match path {
        "/assets/app.js" => ("text/javascript; charset=utf-8", APP_JS),
        "/assets/app.css" => ("text/css; charset=utf-8", APP_CSS),
        _ => ("text/html; charset=utf-8", INDEX_HTML),
    };
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FNV-1a (64 bit) over the UI's sources, as build.mjs computes it into dist/SOURCES.
    fn sources_hash(root: &std::path::Path) -> u64 {
        let mut paths = vec!["build.mjs".to_owned(), "package-lock.json".to_owned()];
        for entry in std::fs::read_dir(root.join("src")).unwrap() {
            paths.push(format!(
                "src/{}",
                entry.unwrap().file_name().to_string_lossy()
            ));
        }
        paths.sort();
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let mut feed = |bytes: &[u8]| {
            for byte in bytes {
                hash ^= u64::from(*byte);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
        };
        for path in &paths {
            feed(path.as_bytes());
            feed(&[0]);
            feed(&std::fs::read(root.join(path)).unwrap());
            feed(&[0]);
        }
        hash
    }

    /// The committed page was built from the committed sources: a change to the UI without
    /// `make dashboard-ui` fails here rather than shipping the old page.
    #[test]
    fn dist_is_built_from_the_sources() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("dashboard-ui");
        let recorded = std::fs::read_to_string(root.join("dist/SOURCES")).unwrap();
        assert_eq!(
            recorded.trim(),
            format!("{:016x}", sources_hash(&root)),
            "crates/cli/dashboard-ui/dist is stale: run `make dashboard-ui` and commit dist/"
        );
    }

    /// The page must stay small: it is sent to every tab.
    #[test]
    fn assets_stay_within_budget() {
        let total = INDEX_HTML.len() + APP_JS.len() + APP_CSS.len();
        assert!(
            total < 200 * 1024,
            "the dashboard's assets are {total} bytes"
        );
        assert!(INDEX_HTML.contains("/assets/app.js"));
        // Nothing the page loads names another host.
        assert!(!INDEX_HTML.contains("://"), "{INDEX_HTML}");
        assert!(!APP_CSS.contains("://"), "{APP_CSS}");
    }
}
