//! The simulator's notifiers read and write through the controller's own notifications driver,
//! not through a copy of it: every request they send is made inside the driver's span, which
//! only code of `sluice_controller::loops::notification_driver` opens (a span's module path is
//! where its macro stands, so a copy elsewhere cannot carry it), and what the recording service
//! delivered was sent by it.

use std::sync::{Arc, Mutex};

use sluice_controller::loops::notification_driver;
use sluice_sim::notifications::LOOP_SPAN;
use sluice_sim::{real_apply, run, scenarios};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// The requests the simulated notifiers sent, by whether the driver made them.
#[derive(Default)]
struct Sent {
    through_driver: Vec<String>,
    elsewhere: Vec<String>,
}

struct Watch(Arc<Mutex<Sent>>);

struct RequestField(String);

impl Visit for RequestField {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "request" {
            self.0 = format!("{value:?}");
        }
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Watch {
    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        // Requests are told by the simulated client, deliveries by the recording service.
        if !matches!(
            event.metadata().module_path(),
            Some("sluice_sim::net::writer" | "sluice_sim::notifications")
        ) {
            return;
        }
        let Some(scope) = ctx.event_scope(event) else {
            return;
        };
        let spans: Vec<_> = scope
            .map(|s| (s.name(), s.metadata().module_path().unwrap_or_default()))
            .collect();
        let in_loop = spans
            .iter()
            .any(|(name, path)| *name == LOOP_SPAN && path.starts_with("sluice_sim"));
        if !in_loop {
            return;
        }
        let through_driver = spans.iter().any(|(name, path)| {
            *name == notification_driver::SPAN
                && *path == "sluice_controller::loops::notification_driver"
        });
        let mut request = RequestField(String::new());
        event.record(&mut request);
        let mut sent = self.0.lock().unwrap();
        if through_driver {
            sent.through_driver.push(request.0);
        } else {
            sent.elsewhere.push(request.0);
        }
    }
}

#[test]
fn the_simulated_notifiers_send_and_record_through_the_controllers_driver() {
    let sent = Arc::new(Mutex::new(Sent::default()));
    let subscriber = tracing_subscriber::registry().with(Watch(sent.clone()));
    let scenario = scenarios::find("notify-canary-pause").unwrap();
    let outcome = tracing::subscriber::with_default(subscriber, || run(&scenario, 0, real_apply));
    assert!(outcome.passed(), "{}", outcome.report());
    assert!(
        outcome.stats.notifications_delivered >= 4,
        "{:?}",
        outcome.stats
    );
    let sent = sent.lock().unwrap();
    assert!(
        sent.elsewhere.is_empty(),
        "the notifiers sent requests outside the controller's driver: {:?}",
        sent.elsewhere
    );
    let made = |prefix: &str, part: &str| {
        sent.through_driver
            .iter()
            .any(|r| r.starts_with(prefix) && r.contains(part))
    };
    assert!(made("get rollout/", ""), "{:?}", sent.through_driver);
    assert!(made("deliver ", ""), "{:?}", sent.through_driver);
    assert!(
        made("patch rollout/", "notifications-pending"),
        "{:?}",
        sent.through_driver
    );
    assert!(
        made("patch rollout/", "notified.notifications.argoproj.io"),
        "{:?}",
        sent.through_driver
    );
}
