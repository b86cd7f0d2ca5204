//! CloudWatch: `GetMetricData` over the last `interval` (a Go duration, `5m` when unset).
//!
//! The call goes to CloudWatch's JSON 1.0 API, signed with SigV4 by the process's AWS
//! configuration (region, credentials and `AWS_ENDPOINT_URL` from the default chain): the AWS
//! SDK for Rust's CloudWatch client speaks only the CBOR protocol, and AWS accepts both.
//!
//! As in Argo: `EndTime` is now and `StartTime` `interval` before; the queries go as written
//! under AWS's field names, a `metricStat` always with its `metricName`, `stat` and `period`
//! (0 when unset or not a number: AWS then refuses the query, as it does Argo's) and its `unit`
//! only when set. The value reads as Go's `%+v` of each result's values, `[[0.25 1] [3]]`; the
//! condition's `result` is the list of results under Go's field names (`Id`, `Label`,
//! `Messages`, `StatusCode`, `Timestamps`, `Values`), so `all(result[0].Values, {# <= 0.01})`
//! works. CloudWatch's messages go to the measurement's metadata (`messages`). Failures read
//! as the Go SDK's (`operation error CloudWatch: GetMetricData, https response error
//! StatusCode: 400, RequestID: ..., api error ValidationError: ...`).

use std::time::{Duration, SystemTime};

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Map, Value as Json, json};
use sluice_api::analysis::{
    CloudWatchMetric, CloudWatchMetricDataQuery, CloudWatchMetricStat, MetricProvider, ProviderKind,
};
use sluice_api::duration::parse_go_duration_nanos;

use super::http::{read_body, request_error};
use super::outcome::Outcome;
use super::provider::{Env, Provider};
use super::{ProviderError, Providers};
use crate::redact::Redactor;
use response::{OPERATION, api_error, read};

mod response;

/// Argo sets none (the Go SDK waits as long as the connection lives); a bound keeps a stalled
/// endpoint from holding the measurement forever.
const TIMEOUT: Duration = Duration::from_secs(30);
const DEFAULT_INTERVAL: jiff::SignedDuration = jiff::SignedDuration::from_mins(5);
const TARGET: &str = "GraniteServiceVersion20100801.GetMetricData";
const CONTENT_TYPE: &str = "application/x-amz-json-1.0";

/// The CloudWatch provider (`provider.cloudWatch`).
pub(crate) struct CloudWatch;

/// A CloudWatch measurement, checked.
pub(crate) struct Query<'a> {
    interval: jiff::SignedDuration,
    queries: &'a [CloudWatchMetricDataQuery],
}

impl Provider for CloudWatch {
    const KIND: ProviderKind = ProviderKind::CloudWatch;
    type Config = CloudWatchMetric;
    type Query<'a> = Query<'a>;

    fn config(provider: &MetricProvider) -> Option<&CloudWatchMetric> {
        provider.cloud_watch.as_ref()
    }

    fn parse<'a>(_env: Env<'a>, cw: &'a CloudWatchMetric) -> Result<Query<'a>, ProviderError> {
        let interval = match cw.interval.as_deref().filter(|i| !i.is_empty()) {
            None => DEFAULT_INTERVAL,
            Some(text) => jiff::SignedDuration::from_nanos(
                parse_go_duration_nanos(text).map_err(|e| ProviderError(format!("time: {e}")))?,
            ),
        };
        Ok(Query {
            interval,
            queries: cw.metric_data_queries.as_deref().unwrap_or_default(),
        })
    }

    async fn measure<'a>(
        env: Env<'a>,
        query: Query<'a>,
        _redactor: &'a mut Redactor,
    ) -> Result<Outcome, ProviderError> {
        let end = jiff::Timestamp::now();
        // Go durations stay within ±292 years, so this only fails on a clock far off.
        let start = end.checked_sub(query.interval).map_err(|_| {
            ProviderError(format!(
                "{OPERATION}, StartTime is out of range: now minus the interval"
            ))
        })?;
        let body = request_body(query.queries, start, end);
        let answer = get_metric_data(env.providers, &body).await?;
        let reading = read(&answer)?;
        let mut outcome = Outcome::judged(env.metric, reading.value, &reading.result);
        if let Some(messages) = reading.messages {
            tracing::warn!(metric = ?env.metric.name, "CloudWatch returned the following messages: {messages}");
            outcome = outcome.with_metadata("messages", messages);
        }
        Ok(outcome)
    }
}

/// The `GetMetricData` request: the window and the queries under AWS's names. Times are
/// seconds since the epoch, to the millisecond, as the SDKs send them.
fn request_body(
    queries: &[CloudWatchMetricDataQuery],
    start: jiff::Timestamp,
    end: jiff::Timestamp,
) -> Json {
    let seconds = |t: jiff::Timestamp| t.as_millisecond() as f64 / 1000.0;
    json!({
        "StartTime": seconds(start),
        "EndTime": seconds(end),
        "MetricDataQueries": queries.iter().map(query_json).collect::<Vec<_>>(),
    })
}

