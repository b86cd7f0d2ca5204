use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use serde_json::{Value, json};
use sluice_api::Rollout;

use super::*;
use crate::reconcile;

fn rollout(annotation: Option<&str>, template_config: &str) -> Rollout {
    let mut annotations = serde_json::Map::new();
    if let Some(value) = annotation {
        annotations.insert(CONFIG_ROLLOUT.into(), value.into());
    }
    serde_json::from_value(json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": "web", "namespace": "ns", "uid": "rollout-uid", "generation": 1,
                     "annotations": annotations},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "imagePullSecrets": [{"name": "registry"}],
                    "volumes": [
                        {"name": "conf", "configMap": {"name": template_config}},
                        {"name": "both", "projected": {"sources": [
                            {"configMap": {"name": template_config}},
                            {"secret": {"name": "creds"}}
                        ]}}
                    ],
                    "containers": [{
                        "name": "web",
                        "image": "nginx:1",
                        "envFrom": [{"secretRef": {"name": "creds"}}],
                        "env": [{"name": "MODE", "valueFrom":
                                 {"configMapKeyRef": {"name": template_config, "key": "mode"}}}]
                    }]
                }
            },
            "strategy": {"canary": {"steps": [{"setWeight": 50}, {"pause": {}}]}}
        }
    }))
    .unwrap()
}

fn cm(name: &str) -> ConfigRef {
    ConfigRef {
        kind: ConfigKind::ConfigMap,
        name: name.into(),
    }
}

fn secret(name: &str) -> ConfigRef {
    ConfigRef {
        kind: ConfigKind::Secret,
        name: name.into(),
    }
}

fn copy_of(source: &str, owners: &[&str]) -> ConfigCopy {
    ConfigCopy {
        source: source.into(),
        resource_version: Some("7".into()),
        owners: owners.iter().map(|o| o.to_string()).collect(),
    }
}

fn observed(ro: Rollout, config: ConfigObserved) -> Observed {
    Observed {
        config: Some(config),
        ..Observed::new(ro, Timestamp::from_second(1_800_000_000).unwrap())
    }
}

/// The ReplicaSets the plan creates, made real (a uid, its pods available).
fn created(plan: &crate::Plan) -> Vec<ReplicaSet> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateReplicaSet { replica_set } => Some(replica_set.as_ref().clone()),
            _ => None,
        })
        .map(|mut rs| {
            rs.metadata.uid = Some(format!("uid-{}", rs.metadata.name.clone().unwrap()));
            rs
        })
        .collect()
}

fn template_names(rs: &ReplicaSet) -> Vec<String> {
    let template =
        serde_json::to_value(rs.spec.as_ref().unwrap().template.as_ref().unwrap()).unwrap();
    let mut names = Vec::new();
    let mut t = template.clone();
    visit(&mut t, &mut |kind, name| {
        names.push(format!("{}/{}", kind.name(), name.as_str().unwrap()))
    });
    names
}

#[test]
fn referenced_objects_are_read_from_copies_named_by_their_content() {
    let ro = rollout(Some("true"), "app-config");
    let config = ConfigObserved {
        sources: [
            (cm("app-config"), Some("aaaaaaaaaa".into())),
            (secret("creds"), Some("ssssssssss".into())),
        ]
        .into(),
        copies: BTreeMap::new(),
    };
    let plan = reconcile(&observed(ro, config));
    // The copies come first: the new ReplicaSet's pods read them.
    assert_eq!(
        plan.actions[..2],
        [
            Action::CopyConfig {
                kind: ConfigKind::ConfigMap,
                source: "app-config".into(),
                hash: "aaaaaaaaaa".into(),
                copy: "app-config-aaaaaaaaaa".into(),
            },
            Action::CopyConfig {
                kind: ConfigKind::Secret,
                source: "creds".into(),
                hash: "ssssssssss".into(),
                copy: "creds-ssssssssss".into(),
            },
        ]
    );
    let rss = created(&plan);
    assert_eq!(rss.len(), 1, "{:?}", plan.actions);
    assert_eq!(
        template_names(&rss[0]),
        [
            "ConfigMap/app-config-aaaaaaaaaa",
            "ConfigMap/app-config-aaaaaaaaaa",
            "Secret/creds-ssssssssss",
            "Secret/creds-ssssssssss",
            "ConfigMap/app-config-aaaaaaaaaa",
        ]
    );
    // Image pull secrets are not configuration the pods read.
    let pull = rss[0]
        .spec
        .as_ref()
        .unwrap()
        .template
        .as_ref()
        .unwrap()
        .spec
        .as_ref()
        .unwrap();
    assert_eq!(
        pull.image_pull_secrets.as_ref().unwrap()[0].name,
        "registry"
    );
}

