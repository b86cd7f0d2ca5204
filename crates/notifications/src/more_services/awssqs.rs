//! AWS SQS (`service.awssqs`: `queue`, `account`, `region`, `endpointUrl`, `key`, `secret`):
//! the template's `message` sent to a queue, as the engine's SQS client sends it: `GetQueueUrl`
//! for the queue's name (the recipient, else `queue`; owned by `account` when set), then
//! `SendMessage` to that URL, both calls of SQS' JSON API signed with SigV4. The template's
//! `awssqs.messageGroupId` becomes the message's group (FIFO queues need one).
//!
//! Credentials are `key` and `secret` when both are set, else the process's default chain
//! (environment, web identity, profiles, container and instance credentials). The region is
//! `region`, else `AWS_DEFAULT_REGION`, else the default chain's; the endpoint `endpointUrl`,
//! else `AWS_ENDPOINT_URL_SQS` or `AWS_ENDPOINT_URL`, else SQS' public one for the region.
//!
//! As in the engine, every message waits 10 seconds in the queue before it can be received
//! (`DelaySeconds`), and the template's `awssqs.messageAttributes` are not sent. Unlike the
//! engine, a message to a FIFO queue (a name ending in `.fifo`) goes without that delay: SQS
//! refuses per-message delays on FIFO queues, so the engine's sends to them always fail.
//!
//! An error answer is a failure worded as the Go SDK words it (`operation error SQS: ...`),
//! which may pass; no queue name or no region will recur.

use std::fmt;
use std::time::SystemTime;

use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};
use sluice_aws::aws_credential_types::Credentials;
use sluice_aws::aws_credential_types::provider::SharedCredentialsProvider;

use super::{NotificationService, SendContext, SendError};

const CONTENT_TYPE: &str = "application/x-amz-json-1.0";
/// The engine's delay of every message, in seconds.
const DELAY_SECONDS: u32 = 10;

#[derive(Clone, Deserialize)]
pub struct AwsSqsOptions {
    #[serde(default)]
    queue: String,
    #[serde(default)]
    account: String,
    #[serde(default)]
    region: String,
    #[serde(default, rename = "endpointUrl")]
    endpoint_url: String,
    #[serde(default)]
    key: String,
    #[serde(default)]
    secret: String,
}

impl fmt::Debug for AwsSqsOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AwsSqsOptions")
            .field("queue", &self.queue)
            .field("account", &self.account)
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

pub fn parse(settings: Value) -> Result<AwsSqsOptions, String> {
    super::settings(settings)
}

/// The SQS errors the Go SDK models for the two calls: it words them `<code>: <message>`, any
/// other `api error <code>: <message>`.
fn modeled(operation: &str, code: &str) -> bool {
    const BOTH: [&str; 5] = [
        "InvalidAddress",
        "InvalidSecurity",
        "QueueDoesNotExist",
        "RequestThrottled",
        "UnsupportedOperation",
    ];
    const SEND: [&str; 8] = [
        "InvalidMessageContents",
        "KmsAccessDenied",
        "KmsDisabled",
        "KmsInvalidKeyUsage",
        "KmsInvalidState",
        "KmsNotFound",
        "KmsOptInRequired",
        "KmsThrottled",
    ];
    BOTH.iter().any(|c| c.eq_ignore_ascii_case(code))
        || (operation == "SendMessage" && SEND.iter().any(|c| c.eq_ignore_ascii_case(code)))
}

