//! The decision engine: pure functions from an observed Rollout world and the current time to a
//! plan of writes. No I/O, no clock, no async runtime: everything it needs is passed in.

pub mod replicas;
