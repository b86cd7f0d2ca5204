//! The API server's side of a login: who a pasted token belongs to, a client that acts as a
//! logged-in user (impersonation by the dashboard's own identity), whether a user may read a
//! namespace's Rollouts, and the Event that records what a user did.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{Api, PostParams};
use kube::config::AuthInfo;
use kube::{Client, Config};
use serde_json::Value;

use super::session::Identity;

/// How long an answer of the API server on a user's read access is reused: RBAC changes
/// show within this, and a page's requests do not each cost a review.
const READ_ANSWER_TTL: Duration = Duration::from_secs(10);
/// Clients and answers kept, at most; past it they are dropped and made again.
const KEPT: usize = 1_000;

/// The API server's answer on a user's read access to a namespace, and when it was given.
type ReadAnswer = (Result<(), String>, Instant);

pub struct Users {
    base: Config,
    clients: Mutex<HashMap<Identity, Client>>,
    reads: Mutex<HashMap<(Identity, String), ReadAnswer>>,
}

impl Users {
    pub fn new(base: Config) -> Self {
        Self {
            base,
            clients: Mutex::new(HashMap::new()),
            reads: Mutex::new(HashMap::new()),
        }
    }

    /// A client whose every request the API server takes as `identity`'s.
    pub fn client(&self, identity: &Identity) -> anyhow::Result<Client> {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(client) = clients.get(identity) {
            return Ok(client.clone());
        }
        let mut config = self.base.clone();
        config.auth_info.impersonate = Some(identity.user.clone());
        config.auth_info.impersonate_groups =
            (!identity.groups.is_empty()).then(|| identity.groups.clone());
        let client = Client::try_from(config).context("creating a client for the user")?;
        if clients.len() >= KEPT {
            clients.clear();
        }
        clients.insert(identity.clone(), client.clone());
        Ok(client)
    }

    /// Who the API server says `token` belongs to (a SelfSubjectReview made with the token
    /// itself, so the dashboard needs no right to review tokens).
    pub async fn whose(&self, token: &str) -> anyhow::Result<Identity> {
        let mut config = self.base.clone();
        config.auth_info = serde_json::from_value::<AuthInfo>(serde_json::json!({"token": token}))
            .context("reading the token")?;
        let client = Client::try_from(config).context("creating a client for the token")?;
        let review = Api::<SelfSubjectReview>::all(client)
            .create(&PostParams::default(), &SelfSubjectReview::default())
            .await
            .map_err(|e| match e {
                kube::Error::Api(s) if s.code == 401 => {
                    anyhow::anyhow!("the API server does not accept this token")
                }
                other => {
                    anyhow::Error::new(other).context("asking the API server whose token it is")
                }
            })?;
        let info = review
            .status
            .and_then(|s| s.user_info)
            .context("the API server's review names no user")?;
        let user = info
            .username
            .filter(|u| !u.is_empty())
            .context("the token names no user")?;
        Ok(Identity {
            user,
            groups: info.groups.unwrap_or_default(),
        })
    }

    /// `Ok` if `identity` may list the Rollouts of `namespace`; else the refusal, worded as
    /// the API server words its own.
    pub async fn may_read(&self, identity: &Identity, namespace: &str) -> Result<(), String> {
        let key = (identity.clone(), namespace.to_owned());
        if let Some((answer, at)) = self
            .reads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            && at.elapsed() < READ_ANSWER_TTL
        {
            return answer.clone();
        }
        let answer = self.review(identity, namespace).await;
        // A failure to ask is not remembered: the next request asks again.
        if let Ok(answer) = &answer {
            let mut reads = self.reads.lock().unwrap_or_else(|e| e.into_inner());
            if reads.len() >= KEPT {
                reads.clear();
            }
            reads.insert(key, (answer.clone(), Instant::now()));
        }
        answer.unwrap_or_else(|e| Err(format!("{e:#}")))
    }

    async fn review(
        &self,
        identity: &Identity,
        namespace: &str,
    ) -> anyhow::Result<Result<(), String>> {
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    namespace: Some(namespace.to_owned()),
                    verb: Some("list".into()),
                    group: Some("argoproj.io".into()),
                    resource: Some("rollouts".into()),
                    ..ResourceAttributes::default()
                }),
                ..SelfSubjectAccessReviewSpec::default()
            },
            ..SelfSubjectAccessReview::default()
        };
        let answer = Api::<SelfSubjectAccessReview>::all(self.client(identity)?)
            .create(&PostParams::default(), &review)
            .await
            .context("asking the API server what the user may read")?;
        let allowed = answer.status.as_ref().is_some_and(|s| s.allowed);
        Ok(if allowed {
            Ok(())
        } else {
            Err(format!(
                "rollouts.argoproj.io is forbidden: User {:?} cannot list resource \"rollouts\" \
                 in API group \"argoproj.io\" in the namespace {namespace:?}",
                identity.user
            ))
        })
    }
}

/// The Event that records `identity`'s action on `rollout` (as it is afterwards), posted with
/// the dashboard's own client so that a user cannot act without it being recorded.
pub fn action_event(identity: &Identity, via: &str, rollout: &Value, what: &str) -> Option<Event> {
    let meta = rollout.get("metadata")?;
    let name = meta.get("name")?.as_str()?;
    let namespace = meta.get("namespace")?.as_str()?;
    let now = Time(jiff::Timestamp::now());
    Some(Event {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}.")),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some("argoproj.io/v1alpha1".into()),
            kind: Some("Rollout".into()),
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            uid: meta.get("uid").and_then(Value::as_str).map(str::to_owned),
            ..ObjectReference::default()
        },
        reason: Some("DashboardAction".into()),
        message: Some(format!(
            "{} {what} from the dashboard (logged in with {via})",
            identity.user
        )),
        type_: Some("Normal".into()),
        source: Some(EventSource {
            component: Some("sluice-dashboard".into()),
            host: None,
        }),
        reporting_component: Some("sluice-dashboard".into()),
        reporting_instance: std::env::var("HOSTNAME").ok(),
        first_timestamp: Some(now.clone()),
        last_timestamp: Some(now),
        count: Some(1),
        ..Event::default()
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_event_names_the_user_and_the_rollout() {
        let who = Identity {
            user: "bob@example.test".into(),
            groups: vec!["deployers".into()],
        };
        let rollout = json!({"metadata": {"name": "shop", "namespace": "team", "uid": "u-1"}});
        let event = action_event(&who, "oidc", &rollout, "promoted the Rollout").unwrap();
        assert_eq!(
            event.message.as_deref(),
            Some("bob@example.test promoted the Rollout from the dashboard (logged in with oidc)")
        );
        assert_eq!(event.involved_object.uid.as_deref(), Some("u-1"));
        assert_eq!(event.metadata.namespace.as_deref(), Some("team"));
        assert!(action_event(&who, "token", &json!({}), "x").is_none());
    }
}
