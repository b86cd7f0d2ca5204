//! `kubectl sluice create` on the real control plane: `-f` creates each kind Argo's plugin
//! creates (an AnalysisTemplate, a ClusterAnalysisTemplate, a Rollout, an Experiment, an
//! AnalysisRun) with Argo's lines, and refuses a misspelt field or another kind naming it,
//! creating nothing; `create analysisrun` builds a run from a template in the cluster or a
//! file, with its arguments filled in, the name, generateName and instance-id asked for, and
//! Argo's error naming an argument left without a value. About two seconds; no controller runs.

use std::path::Path;
use std::process::{Command, Output};

use kube::Api;
use kube::api::{DeleteParams, ListParams};
use sluice_api::Rollout;
use sluice_api::analysis::{AnalysisRun, AnalysisTemplate, ClusterAnalysisTemplate};
use sluice_api::experiment::Experiment;
use sluice_testenv::harness::{TestEnv, TestNamespace};

const TEMPLATE: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata:
  name: success-rate
  labels: {team: web}
spec:
  args:
  - name: service-name
  - name: threshold
    value: "0.95"
  metrics:
  - name: success
    successCondition: result == 'ok'
    provider:
      web:
        url: "http://{{args.service-name}}/health"
"#;

const ROLLOUT: &str = r#"apiVersion: argoproj.io/v1alpha1
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
        image: nginx:1.0
  strategy:
    canary:
      steps:
      - pause: {}
"#;

