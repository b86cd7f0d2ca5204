//! The request and the answer on their own, then measurements against moto's server (AWS's
//! CloudWatch API as moto emulates it, checking every request's SigV4 signature).

use std::time::SystemTime;

use serde_json::json;
use sluice_api::analysis::Metric;
use sluice_api::common::AnalysisPhase;
use sluice_aws::aws_credential_types::Credentials;
use sluice_testenv::moto::{Moto, REGION};

use super::super::test_support::{ctx, install_crypto, metric_with, providers};
use super::*;

fn queries(value: serde_json::Value) -> Vec<CloudWatchMetricDataQuery> {
    serde_json::from_value(value).unwrap()
}

#[test]
fn the_request_names_fields_as_aws_does() {
    let queries = queries(json!([
        {"id": "rate", "expression": "errors / requests", "label": "Error rate", "period": 300,
         "returnData": true},
        {"id": "errors", "returnData": false, "metricStat": {
            "metric": {"namespace": "AWS/ApplicationELB", "metricName": "HTTPCode_ELB_5XX_Count",
                "dimensions": [{"name": "LoadBalancer", "value": "app/web/1"}]},
            "period": "60", "stat": "Sum", "unit": "Count"}},
        {"id": "bare", "metricStat": {"metric": {"metricName": "m"}, "period": "1m", "unit": ""},
         "period": "x"},
        {"metricStat": {}}
    ]));
    let start: jiff::Timestamp = "2026-11-27T10:00:00Z".parse().unwrap();
    let end: jiff::Timestamp = "2026-11-27T10:05:00.250Z".parse().unwrap();
    assert_eq!(
        request_body(&queries, start, end),
        json!({
            "StartTime": 1795773600.0,
            "EndTime": 1795773900.25,
            "MetricDataQueries": [
                {"Id": "rate", "Expression": "errors / requests", "Label": "Error rate",
                 "Period": 300, "ReturnData": true},
                {"Id": "errors", "ReturnData": false, "MetricStat": {
                    "Metric": {"Namespace": "AWS/ApplicationELB",
                        "MetricName": "HTTPCode_ELB_5XX_Count",
                        "Dimensions": [{"Name": "LoadBalancer", "Value": "app/web/1"}]},
                    "Period": 60, "Stat": "Sum", "Unit": "Count"}},
                // A period that is no integer is 0, an empty unit is left out, as in Argo.
                {"Id": "bare", "Period": 0,
                 "MetricStat": {"Metric": {"MetricName": "m"}, "Period": 0, "Stat": ""}},
                {"Id": "", "MetricStat": {"Metric": {"MetricName": ""}, "Period": 0, "Stat": ""}}
            ]
        })
    );
    assert_eq!(
        request_body(&[], start, end)["MetricDataQueries"],
        json!([])
    );
}

