//! The AnalysisRun a measurement belongs to, as providers see it.

use std::collections::BTreeMap;
use std::sync::Arc;

use sluice_api::AnalysisRun;

use crate::redact::Redactor;

/// The AnalysisRun a measurement belongs to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunContext {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    /// Secret values to keep out of measurements (from [`crate::ResolvedArgs::redactor`]).
    pub redactor: Redactor,
    /// Measurements taken so far per metric (`count + error`), which numbers Job names.
    pub measurements_taken: BTreeMap<String, i32>,
    /// The whole AnalysisRun as JSON, for the metric plugins (which are passed the run); only
    /// kept when a metric of the run uses a plugin.
    pub object: Option<Arc<serde_json::Value>>,
}

impl RunContext {
    pub fn new(
        name: impl Into<String>,
        namespace: impl Into<String>,
        uid: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            namespace: namespace.into(),
            uid: uid.into(),
            ..Default::default()
        }
    }

    /// Name, namespace and uid from the run's metadata; measurements taken from its status.
    pub fn for_run(run: &AnalysisRun) -> Self {
        let meta = &run.metadata;
        let mut ctx = Self::new(
            meta.name.clone().unwrap_or_default(),
            meta.namespace.clone().unwrap_or_default(),
            meta.uid.clone().unwrap_or_default(),
        );
        let results = run
            .status
            .iter()
            .flat_map(|s| s.metric_results.iter().flatten());
        for result in results {
            if let Some(name) = &result.name {
                let taken = result.count.unwrap_or(0) + result.error.unwrap_or(0);
                ctx.measurements_taken.insert(name.clone(), taken);
            }
        }
        let uses_plugin = run
            .spec
            .metrics
            .iter()
            .flatten()
            .any(|m| m.provider.as_ref().is_some_and(|p| p.plugin.is_some()));
        if uses_plugin {
            ctx.object = serde_json::to_value(run).ok().map(Arc::new);
        }
        ctx
    }

    pub fn with_redactor(mut self, redactor: Redactor) -> Self {
        self.redactor = redactor;
        self
    }

    pub fn with_measurements_taken(mut self, metric: &str, taken: i32) -> Self {
        self.measurements_taken.insert(metric.to_owned(), taken);
        self
    }

    /// Measurements taken so far for `metric`.
    pub fn measurements_taken(&self, metric: &str) -> i32 {
        self.measurements_taken.get(metric).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn run_context_from_run() {
        let run: AnalysisRun = serde_json::from_value(json!({
            "metadata": {"name": "r", "namespace": "ns", "uid": "u-1"},
            "spec": {"metrics": []},
            "status": {"phase": "Running", "metricResults": [
                {"name": "a", "phase": "Running", "count": 2, "error": 1},
                {"name": "b", "phase": "Running"}
            ]}
        }))
        .unwrap();
        let ctx = RunContext::for_run(&run);
        assert_eq!((ctx.name.as_str(), ctx.namespace.as_str()), ("r", "ns"));
        assert_eq!(ctx.uid, "u-1");
        assert_eq!(ctx.measurements_taken("a"), 3);
        assert_eq!(ctx.measurements_taken("b"), 0);
        assert_eq!(ctx.measurements_taken("c"), 0);
    }
}
