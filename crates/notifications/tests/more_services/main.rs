//! The notifications engine's other services (`services::table`), each against a local server
//! speaking its documented API: a rendered message delivered, and a bad configuration reported
//! as the engine reports it while the other services still send.

#[path = "../support/mod.rs"]
mod support;

mod awssqs;
mod gcppubsub;
mod nats;
mod pushover;
