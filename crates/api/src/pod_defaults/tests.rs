//! Each default of the pass, field by field. `crates/e2e/tests/e2e/pod_defaults_match_the_api_server.rs`
//! checks the whole pass against a real API server.

use serde_json::{Value, json};

use super::*;

fn defaulted(template: Value) -> Value {
    let mut template = template;
    apply(&mut template);
    template
}

fn spec_of(containers: Value) -> Value {
    json!({"spec": {"containers": containers}})
}

#[test]
fn pod_spec_defaults() {
    let t = defaulted(spec_of(json!([])));
    let spec = &t["spec"];
    assert_eq!(spec["dnsPolicy"], "ClusterFirst");
    assert_eq!(spec["restartPolicy"], "Always");
    assert_eq!(spec["securityContext"], json!({}));
    assert_eq!(spec["terminationGracePeriodSeconds"], 30);
    assert_eq!(spec["schedulerName"], "default-scheduler");
    // Pod-only defaults are not pod-template defaults.
    assert!(spec.get("enableServiceLinks").is_none());
}

#[test]
fn pod_spec_values_given_are_kept() {
    let t = defaulted(json!({"spec": {
        "dnsPolicy": "Default",
        "restartPolicy": "Never",
        "securityContext": {"runAsUser": 1},
        "terminationGracePeriodSeconds": 0,
        "schedulerName": "mine",
        "containers": []
    }}));
    let spec = &t["spec"];
    assert_eq!(spec["dnsPolicy"], "Default");
    assert_eq!(spec["restartPolicy"], "Never");
    assert_eq!(spec["securityContext"], json!({"runAsUser": 1}));
    // A pointer set to zero is a value, not a nil pointer.
    assert_eq!(spec["terminationGracePeriodSeconds"], 0);
    assert_eq!(spec["schedulerName"], "mine");
}

#[test]
fn container_defaults() {
    let t = defaulted(spec_of(json!([{
        "name": "a",
        "image": "nginx:1.25",
        "ports": [{"containerPort": 80}, {"containerPort": 53, "protocol": "UDP"}],
        "env": [
            {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "F", "valueFrom": {"fileKeyRef": {"path": "p", "key": "k", "volumeName": "v"}}},
            {"name": "PLAIN", "value": "x"}
        ]
    }])));
    let c = &t["spec"]["containers"][0];
    assert_eq!(c["imagePullPolicy"], "IfNotPresent");
    assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(c["terminationMessagePolicy"], "File");
    assert_eq!(c["ports"][0]["protocol"], "TCP");
    assert_eq!(c["ports"][1]["protocol"], "UDP");
    assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
    assert_eq!(c["env"][1]["valueFrom"]["fileKeyRef"]["optional"], false);
    assert_eq!(c["env"][2], json!({"name": "PLAIN", "value": "x"}));
}

#[test]
fn init_and_ephemeral_containers_get_the_container_defaults() {
    let t = defaulted(json!({"spec": {
        "initContainers": [{"name": "i", "image": "busybox"}],
        "containers": [],
        "ephemeralContainers": [{"name": "e", "image": "busybox@sha256:abc"}]
    }}));
    let init = &t["spec"]["initContainers"][0];
    assert_eq!(init["imagePullPolicy"], "Always");
    assert_eq!(init["terminationMessagePolicy"], "File");
    let ephemeral = &t["spec"]["ephemeralContainers"][0];
    assert_eq!(ephemeral["imagePullPolicy"], "IfNotPresent");
    assert_eq!(ephemeral["terminationMessagePath"], "/dev/termination-log");
}