#[test]
fn without_the_annotation_nothing_is_copied() {
    for annotation in [None, Some("false"), Some("yes")] {
        let ro = rollout(annotation, "app-config");
        let config = ConfigObserved {
            sources: [(cm("app-config"), Some("aaaaaaaaaa".into()))].into(),
            copies: BTreeMap::new(),
        };
        let plan = reconcile(&observed(ro, config));
        assert!(
            !plan
                .actions
                .iter()
                .any(|a| matches!(a, Action::CopyConfig { .. } | Action::OwnConfigCopy { .. })),
            "{annotation:?}: {:?}",
            plan.actions
        );
        assert!(template_names(&created(&plan)[0]).contains(&"ConfigMap/app-config".to_string()));
    }
}

/// The first revision's world: its ReplicaSet made, the copies made, the status written.
fn first_revision() -> (Observed, ReplicaSet) {
    let ro = rollout(Some("true"), "app-config");
    let config = ConfigObserved {
        sources: [
            (cm("app-config"), Some("aaaaaaaaaa".into())),
            (secret("creds"), Some("ssssssssss".into())),
        ]
        .into(),
        copies: BTreeMap::new(),
    };
    let plan = reconcile(&observed(ro.clone(), config));
    let rs = created(&plan).remove(0);
    let mut ro = ro;
    ro.status = Some(plan.status.clone());
    let config = ConfigObserved {
        sources: [
            (cm("app-config"), Some("aaaaaaaaaa".into())),
            (secret("creds"), Some("ssssssssss".into())),
        ]
        .into(),
        copies: [
            (
                cm("app-config-aaaaaaaaaa"),
                copy_of("app-config", &["rollout-uid"]),
            ),
            (
                secret("creds-ssssssssss"),
                copy_of("creds", &["rollout-uid"]),
            ),
        ]
        .into(),
    };
    let mut world = observed(ro, config);
    world.replica_sets = vec![rs.clone()];
    (world, rs)
}

#[test]
fn copies_pass_to_the_replica_sets_that_read_them() {
    let (world, rs) = first_revision();
    let plan = reconcile(&world);
    assert!(
        created(&plan).is_empty(),
        "the same revision: {:?}",
        plan.actions
    );
    let owned: Vec<(&str, Vec<&str>)> = plan
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::OwnConfigCopy {
                name,
                owners,
                resource_version,
                ..
            } => {
                assert_eq!(resource_version.as_deref(), Some("7"));
                Some((
                    name.as_str(),
                    owners.iter().map(|o| o.uid.as_str()).collect(),
                ))
            }
            _ => None,
        })
        .collect();
    let rs_uid = rs.metadata.uid.clone().unwrap();
    assert_eq!(
        owned,
        [
            ("app-config-aaaaaaaaaa", vec![rs_uid.as_str()]),
            ("creds-ssssssssss", vec![rs_uid.as_str()])
        ]
    );
    // Once owned so, nothing more to write.
    let mut world = world;
    for copy in world.config.as_mut().unwrap().copies.values_mut() {
        copy.owners = [rs_uid.clone()].into();
    }
    let plan = reconcile(&world);
    assert!(
        !plan
            .actions
            .iter()
            .any(|a| matches!(a, Action::OwnConfigCopy { .. })),
        "{:?}",
        plan.actions
    );
}

#[test]
fn a_changed_config_map_is_a_new_revision_and_the_stable_pods_keep_the_old_copy() {
    let (mut world, rs) = first_revision();
    let first_hash = rs.pod_hash().unwrap().to_string();
    world
        .config
        .as_mut()
        .unwrap()
        .sources
        .insert(cm("app-config"), Some("bbbbbbbbbb".into()));
    let plan = reconcile(&world);
    assert!(plan.actions.contains(&Action::CopyConfig {
        kind: ConfigKind::ConfigMap,
        source: "app-config".into(),
        hash: "bbbbbbbbbb".into(),
        copy: "app-config-bbbbbbbbbb".into(),
    }));
    let new = created(&plan);
    assert_eq!(new.len(), 1, "{:?}", plan.actions);
    assert_ne!(new[0].pod_hash(), Some(first_hash.as_str()));
    assert!(template_names(&new[0]).contains(&"ConfigMap/app-config-bbbbbbbbbb".to_string()));
    assert!(
        template_names(&new[0]).contains(&"Secret/creds-ssssssssss".to_string()),
        "the unchanged Secret's copy"
    );
    assert_eq!(
        plan.status.current_pod_hash,
        new[0].pod_hash().map(str::to_string)
    );
    // The stable ReplicaSet is not touched: its pods read the old copy.
    assert!(
        template_names(&world.replica_sets[0])
            .contains(&"ConfigMap/app-config-aaaaaaaaaa".to_string())
    );
}

