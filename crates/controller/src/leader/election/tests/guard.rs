//! A candidate with a guard Lease: kept out by a client-go holder (Argo Rollouts 1.9), never by
//! another Sluice instance.

use super::*;
use crate::leader::lease::{LeaseRecord, LeaseRole};

/// A Lease as Argo's client-go leader election writes it: no Sluice annotations.
fn argo_holds(server: &Server, holder: &str) {
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(Timestamp::now());
    let lease: Lease = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "guard", "namespace": "ns"},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                 "acquireTime": now, "renewTime": now, "leaseTransitions": 0}
    }))
    .unwrap();
    server.store(&lease);
}

fn role(server: &Server) -> Option<LeaseRole> {
    server
        .lease
        .lock()
        .unwrap()
        .as_ref()
        .and_then(LeaseRole::of)
}

#[tokio::test(start_paused = true)]
async fn a_guard_held_by_argo_keeps_the_instance_out_until_it_expires() {
    let (lease, guard) = (Arc::new(Server::default()), Arc::new(Server::default()));
    argo_holds(&guard, "argo-rollouts-5f7d_0000");
    let a = candidate_with(&lease, "a", Some(&guard));
    // Its own Lease is free and taken, but it must not lead while Argo holds the guard.
    for _ in 0..14 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!a.gate.is_open(), "led beside Argo");
    }
    assert_eq!(lease.holder(), "a");
    leading_within(&a, Duration::from_secs(6)).await;
    assert_eq!(guard.holder(), "a");
    assert_eq!(role(&guard), Some(LeaseRole::Guard));

    // Shutting down releases both Leases.
    a.stop.cancel();
    a.task.await.unwrap();
    assert_eq!(
        (lease.holder(), guard.holder()),
        (String::new(), String::new())
    );
}

#[tokio::test(start_paused = true)]
async fn two_instances_share_the_guard_and_lead_side_by_side() {
    let guard = Arc::new(Server::default());
    let (lease_a, lease_b) = (Arc::new(Server::default()), Arc::new(Server::default()));
    let a = candidate_with(&lease_a, "a", Some(&guard));
    leading_within(&a, Duration::from_secs(1)).await;
    let b = candidate_with(&lease_b, "b", Some(&guard));
    leading_within(&b, Duration::from_secs(5)).await;
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(a.gate.is_open() && b.gate.is_open());
    }
    assert_eq!(
        guard.holder(),
        "a",
        "b shares a's guard rather than taking it"
    );

    // a's guard traffic is black-holed: a stops leading; b takes the guard over before the
    // Lease could expire for an Argo controller, and keeps leading.
    a.guard_link
        .as_ref()
        .unwrap()
        .cut
        .store(true, Ordering::SeqCst);
    let cut_at = Instant::now();
    timeout(Duration::from_secs(11), a.gate.wait_for(false))
        .await
        .expect("a stops within the renew deadline");
    timeout(Duration::from_secs(13), async {
        while guard.holder() != "b" {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("b takes the guard over");
    assert!(
        cut_at.elapsed() < Duration::from_secs(15),
        "before the guard expired"
    );
    leading_within(&b, Duration::from_secs(1)).await;
    let transitions = LeaseRecord::from_lease(guard.lease.lock().unwrap().as_ref().unwrap());
    assert_eq!(transitions.lease_transitions, 1);

    // b shuts down and releases the guard; a (reconnected) takes it at its next round.
    a.guard_link
        .as_ref()
        .unwrap()
        .cut
        .store(false, Ordering::SeqCst);
    b.stop.cancel();
    b.task.await.unwrap();
    leading_within(&a, Duration::from_secs(15)).await;
    assert_eq!(guard.holder(), "a");
    a.stop.cancel();
    a.task.await.unwrap();
}

/// An instance without an instance id leads on the Lease the others hold as a guard: it takes
/// it from them at once, and they keep leading on its hold.
#[tokio::test(start_paused = true)]
async fn the_default_instance_takes_its_lease_from_a_guard() {
    let shared = Arc::new(Server::default());
    let lease_a = Arc::new(Server::default());
    let a = candidate_with(&lease_a, "a", Some(&shared));
    leading_within(&a, Duration::from_secs(1)).await;
    assert_eq!(role(&shared), Some(LeaseRole::Guard));
    let default = candidate(&shared, "default");
    leading_within(&default, Duration::from_secs(5)).await;
    assert_eq!(shared.holder(), "default");
    assert_eq!(role(&shared), Some(LeaseRole::Leader));
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(a.gate.is_open() && default.gate.is_open());
        assert_eq!(shared.holder(), "default", "no tug of war");
    }
    for c in [a, default] {
        c.stop.cancel();
        c.task.await.unwrap();
    }
}
