//! Where Secret data comes from: the cluster, or a map in memory for tests and simulations.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Secret;

/// The decoded `data` of a Secret, key by key.
pub type SecretData = BTreeMap<String, String>;

/// A failed Secret lookup (not a missing Secret, which is `Ok(None)`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SecretError(pub String);

/// Reads Secrets by namespace and name.
pub trait SecretSource: Send + Sync {
    /// The data of Secret `name` in `namespace`, or `None` when there is no such Secret.
    fn get<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<SecretData>, SecretError>>;
}

/// Secrets read from the API server.
#[derive(Clone)]
pub struct KubeSecrets {
    client: kube::Client,
}

impl KubeSecrets {
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

impl SecretSource for KubeSecrets {
    fn get<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<SecretData>, SecretError>> {
        Box::pin(async move {
            let api: kube::Api<Secret> = kube::Api::namespaced(self.client.clone(), namespace);
            match api.get_opt(name).await {
                Ok(secret) => Ok(secret.map(decode)),
                Err(err) => Err(SecretError(format!(
                    "failed to read secret \"{name}\" in namespace \"{namespace}\": {err}"
                ))),
            }
        })
    }
}

/// A Secret's `data` as text (invalid UTF-8 is replaced, as no provider takes binary keys).
pub fn decode(secret: Secret) -> SecretData {
    let mut out: SecretData = secret
        .data
        .into_iter()
        .flatten()
        .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
        .collect();
    // `stringData` is write-only on a real server, but objects built in memory may carry it.
    for (k, v) in secret.string_data.into_iter().flatten() {
        out.entry(k).or_insert(v);
    }
    out
}

/// Secrets kept in memory.
#[derive(Clone, Debug, Default)]
pub struct MemorySecrets {
    secrets: Arc<RwLock<BTreeMap<(String, String), SecretData>>>,
}

impl MemorySecrets {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces Secret `name` in `namespace`.
    pub fn insert<K, V>(
        &self,
        namespace: &str,
        name: &str,
        data: impl IntoIterator<Item = (K, V)>,
    ) -> &Self
    where
        K: Into<String>,
        V: Into<String>,
    {
        let data = data
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        let mut secrets = self.secrets.write().unwrap_or_else(|e| e.into_inner());
        secrets.insert((namespace.to_owned(), name.to_owned()), data);
        self
    }
}

impl SecretSource for MemorySecrets {
    fn get<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<SecretData>, SecretError>> {
        let secrets = self.secrets.read().unwrap_or_else(|e| e.into_inner());
        let found = secrets
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned();
        Box::pin(async move { Ok(found) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    #[tokio::test]
    async fn memory_secrets_by_namespace_and_name() {
        let secrets = MemorySecrets::new();
        secrets.insert("ns", "s", [("k", "v")]);
        assert_eq!(
            secrets.get("ns", "s").await.unwrap(),
            Some(BTreeMap::from([("k".into(), "v".into())]))
        );
        assert_eq!(secrets.get("other", "s").await.unwrap(), None);
        assert_eq!(secrets.get("ns", "t").await.unwrap(), None);
    }

    #[test]
    fn decode_reads_data_and_string_data() {
        let secret = Secret {
            data: Some(BTreeMap::from([(
                "a".to_owned(),
                ByteString(b"1".to_vec()),
            )])),
            string_data: Some(BTreeMap::from([
                ("a".to_owned(), "ignored".to_owned()),
                ("b".to_owned(), "2".to_owned()),
            ])),
            ..Default::default()
        };
        assert_eq!(
            decode(secret),
            BTreeMap::from([("a".into(), "1".into()), ("b".into(), "2".into())])
        );
    }
}