#[test]
fn answers_read_as_argo_shows_them() {
    let answer = json!({"MetricDataResults": [
        {"Id": "a", "Label": "A", "StatusCode": "Complete",
         "Timestamps": [1795773900, 1795773840.5], "Values": [0.25, 1]},
        {"Id": "b", "StatusCode": "PartialData", "Timestamps": [], "Values": [1e21, 0.000001, 100]},
        {"Id": "c", "Values": ["NaN", "Infinity", "-Infinity"],
         "Messages": [{"Code": "ArithmeticError", "Value": "divide by zero"}]},
        {"Id": "d"}
    ], "Messages": [{"Code": "MaxQueryTimeRangeExceed", "Value": "too long"}, {"Code": "X"}]});
    let reading = read(answer.to_string().as_bytes()).unwrap();
    assert_eq!(
        reading.value,
        "[[0.25 1] [1e+21 1e-06 100] [NaN +Inf -Inf] []]"
    );
    assert_eq!(
        reading.messages.as_deref(),
        Some("[{Code:MaxQueryTimeRangeExceed Value:too long} {Code:X Value:<nil>}]")
    );
    let judge = |condition: &str| {
        crate::expression::eval_condition(condition, &reading.result)
            .unwrap_or_else(|e| panic!("{condition}: {e}"))
    };
    assert!(judge("all(result[0].Values, {# <= 1})"));
    assert!(judge("result[0].Id == 'a' && result[0].Label == 'A'"));
    assert!(judge(
        "result[1].StatusCode == 'PartialData' && result[1].Label == nil"
    ));
    assert!(judge("result[0].Timestamps[0] > result[0].Timestamps[1]"));
    assert!(judge("result[0].Timestamps[0] < now()"));
    assert!(judge(
        "isNaN(result[2].Values[0]) && isInf(result[2].Values[1])"
    ));
    assert!(judge("result[2].Messages[0].Code == 'ArithmeticError'"));
    assert!(judge(
        "len(result[3].Values) == 0 && result[3].StatusCode == ''"
    ));

    let empty = read(br#"{"MetricDataResults": []}"#).unwrap();
    assert_eq!((empty.value.as_str(), empty.messages), ("[]", None));
    assert_eq!(read(b"{}").unwrap().value, "[]");
    for bad in [
        &b"<xml/>"[..],
        br#"{"MetricDataResults": [{"Values": ["many"]}]}"#,
        br#"{"MetricDataResults": [{"Timestamps": [1e300]}]}"#,
        br#"{"MetricDataResults": 3}"#,
    ] {
        let err = read(bad).unwrap_err().0;
        assert!(
            err.starts_with("operation error CloudWatch: GetMetricData, deserialization failed"),
            "{err}"
        );
    }
}

#[test]
fn error_answers_read_as_the_go_sdk_words_them() {
    let body = br#"{"__type": "GraniteServiceVersion20100801#ValidationException",
        "message": "The parameter MetricDataQueries.member.1.MetricStat is required.\n"}"#;
    let codes = [Some("ValidationError;Sender".to_owned()), None];
    assert_eq!(
        api_error(400, "req-1", &codes, body).0,
        "operation error CloudWatch: GetMetricData, https response error StatusCode: 400, \
         RequestID: req-1, api error ValidationError: The parameter \
         MetricDataQueries.member.1.MetricStat is required."
    );
    let body = br#"{"__type": "com.amazonaws.monitoring#InvalidParameterValue:http://x", "Message": "bad"}"#;
    assert_eq!(
        api_error(400, "", &[None, None], body).0,
        "operation error CloudWatch: GetMetricData, https response error StatusCode: 400, \
         RequestID: , api error InvalidParameterValue: bad"
    );
    let body = br#"<?xml version="1.0"?><ErrorResponse><Errors><Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated does not match</Message></Error></Errors></ErrorResponse>"#;
    assert_eq!(
        api_error(403, "r", &[None, None], body).0,
        "operation error CloudWatch: GetMetricData, https response error StatusCode: 403, \
         RequestID: r, api error SignatureDoesNotMatch: The request signature we calculated does \
         not match"
    );
    assert_eq!(
        api_error(503, "r", &[None, None], b"").0,
        "operation error CloudWatch: GetMetricData, https response error StatusCode: 503, \
         RequestID: r, api error UnknownError: Service Unavailable"
    );
}

#[test]
fn periods_convert_as_go_does() {
    assert_eq!(int_value(&IntOrString::Int(60)), 60);
    assert_eq!(int_value(&IntOrString::String("300".into())), 300);
    assert_eq!(int_value(&IntOrString::String("+5".into())), 5);
    assert_eq!(int_value(&IntOrString::String("5m".into())), 0);
    assert_eq!(int_value(&IntOrString::String("4294967356".into())), 60);
}

/// An AWS configuration reaching `endpoint` with `key`.
async fn aws(endpoint: &str, key: (&str, &str)) -> sluice_aws::SdkConfig {
    sluice_aws::loader()
        .endpoint_url(endpoint)
        .region(sluice_aws::Region::new(REGION))
        .credentials_provider(Credentials::new(key.0, key.1, None, None, "test"))
        .load()
        .await
}

