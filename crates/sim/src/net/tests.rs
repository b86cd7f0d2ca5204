use jiff::Timestamp;
use serde_json::Value;
use sluice_controller::cluster::WriteError;
use sluice_routers::kinds::ObjectRef;

use crate::api_model::ApiServer;

use super::*;
use serde_json::json;
use sluice_routers::kinds::RouterKind;

fn now() -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap()
}

fn vs_ref(namespace: &str) -> ObjectRef {
    ObjectRef::new(RouterKind::VirtualService, namespace, "vs")
}

fn get(api: &mut ApiServer, target: ObjectRef) -> Option<Value> {
    match serve(api, Request::GetRouterObject { target }, now()) {
        Ok(Reply::RouterObject(o)) => o.map(|o| *o),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn router_objects_are_created_once_read_and_replaced_at_their_version() {
    let mut api = ApiServer::new();
    let object = json!({"metadata": {"name": "vs"}, "spec": {"http": []}});
    let create = |object: &Value| Request::CreateRouterObject {
        target: vs_ref(NAMESPACE),
        object: object.clone(),
    };
    assert!(serve(&mut api, create(&object), now()).is_ok());
    assert!(matches!(
        serve(&mut api, create(&object), now()),
        Err(WriteError::Conflict)
    ));
    let read = get(&mut api, vs_ref(NAMESPACE)).unwrap();
    assert_eq!(get(&mut api, vs_ref("elsewhere")), None);
    let mut changed = read.clone();
    changed["spec"]["http"] = json!([{"name": "primary"}]);
    let replace = |object: &Value| Request::ReplaceRouterObject {
        target: vs_ref(NAMESPACE),
        object: object.clone(),
    };
    assert!(serve(&mut api, replace(&changed), now()).is_ok());
    let stored = get(&mut api, vs_ref(NAMESPACE)).unwrap();
    assert_eq!(stored.pointer("/spec/http/0/name"), Some(&json!("primary")));
    assert_ne!(
        crate::api_model::rv_of(&stored),
        crate::api_model::rv_of(&read)
    );
    // Written from the first read, it is stale now.
    assert!(matches!(
        serve(&mut api, replace(&read), now()),
        Err(WriteError::Conflict)
    ));
    let elsewhere = Request::ReplaceRouterObject {
        target: vs_ref("elsewhere"),
        object: changed,
    };
    assert!(matches!(
        serve(&mut api, elsewhere, now()),
        Err(WriteError::NotFound)
    ));
}