#[test]
fn pull_policy_follows_the_tag() {
    assert_eq!(image_tag("nginx"), Some("latest"));
    assert_eq!(image_tag("nginx:latest"), Some("latest"));
    assert_eq!(image_tag("nginx:1.25"), Some("1.25"));
    assert_eq!(image_tag("localhost:5000/app"), Some("latest"));
    assert_eq!(image_tag("localhost:5000/app:v2"), Some("v2"));
    assert_eq!(image_tag("app@sha256:0123"), None);
    assert_eq!(image_tag("app:v1@sha256:0123"), Some("v1"));
    assert_eq!(image_tag(""), Some("latest"));
    for (image, policy) in [
        ("argoproj/rollouts-demo:blue", "IfNotPresent"),
        ("argoproj/rollouts-demo", "Always"),
        ("argoproj/rollouts-demo:latest", "Always"),
        ("registry.local:5000/demo@sha256:00", "IfNotPresent"),
    ] {
        let t = defaulted(spec_of(json!([{"name": "a", "image": image}])));
        assert_eq!(
            t["spec"]["containers"][0]["imagePullPolicy"], policy,
            "{image}"
        );
    }
    let t = defaulted(spec_of(
        json!([{"name": "a", "image": "x", "imagePullPolicy": "Never"}]),
    ));
    assert_eq!(t["spec"]["containers"][0]["imagePullPolicy"], "Never");
}

#[test]
fn probe_defaults() {
    let t = defaulted(spec_of(json!([{
        "name": "a",
        "image": "x:1",
        "livenessProbe": {"httpGet": {"port": 8080}},
        "readinessProbe": {"grpc": {"port": 9000}, "periodSeconds": 5},
        "startupProbe": {"tcpSocket": {"port": 1}, "failureThreshold": 30},
        "lifecycle": {
            "postStart": {"httpGet": {"port": 1, "path": "/up"}},
            "preStop": {"exec": {"command": ["true"]}}
        }
    }])));
    let c = &t["spec"]["containers"][0];
    let live = &c["livenessProbe"];
    assert_eq!(live["timeoutSeconds"], 1);
    assert_eq!(live["periodSeconds"], 10);
    assert_eq!(live["successThreshold"], 1);
    assert_eq!(live["failureThreshold"], 3);
    assert_eq!(
        live["httpGet"],
        json!({"port": 8080, "path": "/", "scheme": "HTTP"})
    );
    assert_eq!(c["readinessProbe"]["periodSeconds"], 5);
    assert_eq!(c["readinessProbe"]["grpc"]["service"], "");
    assert_eq!(c["startupProbe"]["failureThreshold"], 30);
    assert_eq!(
        c["lifecycle"]["postStart"]["httpGet"],
        json!({"port": 1, "path": "/up", "scheme": "HTTP"})
    );
    assert_eq!(
        c["lifecycle"]["preStop"],
        json!({"exec": {"command": ["true"]}})
    );
}

#[test]
fn resource_quantities_round_up_to_milli() {
    let t = defaulted(json!({"spec": {
        "containers": [{
            "name": "a",
            "image": "x:1",
            "resources": {
                "limits": {"cpu": "0.0001", "memory": "1.5Gi"},
                "requests": {"cpu": "0.5", "memory": "128974848"}
            }
        }],
        "overhead": {"cpu": "0.00011"},
        "resources": {"limits": {"cpu": "1.0005"}}
    }}));
    let spec = &t["spec"];
    let resources = &spec["containers"][0]["resources"];
    assert_eq!(
        resources["limits"],
        json!({"cpu": "1m", "memory": "1536Mi"})
    );
    assert_eq!(
        resources["requests"],
        json!({"cpu": "500m", "memory": "128974848"})
    );
    // Requests are not copied from limits in a template (only in a Pod).
    let t2 = defaulted(spec_of(
        json!([{"name": "a", "resources": {"limits": {"cpu": "1"}}}]),
    ));
    assert!(
        t2["spec"]["containers"][0]["resources"]
            .get("requests")
            .is_none()
    );
    assert_eq!(spec["overhead"]["cpu"], "1m");
    assert_eq!(spec["resources"]["limits"]["cpu"], "1001m");
}

