//! What AWS says of the load balancers behind an ALB Ingress, read for the router objects of
//! kind `AwsLoadBalancer` (`sluice_routers::alb::verify` judges them): for each hostname in the
//! Ingress's status, the ELBv2 load balancer with that DNS name, its target groups with their
//! tags, and the weight each gets in the listener rules' forward actions. The same calls as
//! Argo's, through the AWS SDK for Rust; the first load balancer not found or the first AWS
//! error ends the list, as in Argo.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::networking::v1::Ingress;
use kube::{Api, Client};
use serde_json::{Value, json};
use sluice_aws::elbv2;
use sluice_routers::kinds::ObjectRef;
use tokio::sync::OnceCell;

/// Argo's page size when it lists load balancers.
const PAGE_SIZE: i32 = 300;
/// At most this many target groups per `DescribeTags` call (Argo's default limit).
const TAGS_PER_CALL: usize = 20;
/// One reading of one Ingress's load balancers gives up after this long.
const TIMEOUT: Duration = Duration::from_secs(30);

static CLIENT: OnceCell<elbv2::Client> = OnceCell::const_new();

/// The process's ELBv2 client.
pub(super) async fn client() -> &'static elbv2::Client {
    CLIENT
        .get_or_init(|| async { elbv2::Client::new(sluice_aws::sdk_config().await) })
        .await
}

/// The object for the Ingress `target` names.
pub async fn read(kube: &Client, target: &ObjectRef) -> Value {
    let ingresses: Api<Ingress> = Api::namespaced(kube.clone(), &target.namespace);
    let hostnames: Vec<String> = match ingresses.get_opt(&target.name).await {
        Ok(Some(ingress)) => ingress
            .status
            .and_then(|s| s.load_balancer)
            .and_then(|lb| lb.ingress)
            .into_iter()
            .flatten()
            .filter_map(|i| i.hostname)
            .filter(|h| !h.is_empty())
            .collect(),
        Ok(None) => Vec::new(),
        Err(e) => return json!({ "loadBalancers": [{ "error": e.to_string() }] }),
    };
    let mut found = Vec::new();
    for hostname in hostnames {
        let entry = match tokio::time::timeout(TIMEOUT, load_balancer(&hostname)).await {
            Ok(Ok(Some(lb))) => lb,
            Ok(Ok(None)) => json!({ "hostname": hostname, "notFound": true }),
            Ok(Err(error)) => json!({ "hostname": hostname, "error": error }),
            Err(_) => json!({
                "hostname": hostname,
                "error": format!("no answer from AWS in {} s", TIMEOUT.as_secs()),
            }),
        };
        let last = entry.get("notFound").is_some() || entry.get("error").is_some();
        found.push(entry);
        if last {
            break;
        }
    }
    json!({ "loadBalancers": found })
}

/// The load balancer of `hostname` with its target groups, `None` when no load balancer has
/// that DNS name.
async fn load_balancer(hostname: &str) -> Result<Option<Value>, String> {
    let elb = client().await;
    let mut pages = elb
        .describe_load_balancers()
        .page_size(PAGE_SIZE)
        .into_paginator()
        .send();
    let mut lb = None;
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| sluice_aws::error_message(&e))?;
        if let Some(found) = page
            .load_balancers()
            .iter()
            .find(|l| l.dns_name() == Some(hostname))
        {
            lb = Some(found.clone());
            break;
        }
    }
    let Some(lb) = lb else {
        return Ok(None);
    };
    let arn = lb.load_balancer_arn().unwrap_or_default();
    Ok(Some(json!({
        "hostname": hostname,
        "name": lb.load_balancer_name().unwrap_or_default(),
        "arn": arn,
        "targetGroups": target_groups(elb, arn).await?,
    })))
}

/// The target groups of the load balancer `arn`: name, ARN, tags, and the weight of the last
/// forward action naming each in its listeners' rules (none when no rule forwards to it).
async fn target_groups(elb: &elbv2::Client, arn: &str) -> Result<Vec<Value>, String> {
    let err = |e: &(dyn std::error::Error + 'static)| sluice_aws::error_message(e);
    let groups = elb
        .describe_target_groups()
        .load_balancer_arn(arn)
        .send()
        .await
        .map_err(|e| err(&e))?;
    let groups = groups.target_groups();
    let arns: Vec<String> = groups
        .iter()
        .filter_map(|g| g.target_group_arn().map(str::to_string))
        .collect();
    let mut tags: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for batch in arns.chunks(TAGS_PER_CALL) {
        let described = elb
            .describe_tags()
            .set_resource_arns(Some(batch.to_vec()))
            .send()
            .await
            .map_err(|e| err(&e))?;
        for d in described.tag_descriptions() {
            let entry = tags
                .entry(d.resource_arn().unwrap_or_default().to_string())
                .or_default();
            for t in d.tags() {
                if let (Some(k), Some(v)) = (t.key(), t.value()) {
                    entry.insert(k.to_string(), v.to_string());
                }
            }
        }
    }
    let mut weights: BTreeMap<String, i32> = BTreeMap::new();
    let listeners = elb
        .describe_listeners()
        .load_balancer_arn(arn)
        .send()
        .await
        .map_err(|e| err(&e))?;
    for listener in listeners.listeners() {
        let rules = elb
            .describe_rules()
            .set_listener_arn(listener.listener_arn().map(str::to_string))
            .send()
            .await
            .map_err(|e| err(&e))?;
        let tuples = rules
            .rules()
            .iter()
            .flat_map(|r| r.actions())
            .filter_map(|a| a.forward_config())
            .flat_map(|f| f.target_groups());
        for tuple in tuples {
            if let (Some(tg), Some(w)) = (tuple.target_group_arn(), tuple.weight()) {
                weights.insert(tg.to_string(), w);
            }
        }
    }
    Ok(groups
        .iter()
        .map(|g| {
            let arn = g.target_group_arn().unwrap_or_default();
            json!({
                "name": g.target_group_name().unwrap_or_default(),
                "arn": arn,
                "tags": tags.get(arn).cloned().unwrap_or_default(),
                "weight": weights.get(arn),
            })
        })
        .collect())
}