const EXPERIMENT: &str = r#"{"apiVersion": "argoproj.io/v1alpha1", "kind": "Experiment",
 "metadata": {"name": "exp"},
 "spec": {"duration": "1m", "templates": [{"name": "base", "replicas": 1,
   "selector": {"matchLabels": {"app": "exp"}},
   "template": {"metadata": {"labels": {"app": "exp"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.0"}]}}}]}}
"#;

const RUN: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: AnalysisRun
metadata:
  name: by-hand
spec:
  metrics:
  - name: m
    provider:
      web: {url: "http://example/"}
"#;

fn sluice(env: &TestEnv, ns: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kubectl-sluice"))
        .arg("--kubeconfig")
        .arg(env.kubeconfig_path())
        .args(["-n", ns])
        .args(args)
        .output()
        .expect("kubectl-sluice runs")
}

fn ok(out: Output) -> String {
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

fn failed(out: Output) -> String {
    assert!(!out.status.success(), "{out:?}");
    String::from_utf8(out.stderr).unwrap()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

#[tokio::test]
async fn create_makes_argos_objects() {
    let env = TestEnv::with_crds().await.unwrap();
    let ns = TestNamespace::create(&env, "cli-create").await.unwrap();
    let n = ns.name();
    let dir = std::env::temp_dir().join(format!("sluice-{n}"));
    std::fs::create_dir_all(&dir).unwrap();
    let cat_name = format!("{n}-cat");
    let cat = TEMPLATE
        .replace("kind: AnalysisTemplate", "kind: ClusterAnalysisTemplate")
        .replace("name: success-rate", &format!("name: {cat_name}"));

    // A misspelt field: nothing of the file is created, and the error names the object.
    let bad = write(
        &dir,
        "bad.yaml",
        &format!(
            "{TEMPLATE}---\n{}",
            ROLLOUT.replace("replicas: 1", "replicas: 1\n  replica: 2")
        ),
    );
    let err = failed(sluice(&env, n, &["create", "-f", &bad]));
    assert!(
        err.contains("Rollout \"web\": unknown field \"spec.replica\""),
        "{err}"
    );
    let err = failed(sluice(
        &env,
        n,
        &[
            "create",
            "-f",
            &write(
                &dir,
                "svc.yaml",
                "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n",
            ),
        ],
    ));
    assert!(err.contains("creates of /Service unsupported"), "{err}");
    let templates: Api<AnalysisTemplate> = ns.api();
    assert!(
        templates
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    // Every kind, from YAML and JSON files.
    let out = ok(sluice(
        &env,
        n,
        &[
            "create",
            "-f",
            &write(&dir, "at.yaml", TEMPLATE),
            "-f",
            &write(&dir, "cat.yaml", &cat),
            "-f",
            &write(&dir, "ro.yaml", ROLLOUT),
            "-f",
            &write(&dir, "exp.json", EXPERIMENT),
            "-f",
            &write(&dir, "ar.yaml", RUN),
        ],
    ));
    assert_eq!(
        out,
        format!(
            "analysistemplate.argoproj.io/success-rate created\n\
             analysistemplate.argoproj.io/{cat_name} created\n\
             rollout.argoproj.io/web created\n\
             experiment.argoproj.io/exp created\n\
             analysisrun.argoproj.io/by-hand created\n"
        )
    );
    let template = templates.get("success-rate").await.unwrap();
    assert_eq!(template.spec.args.as_ref().map(Vec::len), Some(2));
    let cats: Api<ClusterAnalysisTemplate> = Api::all(env.client());
    cats.get(&cat_name).await.unwrap();
    assert_eq!(
        ns.api::<Rollout>().get("web").await.unwrap().spec.replicas,
        Some(1)
    );
    ns.api::<Experiment>().get("exp").await.unwrap();
    let runs: Api<AnalysisRun> = ns.api();
    runs.get("by-hand").await.unwrap();
    let err = failed(sluice(
        &env,
        n,
        &["create", "-f", &write(&dir, "ro2.yaml", ROLLOUT)],
    ));
    assert!(err.contains("creating Rollout \"web\""), "{err}");
    assert!(err.contains("already exists"), "{err}");

    // An argument without a value is named; nothing is created.
    let err = failed(sluice(
        &env,
        n,
        &["create", "analysisrun", "--from", "success-rate"],
    ));
    assert!(err.contains("AnalysisTemplate \"success-rate\""), "{err}");
    assert!(err.contains("args.service-name was not resolved"), "{err}");
    let err = failed(sluice(&env, n, &["create", "ar", "--from", "missing"]));
    assert!(
        err.contains("analysistemplates.argoproj.io \"missing\" not found"),
        "{err}"
    );
    let err = failed(sluice(&env, n, &["create", "ar"]));
    assert!(
        err.contains("one of --from or --from-file must be specified"),
        "{err}"
    );

    // From the cluster's template, named, with the instance id.
    let out = ok(sluice(
        &env,
        n,
        &[
            "create",
            "analysisrun",
            "--from",
            "success-rate",
            "-a",
            "service-name=checkout",
            "--name",
            "named-run",
            "--instance-id",
            "blue",
        ],
    ));
    assert_eq!(out, "analysisrun.argoproj.io/named-run created\n");
    let run = runs.get("named-run").await.unwrap();
    let args: Vec<(String, String)> = run
        .spec
        .args
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|a| (a.name.unwrap_or_default(), a.value.unwrap_or_default()))
        .collect();
    assert_eq!(
        args,
        [
            ("service-name".into(), "checkout".into()),
            ("threshold".into(), "0.95".into())
        ]
    );
    let labels = run.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("team").map(String::as_str), Some("web"));
    assert_eq!(
        labels
            .get("argo-rollouts.argoproj.io/controller-instance-id")
            .map(String::as_str),
        Some("blue")
    );
    assert_eq!(run.spec.metrics.as_ref().map(Vec::len), Some(1));

    // From the cluster-wide template (Argo's --global, also --from-cluster-template), with
    // a generated name from the template's; and from a file with --generate-name.
    let out = ok(sluice(
        &env,
        n,
        &[
            "create",
            "ar",
            "--from-cluster-template",
            "--from",
            &cat_name,
            "-a",
            "service-name=a",
        ],
    ));
    let generated = out
        .strip_prefix("analysisrun.argoproj.io/")
        .and_then(|rest| rest.strip_suffix(" created\n"))
        .unwrap();
    assert!(generated.starts_with(&format!("{cat_name}-")), "{out}");
    runs.get(generated).await.unwrap();
    let out = ok(sluice(
        &env,
        n,
        &[
            "create",
            "ar",
            "--from-file",
            &write(&dir, "at-file.yaml", TEMPLATE),
            "--generate-name",
            "from-file-",
            "-a",
            "service-name=b",
            "-a",
            "threshold=0.5",
        ],
    ));
    assert!(
        out.starts_with("analysisrun.argoproj.io/from-file-"),
        "{out}"
    );
    let all = runs.list(&ListParams::default()).await.unwrap().items;
    let from_file = all
        .iter()
        .find(|r| {
            r.metadata
                .name
                .as_deref()
                .unwrap_or("")
                .starts_with("from-file-")
        })
        .unwrap();
    let threshold = from_file.spec.args.as_ref().unwrap()[1].value.clone();
    assert_eq!(threshold.as_deref(), Some("0.5"));

    cats.delete(&cat_name, &DeleteParams::default())
        .await
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
