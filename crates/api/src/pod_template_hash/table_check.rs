//! Checks that the generated Go table is intact and agrees with other sources.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;
use std::process::Command;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde_json::Value;

use super::go_types;
use super::table::{Scalar, StructDef, Ty};

const TABLE_SOURCE: &str = include_str!("go_types.rs");
const BODY_MARKER: &str = "// ---- generated table ----\n";

/// Environment variables naming the Go module sources the table is generated from.
const API_SRC_VAR: &str = "SLUICE_K8S_API_SRC";
const APIMACHINERY_SRC_VAR: &str = "SLUICE_K8S_APIMACHINERY_SRC";

fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The checksum in the header must match the body: the table was not edited by hand.
/// When the Go sources are available, regenerating must reproduce the file exactly.
#[test]
fn table_is_the_generator_output() {
    let (header, body) = TABLE_SOURCE.split_once(BODY_MARKER).unwrap();
    let recorded = header
        .lines()
        .find_map(|l| l.strip_prefix("// table-checksum: fnv1a64:"))
        .unwrap();
    assert_eq!(recorded, format!("{:016x}", fnv1a64(body.as_bytes())));
    assert!(header.contains(&format!("// Source: {}\n", go_types::SOURCE_VERSION)));

    let (Ok(api), Ok(apimachinery)) = (
        std::env::var(API_SRC_VAR),
        std::env::var(APIMACHINERY_SRC_VAR),
    ) else {
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tools/gen-go-order-table/gen_go_order_table.py");
    let output = Command::new("python3")
        .arg(script)
        .args(["--api", &api, "--apimachinery", &apimachinery])
        .args(["--version", go_types::SOURCE_VERSION])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        String::from_utf8(output.stdout).unwrap() == TABLE_SOURCE,
        "go_types.rs differs from the generator output for {api} and {apimachinery}"
    );
}

#[test]
fn table_is_well_formed() {
    assert!(go_types::ROOT.go_name.ends_with("core/v1.PodTemplateSpec"));
    let mut seen = HashSet::new();
    for def in go_types::ALL {
        assert!(seen.insert(def.go_name), "{} listed twice", def.go_name);
        let mut names = HashSet::new();
        for field in def.fields {
            assert!(
                names.insert(field.json),
                "{}.{} twice",
                def.go_name,
                field.json
            );
        }
    }
    // Spot checks of declaration order and flags that the hash depends on.
    let container = find("k8s.io/api/core/v1.Container");
    let order: Vec<&str> = container.fields.iter().map(|f| f.json).take(9).collect();
    assert_eq!(
        order,
        [
            "name",
            "image",
            "command",
            "args",
            "workingDir",
            "ports",
            "envFrom",
            "env",
            "resources"
        ]
    );
    let meta = find("k8s.io/apimachinery/pkg/apis/meta/v1.ObjectMeta");
    let created = meta
        .fields
        .iter()
        .find(|f| f.json == "creationTimestamp")
        .unwrap();
    assert!(matches!(created.ty, Ty::Time) && created.omitempty && created.omitzero);
    let omitzero: Vec<&str> = go_types::ALL
        .iter()
        .flat_map(|d| d.fields.iter().filter(|f| f.omitzero).map(|f| f.json))
        .collect();
    assert_eq!(omitzero, ["creationTimestamp"]);
}

fn find(go_name: &str) -> &'static StructDef {
    go_types::ALL.iter().find(|d| d.go_name == go_name).unwrap()
}

/// Fields the k8s-openapi structs may know but the Go table does not: added to Kubernetes
/// after the table's source. Go drops them when decoding, so their values do not reach the
/// hash. A newer k8s-openapi feature adds fields here, and that is the moment to consider
/// regenerating the table (from the k8s.io/api version Argo Rollouts is built with).
const NEWER_THAN_TABLE: &[(&str, &str)] = &[];

