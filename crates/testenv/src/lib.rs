//! Test support for Sluice against a real local control plane.
//!
//! - [`browser`]: the UI's node modules that drive headless Chromium (`npm ci` when missing).
//! - [`cargo`]: cargo started from a test, without the variables of the test's package.
//! - [`fake_kubelet`]: makes pods behave on a cluster that has no kubelet or scheduler; runs as
//!   the `sluice-fake-kubelet` binary started by `scripts/cluster-up.sh`.
//! - [`fault_proxy`]: an API-server proxy that injects errors, delays and dropped watches.
//! - [`graphite`]: a real graphite-web serving its render API from whisper files.
//! - [`harness`]: what end-to-end tests use: the shared control plane (or one of a test's own,
//!   to kill and stop components of), throw-away namespaces, applying YAML, waiting for
//!   conditions.
//! - [`http_stub`]: a local HTTP server whose answer a test sets (a metric source).
//! - [`manifests`]: renders `manifests/install.yaml` and `namespace-install.yaml` from their
//!   kustomizations (the `sluice-render-manifests` binary, `make manifests`).
//! - [`moto`]: moto's AWS API emulator (CloudWatch, ELBv2) for the AWS-backed features.
//! - [`prometheus`]: a real Prometheus server scraping targets a test names.
//! - [`sigv4_proxy`]: a proxy letting through only requests botocore finds correctly signed.

pub mod browser;
pub mod cargo;
pub mod fake_kubelet;
pub mod fault_proxy;
pub mod graphite;
pub mod harness;
pub mod http_stub;
pub mod kubeconfig;
mod loopback;
pub mod manifests;
pub mod moto;
pub mod prometheus;
pub mod sigv4_proxy;
