//! The notifications engine's other services (`services::table`), each against a local server
//! speaking its documented API: a rendered message delivered, and a bad configuration reported
//! as the engine reports it while the other services still send.

#[path = "../support/mod.rs"]
mod support;

mod alertmanager;
mod awssqs;
mod gcppubsub;
mod github;
mod googlechat;
mod mattermost;
mod nats;
mod newrelic;
mod opsgenie;
mod pagerduty;
mod pagerdutyv2;
mod pushover;
mod rocketchat;
mod routes;
mod teams_workflows;
mod telegram;
mod webex;