/// Every field of the table exists in the k8s-openapi schema with a matching JSON type,
/// and every struct reference points at the same Kubernetes type.
#[test]
fn table_agrees_with_k8s_openapi_schema() {
    let root = schemars::SchemaGenerator::default().into_root_schema_for::<PodTemplateSpec>();
    let root = root.as_value();
    let defs = root["$defs"].as_object().unwrap();
    let mut only_in_schema = BTreeSet::new();
    let mut pending: Vec<(&StructDef, &Value)> = vec![(go_types::ROOT, root)];
    let mut visited = BTreeMap::new();
    while let Some((def, schema)) = pending.pop() {
        if visited.insert(def.go_name, ()).is_some() {
            continue;
        }
        let properties = schema["properties"].as_object().unwrap();
        let name = schema_name(def.go_name);
        for field in def.fields {
            let property = properties.get(field.json).unwrap_or_else(|| {
                panic!("{name}.{} is not in the k8s-openapi schema", field.json)
            });
            let context = format!("{name}.{}", field.json);
            check_type(&field.ty, property, defs, &context, &mut pending);
        }
        for property in properties.keys() {
            if !def.fields.iter().any(|f| f.json == property) {
                only_in_schema.insert((name.clone(), property.clone()));
            }
        }
    }
    let known: BTreeSet<(String, String)> = NEWER_THAN_TABLE
        .iter()
        .map(|(t, f)| ((*t).to_owned(), (*f).to_owned()))
        .collect();
    let unexplained: Vec<_> = only_in_schema.difference(&known).collect();
    assert!(
        unexplained.is_empty(),
        "k8s-openapi fields missing from the table: {unexplained:?}"
    );
    assert_eq!(visited.len(), go_types::ALL.len());
}

/// `k8s.io/api/core/v1.Pod` -> `io.k8s.api.core.v1.Pod`.
fn schema_name(go_name: &str) -> String {
    let path = go_name.strip_prefix("k8s.io/").unwrap_or(go_name);
    format!("io.k8s.{}", path.replace('/', "."))
}

fn resolve<'a>(
    schema: &'a Value,
    defs: &'a serde_json::Map<String, Value>,
) -> (&'a Value, Option<&'a str>) {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(reference) => {
            let name = reference.rsplit('/').next().unwrap();
            (&defs[name], Some(name))
        }
        None => (schema, None),
    }
}

fn check_type<'a>(
    ty: &'static Ty,
    schema: &'a Value,
    defs: &'a serde_json::Map<String, Value>,
    context: &str,
    pending: &mut Vec<(&'static StructDef, &'a Value)>,
) {
    let (target, reference) = resolve(schema, defs);
    let json_type = target.get("type").and_then(Value::as_str);
    match ty {
        // A pointer has the schema of its pointee, reference included.
        Ty::Ptr(inner) => check_type(inner, schema, defs, context, pending),
        Ty::Slice(elem) => {
            assert_eq!(json_type, Some("array"), "{context}");
            check_type(elem, &target["items"], defs, context, pending);
        }
        Ty::Map(elem) => {
            assert_eq!(json_type, Some("object"), "{context}");
            check_type(
                elem,
                &target["additionalProperties"],
                defs,
                context,
                pending,
            );
        }
        Ty::Struct(def) => {
            assert_eq!(
                reference,
                Some(schema_name(def.go_name).as_str()),
                "{context}"
            );
            pending.push((def, target));
        }
        Ty::Scalar(Scalar::Str) => assert_eq!(json_type, Some("string"), "{context}"),
        Ty::Scalar(Scalar::Bool) => assert_eq!(json_type, Some("boolean"), "{context}"),
        Ty::Scalar(_) => assert_eq!(json_type, Some("integer"), "{context}"),
        Ty::Quantity => assert_eq!(
            reference,
            Some("io.k8s.apimachinery.pkg.api.resource.Quantity"),
            "{context}"
        ),
        Ty::IntOrString => assert_eq!(
            reference,
            Some("io.k8s.apimachinery.pkg.util.intstr.IntOrString"),
            "{context}"
        ),
        Ty::Time => assert_eq!(
            reference,
            Some("io.k8s.apimachinery.pkg.apis.meta.v1.Time"),
            "{context}"
        ),
        Ty::RawJson => assert_eq!(
            reference,
            Some("io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1"),
            "{context}"
        ),
    }
}