/// One query, with the fields Argo's conversion gives AWS.
fn query_json(query: &CloudWatchMetricDataQuery) -> Json {
    let mut out = Map::new();
    out.insert("Id".into(), json!(query.id.as_deref().unwrap_or_default()));
    if let Some(expression) = &query.expression {
        out.insert("Expression".into(), json!(expression));
    }
    if let Some(label) = &query.label {
        out.insert("Label".into(), json!(label));
    }
    if let Some(stat) = &query.metric_stat {
        out.insert("MetricStat".into(), metric_stat_json(stat));
    }
    if let Some(period) = &query.period {
        out.insert("Period".into(), json!(int_value(period)));
    }
    if let Some(return_data) = query.return_data {
        out.insert("ReturnData".into(), json!(return_data));
    }
    Json::Object(out)
}

fn metric_stat_json(stat: &CloudWatchMetricStat) -> Json {
    let metric = stat.metric.clone().unwrap_or_default();
    let mut m = Map::new();
    if let Some(dimensions) = &metric.dimensions {
        let dimensions: Vec<Json> = dimensions
            .iter()
            .map(|d| {
                json!({
                    "Name": d.name.as_deref().unwrap_or_default(),
                    "Value": d.value.as_deref().unwrap_or_default(),
                })
            })
            .collect();
        m.insert("Dimensions".into(), Json::Array(dimensions));
    }
    m.insert(
        "MetricName".into(),
        json!(metric.metric_name.as_deref().unwrap_or_default()),
    );
    if let Some(namespace) = &metric.namespace {
        m.insert("Namespace".into(), json!(namespace));
    }
    let mut out = Map::new();
    out.insert("Metric".into(), Json::Object(m));
    out.insert(
        "Period".into(),
        json!(stat.period.as_ref().map_or(0, int_value)),
    );
    out.insert(
        "Stat".into(),
        json!(stat.stat.as_deref().unwrap_or_default()),
    );
    if let Some(unit) = stat.unit.as_deref().filter(|u| !u.is_empty()) {
        out.insert("Unit".into(), json!(unit));
    }
    Json::Object(out)
}

/// Kubernetes' `IntOrString.IntValue()` narrowed to 32 bits, as Argo converts a period: a
/// string holding no integer counts 0.
fn int_value(value: &IntOrString) -> i32 {
    match value {
        IntOrString::Int(i) => *i,
        // Go's int32() conversion keeps the low 32 bits.
        IntOrString::String(s) => s.parse::<i64>().map_or(0, |i| i as i32),
    }
}

/// Sends the request, signed; CloudWatch's answer, or the error it gave.
async fn get_metric_data(providers: &Providers, body: &Json) -> Result<Vec<u8>, ProviderError> {
    let config = providers.aws().await;
    let region = config.region().map(|r| r.to_string()).ok_or_else(|| {
        ProviderError(format!(
            "{OPERATION}, failed to resolve service endpoint, an AWS region is required, but was not found"
        ))
    })?;
    let url = format!("{}/", sluice_aws::endpoint(config, "monitoring", &region));
    let body = body.to_string();
    let headers = [("content-type", CONTENT_TYPE), ("x-amz-target", TARGET)];
    let unsigned = sluice_aws::Request {
        method: "POST",
        url: &url,
        headers: &headers,
        body: body.as_bytes(),
    };
    let signature = sluice_aws::sign_request(
        config,
        "monitoring",
        Some(&region),
        &unsigned,
        SystemTime::now(),
    )
    .await
    .map_err(|e| ProviderError(format!("{OPERATION}, failed to sign request: {e}")))?;
    let mut request = providers.http(false).post(&url).timeout(TIMEOUT);
    for (name, value) in headers {
        request = request.header(name, value);
    }
    for (name, value) in signature {
        request = request.header(name, value);
    }
    let response = request
        .body(body)
        .send()
        .await
        .map_err(|e| ProviderError(format!("{OPERATION}, {}", request_error(&e, TIMEOUT).0)))?;
    let status = response.status().as_u16();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let request_id = header("x-amzn-requestid").unwrap_or_default();
    let codes = [header("x-amzn-query-error"), header("x-amzn-errortype")];
    let answer = read_body(response)
        .await
        .map_err(|e| ProviderError(format!("{OPERATION}, {}", e.0)))?;
    if !(200..300).contains(&status) {
        return Err(api_error(status, &request_id, &codes, &answer));
    }
    Ok(answer)
}

#[cfg(test)]
mod tests;
