use super::*;

const ROLLOUT: &str = "\
apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.25
  strategy:
    canary:
      canaryService: web-canary
      stableService: web-stable
      trafficRouting:
        ROUTING
      steps:
      - setWeight: 20
";

fn service(name: &str, selector: &str, annotations: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  annotations: {annotations}\nspec:\n  selector: {selector}\n"
    )
}

/// The reference problems of the file's Rollout (its first document).
fn problems(text: &str) -> Vec<String> {
    let docs = sluice_api::yaml::from_multi_doc_str(text).unwrap();
    let mut referenced = Referenced::default();
    for doc in &docs {
        referenced.add(doc);
    }
    let rollout: Rollout = serde_json::from_value(docs[0].clone()).unwrap();
    reference_problems(&rollout, &referenced)
}

#[test]
fn services_must_select_the_rollouts_pods_and_not_another_rollouts() {
    let text = ROLLOUT.replace("      trafficRouting:\n        ROUTING\n", "")
        + &service("web-canary", "{app: web, tier: front}", "{}")
        + &service(
            "web-stable",
            "{app: web, rollouts-pod-template-hash: abc}",
            "{argo-rollouts.argoproj.io/managed-by-rollouts: other}",
        );
    assert_eq!(
        problems(&text),
        [
            "spec.strategy.canary.canaryService: Invalid value: \"web-canary\": Service \"web-canary\" has unmatch label \"tier\" in rollout",
            "spec.strategy.canary.stableService: Invalid value: \"web-stable\": Service \"web-stable\" is managed by another Rollout",
        ]
    );
}

#[test]
fn objects_the_file_lacks_are_not_reported() {
    let text = ROLLOUT.replace(
        "ROUTING",
        "istio: {virtualService: {name: vs, routes: [primary]}}",
    );
    assert_eq!(problems(&text), Vec::<String>::new());
}

#[test]
fn a_virtual_service_without_the_named_route() {
    let text = ROLLOUT.replace(
        "ROUTING",
        "istio: {virtualService: {name: vs, routes: [primary]}}",
    ) + "---
apiVersion: networking.istio.io/v1alpha3
kind: VirtualService
metadata:
  name: vs
spec:
  hosts: [web]
  http:
  - name: secondary
    route:
    - destination: {host: web-stable}
      weight: 100
    - destination: {host: web-canary}
      weight: 0
";
    let found = problems(&text);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("spec.strategy.canary.trafficRouting.istio.virtualService.name: Invalid value: \"vs\": Istio VirtualService has invalid HTTP routes. Error: HTTP Route 'primary' is not found in the defined Virtual Service."),
        "{found:?}"
    );
}

#[test]
fn an_ingress_without_a_rule_for_the_stable_service() {
    let ingress = "---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web-ingress
spec:
  rules:
  - host: web.example
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service: {name: elsewhere, port: {number: 80}}
";
    for (routing, field) in [
        ("nginx: {stableIngress: web-ingress}", "nginx.stableIngress"),
        ("alb: {ingress: web-ingress}", "alb.ingress"),
    ] {
        let text = ROLLOUT.replace("ROUTING", routing) + ingress;
        assert_eq!(
            problems(&text),
            [format!(
                "spec.strategy.canary.trafficRouting.{field}: Invalid value: \"web-ingress\": ingress `web-ingress` has no rules using service web-stable backend"
            )],
            "{routing}"
        );
        let fixed = text.replace("elsewhere", "web-stable");
        assert_eq!(problems(&fixed), Vec::<String>::new(), "{routing}");
    }
}