/// An error answer as the Go SDK words it. Its code is the body's `__type` (or
/// `x-amzn-errortype`), trimmed to the name; the query-protocol code SQS keeps for
/// compatibility (`x-amzn-query-error`, e.g. `AWS.SimpleQueueService.NonExistentQueue`) replaces
/// it in the words.
fn api_error(
    operation: &str,
    status: u16,
    request_id: &str,
    headers: (Option<&str>, Option<&str>),
    body: &[u8],
) -> String {
    let (error_type, query_error) = headers;
    let json: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let field = |name: &str| json.get(name).and_then(Value::as_str).map(str::to_owned);
    // An XML error document (what some front ends answer, whatever the protocol) gives its
    // `Code` and `Message`, where the Go SDK says only that it could not read JSON.
    let text = String::from_utf8_lossy(body);
    let code = error_type
        .map(str::to_owned)
        .or_else(|| field("__type"))
        .or_else(|| field("code"))
        .or_else(|| xml_tag(&text, "Code"))
        .map(|c| {
            let c = c.split(':').next().unwrap_or_default();
            c.rsplit('#').next().unwrap_or_default().trim().to_owned()
        })
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "UnknownError".to_owned());
    let message = field("message")
        .or_else(|| field("Message"))
        .or_else(|| xml_tag(&text, "Message"))
        .unwrap_or_else(|| "UnknownError".to_owned());
    let shown = query_error
        .and_then(|q| q.split_once(';'))
        .map(|(c, _)| c.to_owned())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| code.clone());
    let api = if modeled(operation, &code) {
        format!("{shown}: {message}")
    } else {
        format!("api error {shown}: {message}")
    };
    format!(
        "operation error SQS: {operation}, https response error StatusCode: {status}, RequestID: {request_id}, {api}"
    )
}

/// The text of the first `<name>...</name>` in `xml`, if any.
fn xml_tag(xml: &str, name: &str) -> Option<String> {
    let open = format!("<{name}>");
    let start = xml.find(&open)? + open.len();
    let end = xml[start..].find(&format!("</{name}>"))?;
    Some(xml[start..start + end].to_owned())
}

/// Where and as whom the calls go.
struct Target {
    config: sluice_aws::SdkConfig,
    region: String,
    url: String,
}

impl AwsSqsOptions {
    async fn target(&self) -> Result<Target, SendError> {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        // The process's configuration is loaded only when something is left to it.
        let config = if !self.key.is_empty() && !self.secret.is_empty() {
            let credentials = Credentials::new(&self.key, &self.secret, None, None, "awssqs");
            sluice_aws::SdkConfig::builder()
                .credentials_provider(SharedCredentialsProvider::new(credentials))
                .build()
        } else {
            sluice_aws::sdk_config().await.clone()
        };
        let region = match Some(self.region.clone())
            .filter(|r| !r.is_empty())
            .or_else(|| env("AWS_DEFAULT_REGION"))
        {
            Some(r) => r,
            None => match sluice_aws::sdk_config().await.region() {
                Some(r) => r.to_string(),
                None => {
                    return Err(SendError::permanent(
                        "operation error SQS: GetQueueUrl, failed to resolve service endpoint, \
                         endpoint rule error, Invalid Configuration: Missing Region",
                    ));
                }
            },
        };
        let url = Some(self.endpoint_url.clone())
            .filter(|u| !u.is_empty())
            .or_else(|| env("AWS_ENDPOINT_URL_SQS"))
            .or_else(|| env("AWS_ENDPOINT_URL"))
            .unwrap_or_else(|| sluice_aws::endpoint(&config, "sqs", &region));
        Ok(Target {
            config,
            region,
            url: format!("{}/", url.trim_end_matches('/')),
        })
    }

    /// One call of SQS' JSON API: its answer, or the error as the Go SDK words it.
    async fn call(
        &self,
        ctx: &SendContext<'_>,
        target: &Target,
        operation: &str,
        body: &Value,
    ) -> Result<Value, SendError> {
        let body = body.to_string();
        let amz_target = format!("AmazonSQS.{operation}");
        let headers = [
            ("content-type", CONTENT_TYPE),
            ("x-amz-target", amz_target.as_str()),
            ("x-amzn-query-mode", "true"),
        ];
        let unsigned = sluice_aws::Request {
            method: "POST",
            url: &target.url,
            headers: &headers,
            body: body.as_bytes(),
        };
        let signature = sluice_aws::sign_request(
            &target.config,
            "sqs",
            Some(&target.region),
            &unsigned,
            SystemTime::now(),
        )
        .await
        .map_err(|e| {
            SendError::transient(format!(
                "operation error SQS: {operation}, failed to sign request: {e}"
            ))
        })?;
        let mut request = ctx.http.client(false).post(&target.url);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        for (name, value) in signature {
            request = request.header(name, value);
        }
        let response = request.body(body).send().await.map_err(|e| {
            SendError::transient(format!(
                "operation error SQS: {operation}, https response error StatusCode: 0, \
                 RequestID: , request send failed: {}",
                super::kind(&e)
            ))
        })?;
        let status = response.status().as_u16();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let request_id = header("x-amzn-requestid").unwrap_or_default();
        let (error_type, query_error) = (header("x-amzn-errortype"), header("x-amzn-query-error"));
        let answer = response.bytes().await.map_err(|e| {
            SendError::transient(format!(
                "operation error SQS: {operation}, https response error StatusCode: {status}, \
                 RequestID: {request_id}, reading the answer: {}",
                super::kind(&e)
            ))
        })?;
        if !(200..300).contains(&status) {
            return Err(SendError::transient(api_error(
                operation,
                status,
                &request_id,
                (error_type.as_deref(), query_error.as_deref()),
                &answer,
            )));
        }
        serde_json::from_slice(&answer).map_err(|_| {
            SendError::transient(format!(
                "operation error SQS: {operation}, https response error StatusCode: {status}, \
                 RequestID: {request_id}, deserialization failed"
            ))
        })
    }

