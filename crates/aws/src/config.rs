//! The SDK configuration shared by every AWS client of the process.

use aws_config::SdkConfig;
use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};
use tokio::sync::OnceCell;

static CONFIG: OnceCell<SdkConfig> = OnceCell::const_new();

/// The process's AWS configuration, loaded on first use from the default chain (the
/// environment is read once; credentials that expire are refreshed by the SDK).
pub async fn sdk_config() -> &'static SdkConfig {
    CONFIG.get_or_init(|| loader().load()).await
}

/// Makes `config` the process's AWS configuration (a test's, pointing at its own endpoint),
/// when none has been loaded yet; `false` when one already has.
pub fn set_sdk_config(config: SdkConfig) -> bool {
    CONFIG.set(config).is_ok()
}

/// The default chain with Sluice's HTTPS client, for a configuration of one's own (a test's
/// endpoint and credentials, say).
pub fn loader() -> aws_config::ConfigLoader {
    let http = aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https();
    aws_config::defaults(aws_config::BehaviorVersion::latest()).http_client(http)
}

/// An SDK error as one line with its causes (the SDK's own `Display` says only "service
/// error"), for measurement messages, events and logs.
pub fn error_message(err: &(dyn std::error::Error + 'static)) -> String {
    let mut message = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}
