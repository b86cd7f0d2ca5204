//! The `rollouts-pod-template-hash` value, identical to Argo Rollouts'.
//!
//! Argo Rollouts hashes the bytes Go's `encoding/json` produces for the Rollout's
//! `corev1.PodTemplateSpec` with FNV-32a, appends the collision count when there is one,
//! and spells the decimal sum with Kubernetes' `SafeEncodeString`. Those bytes follow Go
//! struct declaration order and Go's `omitempty`, number and string rules, none of which
//! serde reproduces, so the template is re-encoded here from a table of the Go structs
//! generated from the k8s.io/api sources (`go_types.rs`).
//!
//! The bytes, and so every hash, changed with k8s.io/apimachinery v0.34, which tags
//! `metadata.creationTimestamp` `omitzero`: Argo Rollouts 1.9.0 and later leave an unset
//! timestamp out, earlier releases wrote `"creationTimestamp":null`. [`HashVersion`] names
//! the two; new ReplicaSets get the current one, and the earlier one is how a ReplicaSet
//! made by an earlier release is still found (`sluice_engine::pod_hash`).

mod bignum;
mod encode;
mod go_time;
#[rustfmt::skip]
mod go_types;
mod quantity;
mod table;

#[cfg(test)]
mod table_check;
#[cfg(test)]
mod tests;

use k8s_openapi::api::core::v1::PodTemplateSpec;

pub use go_time::TimeError;
pub use quantity::{QuantityError, round_up_to_milli};

/// Why a template could not be encoded as Go would.
#[derive(Debug, thiserror::Error)]
pub enum HashError {
    /// A field held a JSON value of a type Go cannot decode into the field.
    #[error("{path}: expected {expected}")]
    Type { path: String, expected: String },
    /// An integer did not fit the Go integer type of its field.
    #[error("{path}: {value} is out of range")]
    OutOfRange { path: String, value: String },
    #[error("{path}: invalid quantity {value:?}: {source}")]
    Quantity {
        path: String,
        value: String,
        source: QuantityError,
    },
    #[error("{path}: {source}")]
    Time { path: String, source: TimeError },
    /// The typed template could not be turned into JSON.
    #[error("cannot serialize the pod template: {0}")]
    Serialize(#[from] serde_json::Error),
}

/// Which encoder's bytes a hash is taken over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashVersion {
    /// k8s.io/apimachinery v0.34 and later: Argo Rollouts 1.9.0 and later, and Sluice.
    Current,
    /// Earlier encoders (`"creationTimestamp":null`): Argo Rollouts 1.6 to 1.8, and Sluice
    /// releases that hashed as they do. Only for finding ReplicaSets they made.
    BeforeArgo19,
}

/// Go `encoding/json` bytes of a PodTemplateSpec as k8s.io/api would marshal it.
pub fn go_json(template: &serde_json::Value) -> Result<Vec<u8>, HashError> {
    go_json_as(template, HashVersion::Current)
}

/// [`go_json`] as the encoder of `version` writes it.
pub fn go_json_as(
    template: &serde_json::Value,
    version: HashVersion,
) -> Result<Vec<u8>, HashError> {
    let mut encoder = encode::Encoder::new(version == HashVersion::Current, false);
    encoder.write_struct(go_types::ROOT, Some(template))?;
    Ok(encoder.finish())
}

/// Bytes that are equal exactly when Kubernetes' semantic equality (`apiequality.Semantic`)
/// finds two templates equal: the fields Go decodes, in Go's form, with an empty slice or
/// map the same as a nil one and quantities compared by value.
pub fn semantic_bytes(template: &serde_json::Value) -> Result<Vec<u8>, HashError> {
    let mut encoder = encode::Encoder::new(true, true);
    encoder.write_struct(go_types::ROOT, Some(template))?;
    Ok(encoder.finish())
}

/// The pod-template hash of a typed template.
pub fn compute_pod_template_hash(
    template: &PodTemplateSpec,
    collision_count: Option<i32>,
) -> Result<String, HashError> {
    compute_pod_template_hash_value(&serde_json::to_value(template)?, collision_count)
}

/// The pod-template hash of a template given as JSON (for instance `spec.template` of a
/// Rollout as stored by the API server).
pub fn compute_pod_template_hash_value(
    template: &serde_json::Value,
    collision_count: Option<i32>,
) -> Result<String, HashError> {
    pod_template_hash_as(template, collision_count, HashVersion::Current)
}

/// The pod-template hash of `template` as the encoder of `version` computes it.
pub fn pod_template_hash_as(
    template: &serde_json::Value,
    collision_count: Option<i32>,
    version: HashVersion,
) -> Result<String, HashError> {
    let mut hash = Fnv32a::new();
    hash.write(&go_json_as(template, version)?);
    if let Some(count) = collision_count {
        // Little-endian u32 in an 8-byte buffer whose upper half stays zero.
        let mut buf = [0u8; 8];
        buf[..4].copy_from_slice(&(count as u32).to_le_bytes());
        hash.write(&buf);
    }
    Ok(safe_encode_string(&hash.sum().to_string()))
}

/// Argo's hash of any other value it hashes as JSON (the canary step list for
/// `status.currentStepHash`): FNV-32a over the JSON text with Go's HTML escaping, through
/// [`safe_encode_string`]. `json` must be JSON whose fields are already in Go's order.
pub fn hash_go_ordered_json(json: &str) -> String {
    let mut escaped = String::with_capacity(json.len());
    for ch in json.chars() {
        match ch {
            '<' => escaped.push_str("\\u003c"),
            '>' => escaped.push_str("\\u003e"),
            '&' => escaped.push_str("\\u0026"),
            '\u{2028}' => escaped.push_str("\\u2028"),
            '\u{2029}' => escaped.push_str("\\u2029"),
            c => escaped.push(c),
        }
    }
    let mut hash = Fnv32a::new();
    hash.write(escaped.as_bytes());
    safe_encode_string(&hash.sum().to_string())
}

const SAFE_ALPHABET: &[u8; 27] = b"bcdfghjklmnpqrstvwxz2456789";

/// Kubernetes' `rand.SafeEncodeString`: each character picks from an alphabet without
/// vowels and look-alike digits (code point modulo 27).
///
/// Go sizes the result in bytes but fills it per character, so input with multi-byte
/// characters yields trailing NUL bytes; that is reproduced for fidelity.
pub fn safe_encode_string(s: &str) -> String {
    let mut out = vec![0u8; s.len()];
    for (slot, c) in out.iter_mut().zip(s.chars()) {
        *slot = SAFE_ALPHABET[(c as usize) % SAFE_ALPHABET.len()];
    }
    // Only alphabet bytes and NUL: always valid UTF-8.
    out.into_iter().map(char::from).collect()
}

/// 32-bit FNV-1a, as Go's `hash/fnv.New32a`.
struct Fnv32a(u32);

impl Fnv32a {
    fn new() -> Self {
        Fnv32a(0x811c_9dc5)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u32::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0193);
        }
    }

    fn sum(&self) -> u32 {
        self.0
    }
}
