use super::*;

#[test]
fn faults_follow_the_rate_and_respect_the_method() {
    let mut picker = Picker::new(Faults::at_rate(0.1, 7));
    let reads: Vec<Fault> = (0..10_000)
        .filter_map(|_| picker.pick(&Method::GET, false))
        .collect();
    assert!((800..1200).contains(&reads.len()), "{}", reads.len());
    assert!(
        reads.iter().all(|f| *f != Fault::Refused(409)),
        "no 409 on reads"
    );
    let writes: Vec<Fault> = (0..10_000)
        .filter_map(|_| picker.pick(&Method::PATCH, false))
        .collect();
    assert!(writes.contains(&Fault::Refused(409)));
    assert!(writes.iter().any(|f| matches!(f, Fault::ResponseLost(_))));
    let watches: Vec<Fault> = (0..10_000)
        .filter_map(|_| picker.pick(&Method::GET, true))
        .collect();
    assert!(watches.iter().any(|f| matches!(f, Fault::WatchDropped(_))));
    assert!(
        Picker::new(Faults::none())
            .pick(&Method::GET, false)
            .is_none()
    );
}

#[test]
fn the_same_seed_gives_the_same_faults() {
    let run = || {
        let mut p = Picker::new(Faults::at_rate(0.5, 99));
        (0..100)
            .map(|_| p.pick(&Method::POST, false))
            .collect::<Vec<_>>()
    };
    assert_eq!(run(), run());
}
