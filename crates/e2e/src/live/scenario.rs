//! A generated scenario: a Rollout (canary or blue-green, steps, surge, deadlines, NGINX
//! routing, analysis and experiment steps) and a script of user actions and pod faults, all
//! from one seed.

use serde_json::{Value, json};

/// A deterministic stream of numbers from a seed (SplitMix64).
struct Dice(u64);

impl Dice {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<T: Clone>(&mut self, from: &[T]) -> T {
        from[self.below(from.len() as u64) as usize].clone()
    }
}

/// What is wrong with a version's pods (the fake kubelet's rules read it from the pod spec).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    None,
    /// The image is never pulled: `ErrImagePull`, then `ImagePullBackOff`.
    ImagePull,
    /// The container exits with 1 and restarts with a back-off: `CrashLoopBackOff`.
    CrashLoop,
    /// The container runs but never turns Ready.
    NeverReady,
}

/// What a user (or a cluster) does to the Rollout between settle points.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// A new pod template: a new image, maybe with a fault.
    SetImage {
        version: u32,
        fault: Fault,
    },
    Promote,
    PromoteFull,
    Abort,
    Retry,
    Pause,
    Resume,
    Scale(i32),
    /// `kubectl argo rollouts undo`: the template of the revision before the newest.
    Undo,
    /// `kubectl argo rollouts restart`: `spec.restartAt` now.
    Restart,
}

/// The AnalysisTemplate whose Job succeeds, and the one whose Job fails.
pub const PASSING_TEMPLATE: &str = "passes";
pub const FAILING_TEMPLATE: &str = "fails";

/// One generated scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub seed: u64,
    pub blue_green: bool,
    pub replicas: i32,
    /// The Rollout's `spec.strategy.<canary|blueGreen>`.
    pub strategy: Value,
    pub progress_deadline: Option<(i64, bool)>,
    pub actions: Vec<Action>,
}

fn analysis_template(d: &mut Dice) -> &'static str {
    // Mostly passing: a failing analysis ends the update, and the rest of the script then
    // only shows aborted rollouts.
    if d.chance(70) {
        PASSING_TEMPLATE
    } else {
        FAILING_TEMPLATE
    }
}

fn canary(d: &mut Dice) -> Value {
    let mut steps = Vec::new();
    for _ in 0..d.below(5) {
        steps.push(match d.below(11) {
            0..=3 => json!({ "setWeight": d.pick(&[20, 34, 50, 75]) }),
            4 | 5 => json!({"pause": {}}),
            6 | 7 => json!({"pause": {"duration": "2s"}}),
            8 | 9 => json!({"analysis": {"templates": [{"templateName": analysis_template(d)}]}}),
            _ => json!({"experiment": {
                "duration": "3s",
                "templates": [{"name": "probe", "specRef": d.pick(&["canary", "stable"])}]
            }}),
        });
    }
    let mut canary = json!({ "steps": steps });
    if d.chance(30) {
        canary["maxSurge"] = d.pick(&[json!(0), json!(1), json!("50%")]);
        canary["maxUnavailable"] = json!(1);
    }
    if d.chance(25) {
        canary["canaryService"] = json!("canary");
        canary["stableService"] = json!("stable");
        canary["trafficRouting"] = json!({"nginx": {"stableIngress": "web"}});
    }
    if d.chance(15) {
        // Argo runs it also without traffic routing; so must Sluice.
        canary["abortScaleDownDelaySeconds"] = json!(5);
    }
    if d.chance(15) {
        let template = analysis_template(d);
        let mut background = json!({"templates": [{"templateName": template}]});
        if template == FAILING_TEMPLATE {
            // A failing background analysis races the steps (which of the Job and the canary
            // pods is done first is up to the cluster): a first step that waits for a
            // promotion lets it fail first under both controllers.
            if let Some(steps) = canary["steps"].as_array_mut() {
                steps.insert(0, json!({"pause": {}}));
            }
        } else if d.chance(50) {
            background["startingStep"] = json!(d.below(3));
        }
        canary["analysis"] = background;
    }
    canary
}

fn blue_green(d: &mut Dice) -> Value {
    let mut bg = json!({"activeService": "active", "scaleDownDelaySeconds": 2});
    if d.chance(50) {
        bg["previewService"] = json!("preview");
    }
    if d.chance(50) {
        bg["autoPromotionEnabled"] = json!(false);
    }
    if d.chance(25) {
        bg["previewReplicaCount"] = json!(1);
    }
    if d.chance(20) {
        bg["prePromotionAnalysis"] = json!({"templates": [{"templateName": analysis_template(d)}]});
    }
    if d.chance(20) {
        bg["postPromotionAnalysis"] =
            json!({"templates": [{"templateName": analysis_template(d)}]});
    }
    bg
}

