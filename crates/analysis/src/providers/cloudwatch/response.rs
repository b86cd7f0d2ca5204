//! CloudWatch's answer to `GetMetricData` as the Go SDK reads it, shown as Argo shows it, and
//! its error answers in the Go SDK's words.

use expr::{DateTimeValue, Value};
use serde::Deserialize;

use super::super::ProviderError;
use super::super::http::snippet;
use super::super::outcome::go_float;

/// How the Go SDK begins every error of this call.
pub(super) const OPERATION: &str = "operation error CloudWatch: GetMetricData";

/// What a measurement takes from the answer.
#[derive(Debug)]
pub(super) struct Reading {
    /// Go's `%+v` of each result's values: `[[0.25 1] [3]]`.
    pub(super) value: String,
    /// The results as Go structs, for the conditions.
    pub(super) result: Value,
    /// The answer's messages, when it has any.
    pub(super) messages: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Output {
    #[serde(default)]
    metric_data_results: Option<Vec<ResultData>>,
    #[serde(default)]
    messages: Option<Vec<MessageData>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ResultData {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    label: Option<String>,
    #[serde(default)]
    messages: Option<Vec<MessageData>>,
    #[serde(default)]
    status_code: Option<String>,
    #[serde(default)]
    timestamps: Option<Vec<Number>>,
    #[serde(default)]
    values: Option<Vec<Number>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct MessageData {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    value: Option<String>,
}

/// A double as AWS's JSON protocols write it: a number, or `"NaN"`, `"Infinity"`,
/// `"-Infinity"`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Number {
    Number(f64),
    Text(String),
}

impl Number {
    fn get(&self, field: &str) -> Result<f64, ProviderError> {
        match self {
            Number::Number(f) => Ok(*f),
            Number::Text(t) => match t.as_str() {
                "NaN" => Ok(f64::NAN),
                "Infinity" => Ok(f64::INFINITY),
                "-Infinity" => Ok(f64::NEG_INFINITY),
                _ => Err(ProviderError(format!(
                    "{OPERATION}, deserialization failed: {field} {t:?} is not a number"
                ))),
            },
        }
    }
}

/// Reads a `GetMetricData` answer.
pub(super) fn read(body: &[u8]) -> Result<Reading, ProviderError> {
    let output: Output = serde_json::from_slice(body).map_err(|e| {
        ProviderError(format!(
            "{OPERATION}, deserialization failed: {e}: {}",
            snippet(body)
        ))
    })?;
    let results = output.metric_data_results.unwrap_or_default();
    let mut shown = Vec::with_capacity(results.len());
    let mut values = Vec::with_capacity(results.len());
    for result in &results {
        let (text, value) = result_value(result)?;
        shown.push(text);
        values.push(value);
    }
    let messages = output
        .messages
        .filter(|m| !m.is_empty())
        .map(|m| show_messages(&m));
    Ok(Reading {
        value: format!("[{}]", shown.join(" ")),
        result: Value::Array(values),
        messages,
    })
}

/// One result: its values as Go prints them, and the struct the conditions see.
fn result_value(result: &ResultData) -> Result<(String, Value), ProviderError> {
    let values = result
        .values
        .iter()
        .flatten()
        .map(|n| n.get("Values"))
        .collect::<Result<Vec<_>, _>>()?;
    let timestamps = result
        .timestamps
        .iter()
        .flatten()
        .map(|n| n.get("Timestamps").and_then(time_value))
        .collect::<Result<Vec<_>, _>>()?;
    let shown: Vec<String> = values.iter().copied().map(go_float).collect();
    let text = |s: &Option<String>| s.clone().map_or(Value::Nil, Value::String);
    let messages = result
        .messages
        .iter()
        .flatten()
        .map(message_value)
        .collect();
    let value = Value::Map(
        [
            ("Id", text(&result.id)),
            ("Label", text(&result.label)),
            ("Messages", Value::Array(messages)),
            (
                "StatusCode",
                Value::String(result.status_code.clone().unwrap_or_default()),
            ),
            ("Timestamps", Value::Array(timestamps)),
            (
                "Values",
                Value::Array(values.into_iter().map(Value::Float).collect()),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect(),
    );
    Ok((format!("[{}]", shown.join(" ")), value))
}

fn message_value(message: &MessageData) -> Value {
    let text = |s: &Option<String>| s.clone().map_or(Value::Nil, Value::String);
    Value::Map(
        [
            ("Code", text(&message.code)),
            ("Value", text(&message.value)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect(),
    )
}

/// Seconds since the epoch as a time value, in UTC as the Go SDK gives it.
fn time_value(seconds: f64) -> Result<Value, ProviderError> {
    let out_of_range = || {
        ProviderError(format!(
            "{OPERATION}, deserialization failed: timestamp {seconds} is out of range"
        ))
    };
    if !seconds.is_finite() {
        return Err(out_of_range());
    }
    let whole = seconds.floor();
    let nanos = ((seconds - whole) * 1e9).round().min(999_999_999.0) as u32;
    // `as` saturates; the range check below refuses what saturated.
    let time = chrono::DateTime::from_timestamp(whole as i64, nanos).ok_or_else(out_of_range)?;
    Ok(Value::DateTime(DateTimeValue::fixed(time.fixed_offset())))
}

/// The messages as Argo writes them (Go's `%+v` of the list; Go shows the addresses of the
/// fields, which say nothing, so their contents are shown instead): `[{Code:c Value:v}]`.
fn show_messages(messages: &[MessageData]) -> String {
    let field = |s: &Option<String>| s.clone().unwrap_or_else(|| "<nil>".to_owned());
    let items: Vec<String> = messages
        .iter()
        .map(|m| format!("{{Code:{} Value:{}}}", field(&m.code), field(&m.value)))
        .collect();
    format!("[{}]", items.join(" "))
}

/// An error answer as the Go SDK words it. The code comes from `x-amzn-query-error` (the
/// query-protocol code CloudWatch keeps for compatibility, e.g. `ValidationError`), else the
/// body's `__type` or `x-amzn-errortype` (`...#ValidationException`), else `UnknownError`.
/// An XML error document (what some AWS front ends answer, whatever the protocol) gives its
/// `Code` and `Message`.
pub(super) fn api_error(
    status: u16,
    request_id: &str,
    codes: &[Option<String>],
    body: &[u8],
) -> ProviderError {
    let json: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let field = |name: &str| {
        json.as_ref()
            .and_then(|j| j.get(name))
            .and_then(|v| v.as_str())
            .map(str::to_owned)
    };
    let query_code = codes
        .first()
        .and_then(|c| c.as_deref())
        .and_then(|c| c.split(';').next())
        .map(str::to_owned);
    let text = String::from_utf8_lossy(body);
    let code = [
        query_code,
        field("__type"),
        field("code"),
        xml_tag(&text, "Code"),
    ]
    .into_iter()
    .chain(codes.iter().skip(1).cloned())
    .flatten()
    .map(|c| sanitize_code(&c))
    .find(|c| !c.is_empty())
    .unwrap_or_else(|| "UnknownError".to_owned());
    let message = field("message")
        .or_else(|| field("Message"))
        .or_else(|| xml_tag(&text, "Message"))
        .map(|m| m.trim().to_owned())
        .unwrap_or_else(|| snippet(body));
    let message = if message.is_empty() {
        reqwest::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("no message")
            .to_owned()
    } else {
        message
    };
    ProviderError(format!(
        "{OPERATION}, https response error StatusCode: {status}, RequestID: {request_id}, api error {code}: {message}"
    ))
}

/// `aws.protocols#ValidationException:http://...` → `ValidationException`, as the SDKs trim
/// error codes.
fn sanitize_code(code: &str) -> String {
    let code = code.split(':').next().unwrap_or_default();
    code.rsplit('#')
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// The text of the first `<name>...</name>` in `xml`, if any.
fn xml_tag(xml: &str, name: &str) -> Option<String> {
    let open = format!("<{name}>");
    let start = xml.find(&open)? + open.len();
    let end = xml[start..].find(&format!("</{name}>"))?;
    Some(xml[start..start + end].to_owned())
}