#[test]
fn volume_defaults() {
    let t = defaulted(json!({"spec": {"containers": [], "volumes": [
        {"name": "scratch"},
        {"name": "host", "hostPath": {"path": "/var"}},
        {"name": "s", "secret": {"secretName": "x"}},
        {"name": "c", "configMap": {"name": "x", "defaultMode": 256}},
        {"name": "d", "downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]}},
        {"name": "p", "projected": {"sources": [
            {"serviceAccountToken": {"path": "token"}},
            {"downwardAPI": {"items": [{"path": "l", "fieldRef": {"fieldPath": "metadata.labels"}}]}}
        ]}},
        {"name": "i", "iscsi": {"targetPortal": "t", "iqn": "q", "lun": 0}},
        {"name": "r", "rbd": {"monitors": ["m"], "image": "i"}},
        {"name": "az", "azureDisk": {"diskName": "d", "diskURI": "u"}},
        {"name": "sio", "scaleIO": {"gateway": "g", "system": "s", "secretRef": {"name": "n"}}},
        {"name": "eph", "ephemeral": {"volumeClaimTemplate": {"spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "0.5Gi"}}
        }}}},
        {"name": "img", "image": {"reference": "quay.io/data:latest"}}
    ]}}));
    let v = &t["spec"]["volumes"];
    assert_eq!(v[0], json!({"name": "scratch", "emptyDir": {}}));
    assert_eq!(v[1]["hostPath"]["type"], "");
    assert_eq!(v[2]["secret"]["defaultMode"], 420);
    assert_eq!(v[3]["configMap"]["defaultMode"], 256);
    assert_eq!(v[4]["downwardAPI"]["defaultMode"], 420);
    assert_eq!(
        v[4]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"],
        "v1"
    );
    assert_eq!(v[5]["projected"]["defaultMode"], 420);
    assert_eq!(
        v[5]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"],
        3600
    );
    assert_eq!(
        v[5]["projected"]["sources"][1]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"],
        "v1"
    );
    assert_eq!(v[6]["iscsi"]["iscsiInterface"], "default");
    assert_eq!(v[7]["rbd"]["pool"], "rbd");
    assert_eq!(v[7]["rbd"]["user"], "admin");
    assert_eq!(v[7]["rbd"]["keyring"], "/etc/ceph/keyring");
    assert_eq!(v[8]["azureDisk"]["cachingMode"], "ReadWrite");
    assert_eq!(v[8]["azureDisk"]["fsType"], "ext4");
    assert_eq!(v[8]["azureDisk"]["readOnly"], false);
    assert_eq!(v[8]["azureDisk"]["kind"], "Shared");
    assert_eq!(v[9]["scaleIO"]["storageMode"], "ThinProvisioned");
    assert_eq!(v[9]["scaleIO"]["fsType"], "xfs");
    let claim = &v[10]["ephemeral"]["volumeClaimTemplate"]["spec"];
    assert_eq!(claim["volumeMode"], "Filesystem");
    assert_eq!(claim["resources"]["requests"]["storage"], "512Mi");
    assert_eq!(v[11]["image"]["pullPolicy"], "Always");
    assert!(v[11].get("emptyDir").is_none());
}

#[test]
fn applying_twice_changes_nothing() {
    let corpus =
        include_str!("../pod_template_hash/testdata/argo-v1.9.1-pod-template-hashes.jsonl");
    for line in corpus.lines() {
        let entry = serde_json::from_str::<Value>(line).unwrap()["template"].clone();
        let once = defaulted(entry);
        assert_eq!(defaulted(once.clone()), once);
    }
}

#[test]
fn odd_input_is_left_alone() {
    for odd in [
        json!(null),
        json!([]),
        json!({"spec": 1}),
        json!({"spec": {"containers": 7}}),
    ] {
        assert_eq!(
            defaulted(odd.clone())["spec"].get("containers"),
            odd["spec"].get("containers")
        );
    }
}