#[test]
fn an_absent_source_keeps_the_copy_the_current_revision_reads() {
    let (mut world, _) = first_revision();
    world
        .config
        .as_mut()
        .unwrap()
        .sources
        .insert(cm("app-config"), None);
    let plan = reconcile(&world);
    assert!(
        created(&plan).is_empty(),
        "no update to pods that cannot start: {:?}",
        plan.actions
    );
    assert!(
        !plan
            .actions
            .iter()
            .any(|a| matches!(a, Action::CopyConfig { .. }))
    );
}

#[test]
fn a_template_that_names_a_copy_is_that_copys_revision() {
    // An undo writes the earlier ReplicaSet's template, copies' names and all, back.
    let (mut world, rs) = first_revision();
    let mut template = rs.spec.as_ref().unwrap().template.clone().unwrap();
    if let Some(labels) = template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.remove(crate::labels::POD_TEMPLATE_HASH);
    }
    world.rollout.spec.template = Some(template);
    let config = world.config.as_mut().unwrap();
    config.sources.clear();
    let resolved = resolve(&world, world.config.as_ref().unwrap()).unwrap();
    assert!(resolved.1.is_empty());
    let plan = reconcile(&world);
    assert!(created(&plan).is_empty(), "{:?}", plan.actions);
    assert_eq!(plan.status.current_pod_hash.as_deref(), rs.pod_hash());
}

#[test]
fn sources_to_read_leave_out_the_copies() {
    let (world, _) = first_revision();
    let copies = &world.config.as_ref().unwrap().copies;
    assert_eq!(
        sources_to_read(&world.rollout, copies),
        [cm("app-config"), secret("creds")]
    );
    let mut ro = world.rollout.clone();
    let mut template = serde_json::to_value(ro.spec.template.as_ref().unwrap()).unwrap();
    template["spec"]["volumes"][0]["configMap"]["name"] = Value::from("app-config-aaaaaaaaaa");
    ro.spec.template = Some(serde_json::from_value(template).unwrap());
    assert_eq!(
        sources_to_read(&ro, copies),
        [cm("app-config"), secret("creds")]
    );
}

#[test]
fn copy_names_fit_an_object_name() {
    assert_eq!(copy_name("app", "0123456789"), "app-0123456789");
    let long = "a".repeat(250);
    let name = copy_name(&long, "0123456789");
    assert_eq!(name.len(), 253);
    assert!(name.ends_with("a-0123456789"));
    let dashed = format!("{}-b", "a".repeat(241));
    assert_eq!(
        copy_name(&dashed, "0123456789"),
        format!("{}-0123456789", "a".repeat(241))
    );
}

#[test]
fn the_content_hash_tells_contents_apart_in_any_order() {
    let h = |fields: &[(&str, &str)]| content_hash(fields.iter().map(|(k, v)| (*k, v.as_bytes())));
    assert_eq!(h(&[("a", "1"), ("b", "2")]), h(&[("b", "2"), ("a", "1")]));
    assert_ne!(h(&[("a", "bc")]), h(&[("ab", "c")]));
    assert_ne!(h(&[("a", "1")]), h(&[("a", "2")]));
    assert_eq!(h(&[]).len(), HASH_LEN);
}

/// The ConfigMap set back to the content of a revision deleted beyond the history limit, whose
/// copy is still there, owned by that ReplicaSet only: the garbage collector is about to take
/// it. The Rollout takes the copy before the ReplicaSet that reads it again is created.
#[test]
fn a_copy_whose_owners_are_gone_is_claimed_before_a_replica_set_reads_it() {
    let (mut world, _) = first_revision();
    world.replica_sets.clear();
    world.rollout.status = None;
    for copy in world.config.as_mut().unwrap().copies.values_mut() {
        copy.owners = ["uid-of-a-deleted-rs".to_string()].into();
    }
    let plan = reconcile(&world);
    let create = plan
        .actions
        .iter()
        .position(|a| matches!(a, Action::CreateReplicaSet { .. }))
        .expect("a ReplicaSet for the revision");
    assert!(template_names(&created(&plan)[0]).contains(&"ConfigMap/app-config-aaaaaaaaaa".into()));
    for copy in ["app-config-aaaaaaaaaa", "creds-ssssssssss"] {
        let writes: Vec<usize> = plan
            .actions
            .iter()
            .enumerate()
            .filter(|(_, a)| matches!(a, Action::OwnConfigCopy { name, .. } if name == copy))
            .map(|(i, _)| i)
            .collect();
        assert_eq!(
            writes.len(),
            1,
            "{copy}: one owner write: {:?}",
            plan.actions
        );
        assert!(writes[0] < create, "{copy}: held first: {:?}", plan.actions);
        let Action::OwnConfigCopy {
            owners,
            resource_version,
            ..
        } = &plan.actions[writes[0]]
        else {
            unreachable!()
        };
        assert_eq!(resource_version.as_deref(), Some("7"));
        assert!(owners.iter().any(|o| o.uid == "rollout-uid"), "{owners:?}");
    }
}
