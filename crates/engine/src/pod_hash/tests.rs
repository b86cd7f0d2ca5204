//! Finding a Rollout's ReplicaSet, starting from objects as Argo Rollouts 1.9.1 wrote them
//! (`testdata/argo-objects`).

use k8s_openapi::api::apps::v1::ReplicaSet;
use serde_json::{Value, json};
use sluice_api::rollout::Rollout;

use super::*;

/// The Rollout and ReplicaSets of one captured moment.
fn captured(name: &str) -> (Rollout, Vec<ReplicaSet>) {
    let path = format!(
        "{}/../../testdata/argo-objects/v1.9.1/{name}.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let docs = sluice_api::yaml::from_multi_doc_str(&text).unwrap();
    let mut rollout = None;
    let mut replica_sets = Vec::new();
    for doc in docs {
        match doc["kind"].as_str() {
            Some("Rollout") => rollout = Some(serde_json::from_value(doc).unwrap()),
            Some("ReplicaSet") => replica_sets.push(serde_json::from_value(doc).unwrap()),
            _ => {}
        }
    }
    (rollout.unwrap(), replica_sets)
}

fn relabel(rs: &mut ReplicaSet, hash: &str) {
    rs.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(POD_TEMPLATE_HASH.into(), hash.into());
}

fn status_hash(ro: &Rollout) -> String {
    ro.status
        .as_ref()
        .unwrap()
        .current_pod_hash
        .clone()
        .unwrap()
}

const EVERY_MOMENT: &[&str] = &[
    "canary-healthy",
    "canary-paused-step-1",
    "canary-paused-timed-step-3",
    "canary-aborted",
    "bluegreen-healthy",
    "bluegreen-preview-paused",
    "bluegreen-promoted-old-within-scale-down-delay",
];

#[test]
fn argo_19_replica_sets_are_found_by_their_own_hash() {
    for moment in EVERY_MOMENT {
        let (ro, rss) = captured(moment);
        let hash = template_hash(&ro).unwrap();
        assert_eq!(hash, status_hash(&ro), "{moment}: Argo's currentPodHash");
        assert_eq!(current_pod_hash(&ro, &rss), Some(hash), "{moment}");
    }
}

#[test]
fn replica_sets_of_earlier_hashes_are_found_by_the_earlier_hash() {
    for moment in EVERY_MOMENT {
        let (ro, mut rss) = captured(moment);
        let current = template_hash(&ro).unwrap();
        let template = serde_json::to_value(ro.spec.template.as_ref().unwrap()).unwrap();
        let earlier =
            hash::pod_template_hash_as(&template, None, HashVersion::BeforeArgo19).unwrap();
        assert_ne!(earlier, current);
        for rs in rss
            .iter_mut()
            .filter(|rs| rs.pod_hash() == Some(current.as_str()))
        {
            relabel(rs, &earlier);
        }
        assert_eq!(current_pod_hash(&ro, &rss), Some(earlier), "{moment}");
    }
}

#[test]
fn replica_sets_under_any_other_hash_are_found_by_their_template() {
    for moment in EVERY_MOMENT {
        let (ro, mut rss) = captured(moment);
        let current = template_hash(&ro).unwrap();
        for rs in rss.iter_mut() {
            if rs.pod_hash() == Some(current.as_str()) {
                relabel(rs, "someother1");
            }
        }
        assert_eq!(
            current_pod_hash(&ro, &rss).as_deref(),
            Some("someother1"),
            "{moment}"
        );
    }
}

#[test]
fn a_changed_template_matches_no_replica_set() {
    let (mut ro, rss) = captured("canary-healthy");
    let template = ro.spec.template.as_mut().unwrap();
    template.spec.as_mut().unwrap().containers[0].image = Some("nginx:1.20-alpine".into());
    let hash = template_hash(&ro).unwrap();
    assert_eq!(current_pod_hash(&ro, &rss), Some(hash));
    assert!(rss.iter().all(|rs| !runs_template(&ro, rs)));
}

/// Each difference the comparison must see, and each it must not.
/// A named edit of a pod template.
type TemplateEdit<'a> = (&'a str, &'a dyn Fn(&mut Value));

#[test]
fn template_comparison_follows_argo() {
    let (ro, rss) = captured("canary-healthy");
    let live = &rss[0];
    assert!(runs_template(&ro, live));
    let with = |edit: &dyn Fn(&mut Value)| {
        let mut rs = serde_json::to_value(live).unwrap();
        edit(rs.pointer_mut("/spec/template").unwrap());
        serde_json::from_value::<ReplicaSet>(rs).unwrap()
    };
    let same: &[TemplateEdit] = &[
        ("serviceAccount", &|t| {
            t["spec"]["serviceAccount"] = json!("default");
        }),
        ("quantity spelling", &|t| {
            t["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("0.005");
        }),
        ("empty list", &|t| {
            t["spec"]["containers"][0]["args"] = json!([]);
        }),
        ("empty annotations", &|t| {
            t["metadata"]["annotations"] = json!({});
        }),
        ("no defaults stored", &|t| {
            let c = t["spec"]["containers"][0].as_object_mut().unwrap();
            c.remove("terminationMessagePolicy");
            c.remove("imagePullPolicy");
            t["spec"].as_object_mut().unwrap().remove("schedulerName");
        }),
    ];
    for (what, edit) in same {
        assert!(runs_template(&ro, &with(*edit)), "{what} made a difference");
    }
    let different: &[TemplateEdit] = &[
        ("image", &|t| {
            t["spec"]["containers"][0]["image"] = json!("nginx:1.20-alpine");
        }),
        ("label", &|t| {
            t["metadata"]["labels"]["extra"] = json!("x");
        }),
        ("pull policy", &|t| {
            t["spec"]["containers"][0]["imagePullPolicy"] = json!("Always");
        }),
        ("quantity value", &|t| {
            t["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("6m");
        }),
        ("env", &|t| {
            t["spec"]["containers"][0]["env"] = json!([{"name": "A", "value": "1"}]);
        }),
    ];
    for (what, edit) in different {
        assert!(
            !runs_template(&ro, &with(*edit)),
            "{what} made no difference"
        );
    }
}

#[test]
fn injected_metadata_and_anti_affinity_are_not_part_of_the_template() {
    let (mut ro, rss) = captured("canary-healthy");
    let mut rs = serde_json::to_value(&rss[0]).unwrap();
    rs["metadata"]["annotations"]["rollout.argoproj.io/ephemeral-metadata"] =
        json!(r#"{"labels":{"role":"stable"}}"#);
    rs["spec"]["template"]["metadata"]["labels"]["role"] = json!("stable");
    rs["spec"]["template"]["spec"]["affinity"] = json!({"podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{
            "weight": 1,
            "podAffinityTerm": {
                "labelSelector": {"matchExpressions": [{
                    "key": POD_TEMPLATE_HASH, "operator": "In", "values": ["abc"]
                }]},
                "topologyKey": "kubernetes.io/hostname"
            }
        }]
    }});
    let rs: ReplicaSet = serde_json::from_value(rs).unwrap();
    // Without antiAffinity in the strategy, the affinity is the user's own.
    assert!(!runs_template(&ro, &rs));
    let canary = serde_json::to_value(ro.canary().unwrap()).unwrap();
    let mut canary = canary;
    canary["antiAffinity"] =
        json!({"preferredDuringSchedulingIgnoredDuringExecution": {"weight": 1}});
    ro.spec.strategy.as_mut().unwrap().canary = Some(serde_json::from_value(canary).unwrap());
    assert!(runs_template(&ro, &rs));
}

#[test]
fn the_oldest_equal_replica_set_wins_and_deleted_ones_are_skipped() {
    let (ro, rss) = captured("canary-healthy");
    let mut older = rss[0].clone();
    let mut newer = rss[0].clone();
    relabel(&mut older, "older11111");
    relabel(&mut newer, "newer11111");
    let at = |s: &str| {
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            s.parse().unwrap(),
        ))
    };
    older.metadata.creation_timestamp = at("2026-01-01T00:00:00Z");
    newer.metadata.creation_timestamp = at("2026-02-01T00:00:00Z");
    let both = [newer.clone(), older.clone()];
    assert_eq!(current_pod_hash(&ro, &both).as_deref(), Some("older11111"));
    older.metadata.deletion_timestamp = at("2026-03-01T00:00:00Z");
    let both = [newer, older];
    assert_eq!(current_pod_hash(&ro, &both).as_deref(), Some("newer11111"));
}
