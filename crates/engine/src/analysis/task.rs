//! What a provider is asked to do for a metric: the tasks `next_tasks` hands out and `assess`
//! records the results of.

/// What a provider is asked to do for a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskKind {
    /// Take a new measurement.
    Start,
    /// Poll the in-flight measurement again.
    Resume,
    /// Stop the in-flight measurement (the run is terminating).
    Terminate,
}

/// One measurement to start, resume or terminate now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricTask {
    pub metric: String,
    pub kind: TaskKind,
}