/// Puts `(metric, value, seconds ago)` into namespace `Sluice/Test` with a signed call.
async fn put(config: &sluice_aws::SdkConfig, data: &[(&str, f64, i64)]) {
    let now = jiff::Timestamp::now().as_second();
    let data: Vec<_> = data
        .iter()
        .map(|(name, value, ago)| json!({"MetricName": name, "Value": value, "Timestamp": now - ago}))
        .collect();
    let body = json!({"Namespace": "Sluice/Test", "MetricData": data}).to_string();
    let url = format!("{}/", sluice_aws::endpoint(config, "monitoring", REGION));
    let headers = [
        ("content-type", CONTENT_TYPE),
        (
            "x-amz-target",
            "GraniteServiceVersion20100801.PutMetricData",
        ),
    ];
    let request = sluice_aws::Request {
        method: "POST",
        url: &url,
        headers: &headers,
        body: body.as_bytes(),
    };
    let signed = sluice_aws::sign_request(config, "monitoring", None, &request, SystemTime::now())
        .await
        .unwrap();
    let mut req = reqwest::Client::new().post(&url).body(body);
    for (k, v) in headers.iter().copied() {
        req = req.header(k, v);
    }
    for (k, v) in signed {
        req = req.header(k, v);
    }
    let answer = req.send().await.unwrap();
    assert_eq!(answer.status(), 200, "{:?}", answer.text().await);
}

/// A `cloudWatch` metric over `queries`, with its conditions.
fn metric(interval: Option<&str>, queries: serde_json::Value, success: &str) -> Metric {
    metric_with(
        "errors",
        json!({"cloudWatch": {"interval": interval, "metricDataQueries": queries}}),
        Some(success),
        None,
    )
}

/// A query of one metric's maximum over one-minute periods.
fn stat(id: &str, name: &str) -> serde_json::Value {
    json!({"id": id, "metricStat": {"metric": {"namespace": "Sluice/Test", "metricName": name},
        "period": 60, "stat": "Maximum"}})
}