impl Scenario {
    /// The scenario of `seed`.
    pub fn generate(seed: u64) -> Scenario {
        let mut d = Dice(seed);
        let blue_green_strategy = d.chance(30);
        let replicas = 1 + d.below(3) as i32;
        let strategy = if blue_green_strategy {
            blue_green(&mut d)
        } else {
            canary(&mut d)
        };
        let progress_deadline = d
            .chance(25)
            .then(|| (10 + d.below(10) as i64, d.chance(50)));
        let mut actions = Vec::new();
        let mut version = 1;
        for _ in 0..(2 + d.below(4)) {
            let action = match d.below(12) {
                0..=3 => {
                    version += 1;
                    let fault = match d.below(10) {
                        0 => Fault::ImagePull,
                        1 => Fault::CrashLoop,
                        2 => Fault::NeverReady,
                        _ => Fault::None,
                    };
                    Action::SetImage { version, fault }
                }
                4 => Action::Promote,
                5 => Action::PromoteFull,
                6 => Action::Abort,
                7 => Action::Retry,
                8 => d.pick(&[Action::Pause, Action::Resume]),
                9 => Action::Scale(1 + d.below(3) as i32),
                10 => Action::Undo,
                _ => Action::Restart,
            };
            actions.push(action);
        }
        // Every scenario updates at least once.
        if !actions.iter().any(|a| matches!(a, Action::SetImage { .. })) {
            actions.insert(
                0,
                Action::SetImage {
                    version: 2,
                    fault: Fault::None,
                },
            );
        }
        Scenario {
            seed,
            blue_green: blue_green_strategy,
            replicas,
            strategy,
            progress_deadline,
            actions,
        }
    }

    /// The pod template of a version with a fault.
    pub fn template(version: u32, fault: Fault) -> Value {
        let image = match fault {
            Fault::ImagePull => format!("registry.invalid/app:does-not-exist-{version}"),
            _ => format!("registry.invalid/app:{version}"),
        };
        let mut container = json!({"name": "web", "image": image});
        if fault == Fault::CrashLoop {
            container["command"] = json!(["/bad-command"]);
        }
        let mut metadata = json!({"labels": {"app": "web"}});
        if fault == Fault::NeverReady {
            metadata["annotations"] = json!({"sluice.dev/never-ready": "true"});
        }
        json!({"metadata": metadata, "spec": {"containers": [container]}})
    }

    /// The Rollout, the Services, Ingress and AnalysisTemplates it names, as YAML documents
    /// (JSON is YAML).
    pub fn manifests(&self) -> String {
        let mut spec = json!({
            "replicas": self.replicas,
            "revisionHistoryLimit": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": Self::template(1, Fault::None),
            "strategy": if self.blue_green {
                json!({"blueGreen": self.strategy})
            } else {
                json!({"canary": self.strategy})
            },
        });
        if let Some((seconds, abort)) = self.progress_deadline {
            spec["progressDeadlineSeconds"] = json!(seconds);
            spec["progressDeadlineAbort"] = json!(abort);
        }
        let rollout = json!({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
            "metadata": {"name": "web"}, "spec": spec,
        });
        // What the Rollout names comes first, as a person would create it: a Rollout whose
        // Service is missing is InvalidSpec until it appears, which both controllers handle,
        // but Argo then can lose an event to a write conflict (a race no scenario means to
        // compare).
        let mut docs = Vec::new();
        for name in ["active", "preview", "canary", "stable"] {
            docs.push(json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": name},
                "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}
            }));
        }
        docs.push(json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "web"},
            "spec": {"ingressClassName": "nginx", "rules": [{"host": "web.example", "http": {"paths": [{
                "path": "/", "pathType": "Prefix",
                "backend": {"service": {"name": "stable", "port": {"number": 80}}}
            }]}}]}
        }));
        for (name, command) in [
            (PASSING_TEMPLATE, json!(["sh", "-c", "sleep 1"])),
            (FAILING_TEMPLATE, json!(["/bad-command"])),
        ] {
            docs.push(json!({
                "apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisTemplate",
                "metadata": {"name": name},
                "spec": {"metrics": [{"name": "job", "provider": {"job": {"spec": {
                    "backoffLimit": 0,
                    "template": {"spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "check", "image": "busybox", "command": command}]
                    }}
                }}}}]}
            }));
        }
        docs.push(rollout);
        docs.iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n---\n")
    }
}
