//! Sluice against Argo Rollouts' own code, on generated cases, for each release the oracle is
//! built at. One test binary, one module per function compared.

mod conformance {
    mod analysis;
    mod coverage;
    mod duration;
    mod engine_runs;
    mod experiment;
    mod hash;
    mod replicas;
    mod validation;
}
