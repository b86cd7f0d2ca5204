//! The scenario script: each action waits for its condition on the Rollout's status, then
//! for a random delay, then acts as a user or operator would.

use serde_json::{Value, json};

use super::{CHAOS_TAIL_MS, Ev, SETTLE_MS, Sim};
use crate::api_model::{Endpoint, Kind};
use crate::invariants::has_pause;
use crate::scenarios::{CONFIG_MAP, Op, Target, Wait, config_data};

impl Sim {
    /// Arms the next script action once its wait condition holds.
    pub(super) fn check_script(&mut self) {
        if self.script_armed || self.script_pos >= self.setup.script.len() {
            return;
        }
        let step = &self.setup.script[self.script_pos];
        if !self.holds(&step.wait) {
            return;
        }
        let delay = step.delay_ms;
        self.script_armed = true;
        self.after(delay, Ev::Script);
    }

    fn holds(&self, wait: &Wait) -> bool {
        let Some(ro) = self.api.get(Kind::Rollout, "demo") else {
            return false;
        };
        let generation = ro
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .map(|g| g.to_string());
        let observed = ro
            .pointer("/status/observedGeneration")
            .and_then(Value::as_str)
            .map(str::to_string);
        if generation != observed {
            return false;
        }
        match wait {
            Wait::Now => true,
            Wait::Phase(p) => ro.pointer("/status/phase").and_then(Value::as_str) == Some(p),
            Wait::CanaryStep(i) => {
                ro.pointer("/status/currentStepIndex")
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
                    >= i64::from(*i)
            }
            Wait::UpdateStep(i) => {
                let status = |field: &str| ro.pointer(&format!("/status/{field}"));
                status("currentPodHash") != status("stableRS")
                    && status("currentStepIndex")
                        .and_then(Value::as_i64)
                        .unwrap_or(0)
                        >= i64::from(*i)
            }
            Wait::Paused(reason) => has_pause(ro, reason),
            Wait::StableConfig(tag) => {
                let data = config_data(tag);
                crate::invariants::config_rollouts::stable_reads(
                    &self.api, "demo", CONFIG_MAP, &data,
                )
            }
        }
    }

    pub(super) fn fire_script(&mut self) {
        let Some(step) = self.setup.script.get(self.script_pos).cloned() else {
            return;
        };
        self.script_pos += 1;
        self.script_armed = false;
        self.wait_since = self.now_ms;
        match step.op {
            Op::SetConfig(tag) => {
                let patch = json!({"data": config_data(tag)});
                let _ = self
                    .api
                    .patch(Kind::ConfigMap, CONFIG_MAP, &patch, Endpoint::Main);
                self.log(format!("user: set configmap/{CONFIG_MAP} to {tag}"));
            }
            Op::ExpectConfig(tag) => self.checker.expect_config(CONFIG_MAP, config_data(tag)),
            Op::SetImage(image) => {
                // A merge patch replaces the whole list: the container keeps what else it had
                // (its ports), as `kubectl set image` leaves it.
                let mut app = self
                    .api
                    .get(Kind::Rollout, "demo")
                    .and_then(|ro| ro.pointer("/spec/template/spec/containers/0"))
                    .cloned()
                    .unwrap_or_else(|| json!({"name": "app"}));
                app["image"] = json!(image);
                let patch = json!({"spec": {"template": {"spec": {"containers": [app]}}}});
                let _ = self
                    .api
                    .patch(Kind::Rollout, "demo", &patch, Endpoint::Main);
                self.log(format!("user: set image {image}"));
            }
            Op::SetStatefulSetImage(image) => {
                let patch = json!({"spec": {"template": {"spec": {"containers": [
                    {"name": "app", "image": image}
                ]}}}});
                let _ = self
                    .api
                    .patch(Kind::StatefulSet, "demo", &patch, Endpoint::Main);
                self.log(format!("user: set image {image} on statefulset/demo"));
            }
            Op::SetDaemonSetImage(image) => {
                let patch = json!({"spec": {"template": {"spec": {"containers": [
                    {"name": "app", "image": image}
                ]}}}});
                let _ = self
                    .api
                    .patch(Kind::DaemonSet, "demo", &patch, Endpoint::Main);
                self.log(format!("user: set image {image} on daemonset/demo"));
            }
            Op::AddNode(name) => {
                let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}});
                let now = self.now();
                let _ = self.api.create(Kind::Node, node, now);
                self.log(format!("cluster: node/{name} joins"));
            }
            Op::RemoveNode(name) => {
                let _ = self.api.delete(Kind::Node, &name, None);
                self.log(format!("cluster: node/{name} leaves"));
            }
            Op::Crash(t) => {
                let i = self.target(&t);
                if self.replicas[i].up {
                    self.log(format!("script: crash {}", self.replicas[i].identity()));
                    self.crash(i);
                }
            }
            Op::Partition(t, len) => {
                let i = self.target(&t);
                self.partition(i, len);
            }
            Op::Promote => {
                let patch = json!({"status": {"pauseConditions": null}});
                let _ = self
                    .api
                    .patch(Kind::Rollout, "demo", &patch, Endpoint::Status);
                self.log("user: promote rollout/demo".into());
            }
            Op::PromoteFull => {
                let patch = json!({"status": {"promoteFull": true}});
                let _ = self
                    .api
                    .patch(Kind::Rollout, "demo", &patch, Endpoint::Status);
                self.log("user: promote --full rollout/demo".into());
            }
            Op::Abort => {
                let patch = json!({"status": {"abort": true}});
                let _ = self
                    .api
                    .patch(Kind::Rollout, "demo", &patch, Endpoint::Status);
                self.log("user: abort rollout/demo".into());
            }
            Op::ExpectPaused {
                reason,
                background_runs,
            } => {
                self.log(format!("script: expect rollout/demo paused ({reason})"));
                self.checker
                    .expect_paused(&self.api, self.now_ms, "demo", reason, background_runs);
            }
            Op::FailLeaseRenewals(t, len) => {
                let i = self.target(&t);
                self.lease_fail_until[i] = self.now_ms + len;
                self.log(format!(
                    "script: lease requests of {} fail for {len} ms",
                    self.replicas[i].identity()
                ));
            }
        }
        if self.script_pos >= self.setup.script.len() {
            let calm_at = self.now_ms + CHAOS_TAIL_MS;
            self.at(calm_at, Ev::Calm);
            self.end_ms = calm_at + SETTLE_MS;
        }
    }

    /// The replica a script action means.
    fn target(&self, t: &Target) -> usize {
        match t {
            Target::Leader => self
                .replicas
                .iter()
                .position(|r| r.up && self.last_holder.as_deref() == Some(r.identity().as_str()))
                .unwrap_or(0),
        }
    }
}
