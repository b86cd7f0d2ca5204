//! What AWS says of the target groups bound to a Service (TargetGroupBindings of the AWS Load
//! Balancer Controller): the registered targets of each, against the Service's endpoints, for
//! `sluice_engine::target_registration` to judge. The bindings to ask about and the counting
//! are the engine's pure functions; this module only reads.

use k8s_openapi::api::core::v1::{Endpoints, Service};
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::{Api, Client};
use serde_json::Value;
use sluice_engine::target_registration::{self, Registration};
use sluice_routers::kinds::ApiVersions;

/// The registration of `service`'s endpoints in every target group bound to it.
pub async fn read(kube: &Client, versions: &ApiVersions, service: &Service) -> Registration {
    let name = service.metadata.name.clone().unwrap_or_default();
    let namespace = service.metadata.namespace.clone().unwrap_or_default();
    let mut registration = Registration {
        service: name.clone(),
        ..Registration::default()
    };
    let fail = |mut r: Registration, arn: &str, e: String| {
        r.error = Some((arn.to_string(), e));
        r
    };
    let (group, version) = versions
        .target_group_binding_api_version
        .split_once('/')
        .unwrap_or(("elbv2.k8s.aws", "v1beta1"));
    let resource = ApiResource {
        group: group.to_string(),
        version: version.to_string(),
        api_version: versions.target_group_binding_api_version.clone(),
        kind: "TargetGroupBinding".to_string(),
        plural: "targetgroupbindings".to_string(),
    };
    let api: Api<DynamicObject> = Api::namespaced_with(kube.clone(), &namespace, &resource);
    let bindings: Vec<Value> = match api.list(&ListParams::default()).await {
        Ok(list) => list
            .items
            .into_iter()
            .filter_map(|b| serde_json::to_value(b).ok())
            .collect(),
        // No TargetGroupBinding API here: nothing is bound, nothing to wait for.
        Err(kube::Error::Api(e)) if e.code == 404 => return registration,
        Err(e) => return fail(registration, "", e.to_string()),
    };
    let endpoints: Api<Endpoints> = Api::namespaced(kube.clone(), &namespace);
    let endpoints = match endpoints.get_opt(&name).await {
        Ok(found) => found
            .and_then(|e| serde_json::to_value(e).ok())
            .unwrap_or(Value::Null),
        Err(e) => return fail(registration, "", e.to_string()),
    };
    let elb = super::aws_load_balancers::client().await;
    for binding in target_registration::bindings(&bindings, service, &endpoints) {
        let health = elb
            .describe_target_health()
            .target_group_arn(&binding.arn)
            .send()
            .await;
        let health = match health {
            Ok(h) => h,
            Err(e) => return fail(registration, &binding.arn, sluice_aws::error_message(&e)),
        };
        let targets: Vec<(String, i32)> = health
            .target_health_descriptions()
            .iter()
            .filter_map(|d| {
                let t = d.target()?;
                Some((t.id()?.to_string(), t.port()?))
            })
            .collect();
        registration
            .checks
            .push(target_registration::check(&binding, &endpoints, &targets));
    }
    registration
}
