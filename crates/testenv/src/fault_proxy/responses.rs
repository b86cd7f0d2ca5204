//! The answers the proxy makes up itself instead of the API server's.

use axum::body::Body;
use axum::http::{Response, StatusCode, header};
use serde_json::json;

/// A Kubernetes `Status` error response.
pub(super) fn status_response(code: u16) -> Response<Body> {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let reason = match code {
        404 => "NotFound",
        409 => "Conflict",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        _ => "InternalError",
    };
    let body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": format!("injected fault: {reason}"),
        "reason": reason,
        "code": code,
    });
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    if code == 429 {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
    }
    response
}
