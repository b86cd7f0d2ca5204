//! Lists in smaller pages than the client asks for ([`FaultProxy::limit_pages`]).
//!
//! [`FaultProxy::limit_pages`]: super::FaultProxy::limit_pages

use axum::http::Uri;

/// `uri` with its `limit` at most `most`. A request without a `limit` is a whole list or a
/// single object; it goes on unchanged (a GET of one object would refuse a `limit`).
pub(super) fn limited(uri: Uri, most: u32) -> Uri {
    let Some(query) = uri.query() else {
        return uri;
    };
    let mut found = false;
    let query: Vec<String> = query
        .split('&')
        .map(
            |kv| match kv.strip_prefix("limit=").map(str::parse::<u32>) {
                Some(Ok(asked)) => {
                    found = true;
                    format!("limit={}", asked.min(most))
                }
                _ => kv.to_owned(),
            },
        )
        .collect();
    if !found {
        return uri;
    }
    let path_and_query = format!("{}?{}", uri.path(), query.join("&"));
    let mut parts = uri.into_parts();
    match path_and_query.parse() {
        Ok(pq) => {
            parts.path_and_query = Some(pq);
            Uri::from_parts(parts).unwrap_or_else(|_| unreachable!("a path and query of a Uri"))
        }
        Err(_) => Uri::from_parts(parts).unwrap_or_else(|_| unreachable!("the Uri's own parts")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_larger_limit_is_lowered_and_the_rest_kept() {
        let uri: Uri =
            "/apis/argoproj.io/v1alpha1/rollouts?labelSelector=a%3Db&limit=500&continue=xyz"
                .parse()
                .unwrap();
        assert_eq!(
            limited(uri, 50).to_string(),
            "/apis/argoproj.io/v1alpha1/rollouts?labelSelector=a%3Db&limit=50&continue=xyz"
        );
    }

    #[test]
    fn a_smaller_limit_or_none_is_left_alone() {
        for uri in [
            "/api/v1/pods?limit=10",
            "/api/v1/pods",
            "/api/v1/pods?labelSelector=x",
        ] {
            assert_eq!(limited(uri.parse().unwrap(), 50).to_string(), uri);
        }
    }
}
