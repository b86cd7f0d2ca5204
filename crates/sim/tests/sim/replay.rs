//! Replays one seed of one scenario and prints its whole trace:
//! `SLUICE_SIM_SCENARIO=supersede SLUICE_SIM_SEED=1234 cargo test -p sluice-sim --test sim replay:: -- --nocapture`
//! (the scenario defaults to `supersede`, the seed to 0).

use sluice_sim::{real_apply, run, scenarios};

#[test]
fn replay() {
    let name = std::env::var("SLUICE_SIM_SCENARIO").unwrap_or_else(|_| "supersede".into());
    let seed: u64 = std::env::var("SLUICE_SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let scenario = scenarios::find(&name).unwrap_or_else(|| panic!("unknown scenario {name}"));
    let outcome = run(&scenario, seed, real_apply);
    for (t, line) in &outcome.trace {
        println!("{t:>8} {line}");
    }
    println!("{:?}", outcome.stats);
    assert!(outcome.passed(), "{}", outcome.report());
}
