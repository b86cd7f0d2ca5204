//! What one cached object costs: the heap bytes a Rollout and a ReplicaSet take in the watch
//! caches, and the time to decode them, for objects as the API server serves them (the
//! benchmark's Rollout and its ReplicaSet, managed fields and all, in `served/`).
//!
//! `cargo run --release -p sluice-controller --example cache_footprint`

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::apps::v1::ReplicaSet;
use sluice_api::Rollout;
use sluice_controller::cache::{
    CachedReplicaSet, CachedRollout, drop_managed_fields, drop_unread_metadata,
};
use tikv_jemalloc_ctl::{epoch, stats};

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const ROLLOUT: &str = include_str!("served/rollout.json");
const REPLICA_SET: &str = include_str!("served/replicaset.json");
const N: usize = 10_000;

fn allocated() -> anyhow::Result<usize> {
    epoch::advance().map_err(|e| anyhow::anyhow!("jemalloc epoch: {e}"))?;
    stats::allocated::read().map_err(|e| anyhow::anyhow!("jemalloc stats: {e}"))
}

/// Heap bytes per object of `N` objects made by `make`, and the time to make one.
fn footprint<T>(make: impl Fn() -> anyhow::Result<T>) -> anyhow::Result<(usize, f64)> {
    let before = allocated()?;
    let started = Instant::now();
    let kept = (0..N)
        .map(|_| make().map(Arc::new))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let micros = started.elapsed().as_secs_f64() * 1e6 / N as f64;
    let bytes = (allocated()? - before) / N;
    drop(kept);
    Ok((bytes, micros))
}

/// The time one call of `call` takes, over `N` calls.
fn micros_per_call<T>(call: impl Fn() -> anyhow::Result<T>) -> anyhow::Result<f64> {
    let started = Instant::now();
    for _ in 0..N {
        std::hint::black_box(call()?);
    }
    Ok(started.elapsed().as_secs_f64() * 1e6 / N as f64)
}

fn main() -> anyhow::Result<()> {
    let rows: [(&str, (usize, f64)); 4] = [
        (
            "Rollout (typed, managedFields dropped)",
            footprint(|| {
                let mut ro: Rollout = serde_json::from_str(ROLLOUT)?;
                drop_managed_fields(&mut ro);
                Ok(ro)
            })?,
        ),
        (
            "Rollout (cached form)",
            footprint(|| Ok(serde_json::from_str::<CachedRollout>(ROLLOUT)?))?,
        ),
        (
            "ReplicaSet (typed, managedFields dropped)",
            footprint(|| {
                let mut rs: ReplicaSet = serde_json::from_str(REPLICA_SET)?;
                drop_unread_metadata(&mut rs);
                Ok(rs)
            })?,
        ),
        (
            "ReplicaSet (cached form)",
            footprint(|| Ok(serde_json::from_str::<CachedReplicaSet>(REPLICA_SET)?))?,
        ),
    ];
    println!("| object | heap bytes | decode µs |\n|---|---|---|");
    for (what, (bytes, micros)) in rows {
        println!("| {what} | {bytes} | {micros:.2} |");
    }
    let rollout: CachedRollout = serde_json::from_str(ROLLOUT)?;
    let replica_set: CachedReplicaSet = serde_json::from_str(REPLICA_SET)?;
    let decodes: [(&str, f64); 2] = [
        ("Rollout", micros_per_call(|| Ok(rollout.to_rollout()?))?),
        (
            "ReplicaSet",
            micros_per_call(|| Ok(replica_set.to_replica_set()?))?,
        ),
    ];
    for (what, micros) in decodes {
        println!("| {what} decoded from the cached form (per reconcile) | – | {micros:.2} |");
    }
    Ok(())
}