#[tokio::test]
async fn measurements_against_moto() {
    install_crypto();
    let moto = Moto::start_checking_signatures().await.expect("moto");
    let config = aws(&moto.endpoint(), moto.key()).await;
    put(
        &config,
        &[
            ("errors", 0.25, 30),
            ("old", 7.0, 600),
            ("big", 1e21, 30),
            ("tiny", 0.000001, 30),
            ("hundred", 100.0, 30),
        ],
    )
    .await;
    let p = providers(Default::default()).with_aws(config);
    let measure = |m: Metric| {
        let p = p.clone();
        async move { p.measure(&ctx(), &m).await }
    };

    // Argo's documented condition, true and false.
    let m = measure(metric(
        None,
        json!([stat("errors", "errors")]),
        "all(result[0].Values, {# <= 0.5})",
    ))
    .await;
    assert_eq!(m.phase, Some(AnalysisPhase::Successful), "{:?}", m.message);
    assert_eq!(m.value.as_deref(), Some("[[0.25]]"));
    assert_eq!((m.message, m.metadata), (None, None));
    assert!(m.started_at.is_some() && m.finished_at.is_some());
    let m = measure(metric(
        None,
        json!([stat("errors", "errors")]),
        "all(result[0].Values, {# <= 0.1})",
    ))
    .await;
    assert_eq!(m.phase, Some(AnalysisPhase::Failed), "{:?}", m.message);
    assert_eq!(m.value.as_deref(), Some("[[0.25]]"));

    // The results' other fields.
    let m = measure(metric(
        None,
        json!([stat("e", "errors")]),
        "result[0].Id == 'e' && result[0].Label == 'errors Maximum' && \
         result[0].StatusCode == 'Complete' && len(result[0].Timestamps) == 1 && \
         result[0].Timestamps[0] < now()",
    ))
    .await;
    assert_eq!(m.phase, Some(AnalysisPhase::Successful), "{:?}", m.message);

    // Go's way of writing floats, in the value.
    let m = measure(metric(
        None,
        json!([
            stat("b", "big"),
            stat("t", "tiny"),
            stat("h", "hundred"),
            stat("n", "none")
        ]),
        "len(result) == 4",
    ))
    .await;
    assert_eq!(m.phase, Some(AnalysisPhase::Successful), "{:?}", m.message);
    assert_eq!(m.value.as_deref(), Some("[[1e+21] [1e-06] [100] []]"));

    // The window: 5 minutes by default, the interval when set.
    let old = json!([stat("o", "old")]);
    let m = measure(metric(None, old.clone(), "len(result[0].Values) == 0")).await;
    assert_eq!(m.phase, Some(AnalysisPhase::Successful), "{:?}", m.value);
    let m = measure(metric(Some("15m"), old.clone(), "result[0].Values[0] == 7")).await;
    assert_eq!(m.phase, Some(AnalysisPhase::Successful), "{:?}", m.value);
    assert_eq!(m.value.as_deref(), Some("[[7]]"));
    let m = measure(metric(Some("soon"), old, "true")).await;
    assert_eq!(m.phase, Some(AnalysisPhase::Error));
    assert_eq!(
        m.message.as_deref(),
        Some("time: invalid duration \"soon\"")
    );

    // Metric math: moto evaluates only an expression naming another query (the query's
    // values again), so that is what is checked here.
    let mut hidden = stat("e", "errors");
    hidden["returnData"] = json!(false);
    let m = measure(metric(
        None,
        json!([hidden, {"id": "rate", "expression": "e", "label": "rate"}]),
        "len(result) == 1 && result[0].Id == 'rate' && result[0].Label == 'rate'",
    ))
    .await;
    assert_eq!(m.phase, Some(AnalysisPhase::Successful), "{:?}", m.message);
    assert_eq!(m.value.as_deref(), Some("[[0.25]]"));

    // A query CloudWatch refuses: an Error with its words.
    let m = measure(metric(None, json!([{"id": "nothing"}]), "true")).await;
    assert_eq!(m.phase, Some(AnalysisPhase::Error));
    let message = m.message.unwrap();
    assert!(
        message.starts_with(
            "operation error CloudWatch: GetMetricData, https response error StatusCode: 400, RequestID: "
        ) && message.ends_with(
            "api error ValidationError: The parameter MetricDataQueries.member.1.MetricStat is required."
        ),
        "{message}"
    );
    assert_eq!(m.value, None);

    // A condition that cannot be evaluated keeps the value.
    let m = measure(metric(
        None,
        json!([stat("e", "errors")]),
        "result[0].Values >",
    ))
    .await;
    assert_eq!(m.phase, Some(AnalysisPhase::Error));
    assert_eq!(m.value.as_deref(), Some("[[0.25]]"));

    // A wrong secret: moto's signature check refuses it.
    let wrong = aws(&moto.endpoint(), (moto.key().0, "not-the-secret")).await;
    let p = providers(Default::default()).with_aws(wrong);
    let m = p
        .measure(&ctx(), &metric(None, json!([stat("e", "errors")]), "true"))
        .await;
    assert_eq!(m.phase, Some(AnalysisPhase::Error));
    let message = m.message.unwrap();
    assert!(
        message.contains("StatusCode: 403, RequestID: ")
            && message.contains("api error SignatureDoesNotMatch: The request signature"),
        "{message}"
    );
}

#[tokio::test]
async fn unreachable_or_unconfigured_aws_is_an_error() {
    let m = metric(None, json!([stat("e", "errors")]), "true");
    let p = providers(Default::default()).with_aws(aws("http://127.0.0.1:1", ("k", "s")).await);
    let measured = p.measure(&ctx(), &m).await;
    assert_eq!(measured.phase, Some(AnalysisPhase::Error));
    let message = measured.message.unwrap();
    assert!(
        message.starts_with("operation error CloudWatch: GetMetricData, ")
            && message.contains("http://127.0.0.1:1/"),
        "{message}"
    );

    // The test providers have an AWS configuration with nothing in it.
    let measured = providers(Default::default()).measure(&ctx(), &m).await;
    assert_eq!(
        measured.message.as_deref(),
        Some(
            "operation error CloudWatch: GetMetricData, failed to resolve service endpoint, \
             an AWS region is required, but was not found"
        )
    );

    let no_credentials = sluice_aws::loader()
        .region(sluice_aws::Region::new(REGION))
        .no_credentials()
        .load()
        .await;
    let measured = providers(Default::default())
        .with_aws(no_credentials)
        .measure(&ctx(), &m)
        .await;
    assert_eq!(measured.phase, Some(AnalysisPhase::Error));
    let message = measured.message.unwrap();
    assert!(
        message.starts_with("operation error CloudWatch: GetMetricData, failed to sign request: "),
        "{message}"
    );
}
