//! Go duration parsing (`time.ParseDuration`), which every interval, pause and delay goes
//! through.

use serde_json::json;
use sluice_api::duration::parse_go_duration_nanos;
use sluice_conformance::generate::duration::go_duration;
use sluice_conformance::oracle::{self, ARGO_VERSIONS};
use sluice_conformance::run::compare;

#[test]
fn go_durations_parse_as_go_parses_them() {
    // Go's own time package, linked into the oracle at the first release (it is the same
    // function at every release).
    let version = ARGO_VERSIONS[0];
    compare("duration", go_duration, |text| {
        let answer = oracle::shared(version)
            .ask(&json!({"op": "duration", "text": text}))
            .map_err(|e| format!("{e:#}"))?;
        let go = answer["nanos"].as_i64();
        let sluice = parse_go_duration_nanos(text).ok();
        match (go, sluice) {
            (Some(a), Some(b)) if a == b => Ok("same value".into()),
            (None, None) => Ok("both refuse it".into()),
            _ => Err(format!("{text:?}: Go {answer}, Sluice {sluice:?}")),
        }
    });
}