    async fn send_message(&self, ctx: &SendContext<'_>) -> Result<(), SendError> {
        let queue = if ctx.recipient.is_empty() {
            self.queue.as_str()
        } else {
            ctx.recipient
        };
        if queue.is_empty() {
            return Err(SendError::permanent(
                "no queue: set `queue` or subscribe with the queue's name",
            ));
        }
        let target = self.target().await?;
        let mut input = json!({"QueueName": queue});
        if !self.account.is_empty() {
            input["QueueOwnerAWSAccountId"] = json!(self.account);
        }
        let answer = self.call(ctx, &target, "GetQueueUrl", &input).await?;
        let queue_url = answer
            .get("QueueUrl")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let message = ctx
            .content
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let mut input = json!({"MessageBody": message, "QueueUrl": queue_url});
        if !queue.ends_with(".fifo") {
            input["DelaySeconds"] = json!(DELAY_SECONDS);
        }
        let group = ctx
            .content
            .pointer("/awssqs/messageGroupId")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !group.is_empty() {
            input["MessageGroupId"] = json!(group);
        }
        self.call(ctx, &target, "SendMessage", &input).await?;
        Ok(())
    }
}

impl NotificationService for AwsSqsOptions {
    fn send<'a>(&'a self, ctx: SendContext<'a>) -> BoxFuture<'a, Result<(), SendError>> {
        Box::pin(async move {
            self.send_message(&ctx).await.map_err(|e| SendError {
                message: format!("awssqs '{}': {}", ctx.service, e.message),
                permanent: e.permanent,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::api_error;

    #[test]
    fn error_answers_are_worded_as_the_go_sdk_words_them() {
        let body = br#"{"__type": "com.amazonaws.sqs#QueueDoesNotExist",
            "message": "The specified queue does not exist."}"#;
        let query = Some("AWS.SimpleQueueService.NonExistentQueue;Sender");
        assert_eq!(
            api_error("GetQueueUrl", 400, "r-1", (None, query), body),
            "operation error SQS: GetQueueUrl, https response error StatusCode: 400, \
             RequestID: r-1, AWS.SimpleQueueService.NonExistentQueue: The specified queue does \
             not exist."
        );
        let body = br#"{"__type": "com.amazon.coral.service#InvalidClientTokenId",
            "Message": "The security token included in the request is invalid."}"#;
        assert_eq!(
            api_error("SendMessage", 403, "r-2", (None, None), body),
            "operation error SQS: SendMessage, https response error StatusCode: 403, \
             RequestID: r-2, api error InvalidClientTokenId: The security token included in \
             the request is invalid."
        );
        let body = br#"<?xml version="1.0"?><ErrorResponse><Errors><Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated does not match</Message></Error></Errors></ErrorResponse>"#;
        assert_eq!(
            api_error("GetQueueUrl", 403, "r-3", (None, None), body),
            "operation error SQS: GetQueueUrl, https response error StatusCode: 403, \
             RequestID: r-3, api error SignatureDoesNotMatch: The request signature we \
             calculated does not match"
        );
        assert_eq!(
            api_error("SendMessage", 503, "", (None, None), b""),
            "operation error SQS: SendMessage, https response error StatusCode: 503, \
             RequestID: , api error UnknownError: UnknownError"
        );
    }
}
