//! Where `istio.virtualService(s).name` points. A reference may carry a namespace
//! (`name.namespace`, or a cluster-local DNS form); without one the VirtualService lives in the
//! Rollout's namespace.

/// DNS suffixes trimmed before the namespace is read, longest first so that
/// `vs.ns.svc.cluster.local` does not leave `svc` behind as a namespace.
const CLUSTER_SUFFIXES: [&str; 2] = [".svc.cluster.local", ".cluster.local"];

/// The `(name, namespace)` of a VirtualService reference.
///
/// The cluster-local suffix is trimmed, then the last dot-separated segment is the namespace
/// and everything before it the name (Kubernetes names may themselves contain dots). A
/// reference without a dot is a bare name in `rollout_namespace`.
pub fn virtual_service_key(name: &str, rollout_namespace: &str) -> (String, String) {
    let trimmed = CLUSTER_SUFFIXES
        .iter()
        .find_map(|suffix| name.strip_suffix(suffix))
        .unwrap_or(name);
    match trimmed.rsplit_once('.') {
        Some((vs, namespace)) => (vs.to_string(), namespace.to_string()),
        None => (trimmed.to_string(), rollout_namespace.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_references() {
        let cases = [
            ("vsvc", ("vsvc", "rollout-ns")),
            ("vsvc.other", ("vsvc", "other")),
            ("vsvc.other.svc.cluster.local", ("vsvc", "other")),
            ("vsvc.other.cluster.local", ("vsvc", "other")),
            ("a.b.c", ("a.b", "c")),
            ("", ("", "rollout-ns")),
            (".ns", ("", "ns")),
        ];
        for (input, (name, namespace)) in cases {
            assert_eq!(
                virtual_service_key(input, "rollout-ns"),
                (name.to_string(), namespace.to_string()),
                "{input}"
            );
        }
    }
}
