//! AWS, configured once for the process as Argo configures it: the SDK's default chain
//! (`AWS_REGION`, `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`, web identity, profiles,
//! container and instance credentials), `AWS_ENDPOINT_URL` and its per-service variants
//! honoured, and HTTPS through rustls with ring (the provider the rest of Sluice uses).
//!
//! What a crate calling AWS needs is re-exported here, so that it depends on this one alone:
//! the ELBv2 client (the ALB target-group checks) and SigV4 signing for requests Sluice sends
//! itself (CloudWatch's JSON API, which the SDK's CloudWatch client no longer speaks;
//! Prometheus on Amazon Managed Prometheus), with the chain's credentials, a named profile's
//! or an assumed role's.

mod config;
mod credentials;
mod sign;

pub use aws_config::{ConfigLoader, Region, SdkConfig};
pub use aws_credential_types;
pub use aws_sdk_elasticloadbalancingv2 as elbv2;
pub use config::{error_message, loader, sdk_config, set_sdk_config};
pub use credentials::{assume_role, profile_credentials, with_credentials};
pub use sign::{Request, endpoint, sign_request};
