//! Errors of the dashboard's API, in grpc-gateway's shape (`{"error", "code", "message"}`,
//! `code` being the gRPC code) so that clients of Argo's dashboard read them.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::super::ServerRefusal;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    /// The gRPC code grpc-gateway maps to this HTTP status.
    fn grpc_code(&self) -> u8 {
        match self.status {
            StatusCode::BAD_REQUEST => 3,
            StatusCode::NOT_FOUND => 5,
            StatusCode::CONFLICT => 6,
            StatusCode::FORBIDDEN => 7,
            StatusCode::UNAUTHORIZED => 16,
            StatusCode::UNPROCESSABLE_ENTITY => 3,
            _ => 13,
        }
    }
}

/// A failed action: the API server's own refusal keeps its HTTP code (403 for RBAC, 404, 409,
/// 422); anything else is a 500. The message is the whole chain, as the CLI prints it.
impl From<anyhow::Error> for ApiError {
    fn from(error: anyhow::Error) -> Self {
        let status = error
            .chain()
            .find_map(|cause| cause.downcast_ref::<ServerRefusal>())
            .and_then(|refusal| StatusCode::from_u16(refusal.code).ok())
            .filter(|code| code.is_client_error())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let message = error
            .chain()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(": ");
        Self::new(status, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body =
            json!({"error": self.message, "code": self.grpc_code(), "message": self.message});
        (self.status, Json(body)).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_of_the_api_server_keeps_its_code() {
        let refusal = anyhow::Error::new(ServerRefusal {
            code: 403,
            message: "rollouts.argoproj.io \"demo\" is forbidden".into(),
        })
        .context("patching rollout \"demo\"");
        let error = ApiError::from(refusal);
        assert_eq!(error.status, StatusCode::FORBIDDEN);
        assert_eq!(error.grpc_code(), 7);
        assert!(
            error
                .message
                .starts_with("patching rollout \"demo\": rollouts"),
            "{}",
            error.message
        );
        let other = ApiError::from(anyhow::anyhow!("connection refused"));
        assert_eq!(other.status, StatusCode::INTERNAL_SERVER_ERROR);
    }
}
