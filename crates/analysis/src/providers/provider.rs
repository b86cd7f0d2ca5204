//! The one interface every metric provider implements, and its type-erased form for the
//! registry.
//!
//! A provider is a type implementing [`Provider`]: which field of `metrics[].provider` it
//! reads, how it checks that configuration (with Argo's messages, before any I/O), how it
//! measures, and, for asynchronous providers, how it resumes, terminates and cleans up. The
//! registry in `providers/mod.rs` holds one [`Adapter`] per provider, so dispatch never names
//! a provider.

use std::collections::BTreeMap;
use std::future::{Future, ready};
use std::marker::PhantomData;

use futures::future::BoxFuture;
use sluice_api::analysis::{Measurement, Metric, MetricProvider, ProviderKind};

use super::outcome::Outcome;
use super::{ProviderError, Providers, RunContext};
use crate::redact::Redactor;

/// What a provider works with: the shared clients and settings, the run and the metric.
#[derive(Clone, Copy)]
pub(crate) struct Env<'a> {
    pub providers: &'a Providers,
    pub run: &'a RunContext,
    pub metric: &'a Metric,
}

/// One metric provider.
///
/// Its configuration type lives in `sluice-api` (the CRDs' schemas are generated from it and
/// the API crate must round-trip Argo's JSON); everything the provider does lives in its own
/// module here.
pub(crate) trait Provider: 'static {
    /// The field of `metrics[].provider` this provider reads.
    const KIND: ProviderKind;
    /// That field's type.
    type Config: Sync + 'static;
    /// The configuration checked, with what a measurement needs resolved.
    type Query<'a>: Send;

    /// This provider's configuration, if the metric sets it.
    fn config(provider: &MetricProvider) -> Option<&Self::Config>;

    /// Checks the configuration, in Argo's words, before any I/O.
    fn parse<'a>(env: Env<'a>, config: &'a Self::Config) -> Result<Self::Query<'a>, ProviderError>;

    /// Takes a measurement. Secrets it reads on the way go into `redactor`, so that they
    /// never reach the measurement.
    fn measure<'a>(
        env: Env<'a>,
        query: Self::Query<'a>,
        redactor: &'a mut Redactor,
    ) -> impl Future<Output = Result<Outcome, ProviderError>> + Send + 'a;

    /// Polls a measurement left Running; synchronous providers hand it back unchanged.
    fn resume<'a>(
        _env: Env<'a>,
        measurement: Measurement,
    ) -> impl Future<Output = Measurement> + Send + 'a {
        ready(measurement)
    }

    /// Stops a measurement left Running; synchronous providers hand it back unchanged.
    fn terminate<'a>(
        _env: Env<'a>,
        measurement: Measurement,
    ) -> impl Future<Output = Measurement> + Send + 'a {
        ready(measurement)
    }

    /// Deletes what measurements older than the newest `keep` left behind.
    fn garbage_collect<'a>(
        _env: Env<'a>,
        _keep: usize,
    ) -> impl Future<Output = Result<(), ProviderError>> + Send + 'a {
        ready(Ok(()))
    }

    /// Extra data shown on the metric's result (redacted).
    fn metadata(_config: &Self::Config, _redactor: &Redactor) -> Option<BTreeMap<String, String>> {
        None
    }
}

/// A [`Provider`] as the registry holds it: no associated types, boxed futures.
pub(crate) trait Registered: Sync {
    fn kind(&self) -> ProviderKind;
    fn measure<'a>(
        &self,
        env: Env<'a>,
        redactor: &'a mut Redactor,
    ) -> BoxFuture<'a, Result<Outcome, ProviderError>>;
    fn resume<'a>(&self, env: Env<'a>, measurement: Measurement) -> BoxFuture<'a, Measurement>;
    fn terminate<'a>(&self, env: Env<'a>, measurement: Measurement) -> BoxFuture<'a, Measurement>;
    fn garbage_collect<'a>(
        &self,
        env: Env<'a>,
        keep: usize,
    ) -> BoxFuture<'a, Result<(), ProviderError>>;
    fn metadata(
        &self,
        provider: &MetricProvider,
        redactor: &Redactor,
    ) -> Option<BTreeMap<String, String>>;
}

/// Registers provider `P`: `&Adapter::<P>::NEW` in the registry.
pub(crate) struct Adapter<P>(PhantomData<fn() -> P>);

impl<P> Adapter<P> {
    pub(crate) const NEW: Self = Self(PhantomData);
}

impl<P: Provider> Registered for Adapter<P> {
    fn kind(&self) -> ProviderKind {
        P::KIND
    }

    fn measure<'a>(
        &self,
        env: Env<'a>,
        redactor: &'a mut Redactor,
    ) -> BoxFuture<'a, Result<Outcome, ProviderError>> {
        Box::pin(async move {
            let config = env
                .metric
                .provider
                .as_ref()
                .and_then(P::config)
                .ok_or_else(|| {
                    ProviderError(format!("metric has no {} provider", P::KIND.field_name()))
                })?;
            let query = P::parse(env, config)?;
            P::measure(env, query, redactor).await
        })
    }

    fn resume<'a>(&self, env: Env<'a>, measurement: Measurement) -> BoxFuture<'a, Measurement> {
        Box::pin(P::resume(env, measurement))
    }

    fn terminate<'a>(&self, env: Env<'a>, measurement: Measurement) -> BoxFuture<'a, Measurement> {
        Box::pin(P::terminate(env, measurement))
    }

    fn garbage_collect<'a>(
        &self,
        env: Env<'a>,
        keep: usize,
    ) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(P::garbage_collect(env, keep))
    }

    fn metadata(
        &self,
        provider: &MetricProvider,
        redactor: &Redactor,
    ) -> Option<BTreeMap<String, String>> {
        P::metadata(P::config(provider)?, redactor)
    }
}
