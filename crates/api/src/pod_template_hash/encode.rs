//! Writes a pod template the way Go's `encoding/json` writes `corev1.PodTemplateSpec`.
//!
//! The input is the template as JSON (what the API server stores). It is read as Go would
//! decode it into the typed structs (unknown fields dropped, `null` meaning the zero
//! value; keys match exactly, as Kubernetes clients decode case-sensitively) and written
//! back following the generated struct table.

use serde_json::{Map, Value};

use super::HashError;
use super::go_time;
use super::quantity;
use super::table::{Field, Scalar, StructDef, Ty};

pub struct Encoder {
    out: Vec<u8>,
    path: Vec<String>,
    /// Whether fields tagged `omitzero` leave out their zero value (apimachinery v0.34 and
    /// later) or are written like plain `omitempty` fields (earlier encoders).
    omitzero: bool,
    /// Bytes for comparing, not hashing: empty slices and maps written as nil ones and
    /// quantities by value, as Kubernetes' semantic equality sees them.
    semantic: bool,
}

impl Encoder {
    pub fn new(omitzero: bool, semantic: bool) -> Self {
        Encoder {
            out: Vec::with_capacity(1024),
            path: Vec::new(),
            omitzero,
            semantic,
        }
    }

    pub fn finish(self) -> Vec<u8> {
        self.out
    }

    /// Writes `value` (or the zero value when absent or `null`) as a Go struct.
    pub fn write_struct(
        &mut self,
        def: &StructDef,
        value: Option<&Value>,
    ) -> Result<(), HashError> {
        let object = match value {
            None | Some(Value::Null) => None,
            Some(Value::Object(object)) => Some(object),
            Some(_) => return Err(self.mismatch(&format!("an object ({})", def.go_name))),
        };
        self.out.push(b'{');
        let mut first = true;
        for field in def.fields {
            let value = object
                .and_then(|o| o.get(field.json))
                .filter(|v| !v.is_null());
            if field.omitempty && is_empty(&field.ty, value) {
                continue;
            }
            if field.omitzero && self.omitzero && is_zero(&field.ty, value) {
                continue;
            }
            if !first {
                self.out.push(b',');
            }
            first = false;
            write_go_string(&mut self.out, field.json);
            self.out.push(b':');
            self.write_field(field, value)?;
        }
        self.out.push(b'}');
        Ok(())
    }

    fn write_field(&mut self, field: &Field, value: Option<&Value>) -> Result<(), HashError> {
        self.path.push(field.json.to_owned());
        let result = self.write(&field.ty, value);
        self.path.pop();
        result
    }

    /// Writes one value of type `ty`; `None` stands for Go's zero value.
    fn write(&mut self, ty: &Ty, value: Option<&Value>) -> Result<(), HashError> {
        let Some(value) = value.filter(|v| !v.is_null()) else {
            return self.write_zero(ty);
        };
        match ty {
            Ty::Scalar(scalar) => self.write_scalar(*scalar, value),
            Ty::Ptr(inner) => self.write(inner, Some(value)),
            Ty::Slice(elem) => {
                let Value::Array(items) = value else {
                    return Err(self.mismatch("an array"));
                };
                if self.semantic && items.is_empty() {
                    return self.write_zero(ty);
                }
                self.out.push(b'[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        self.out.push(b',');
                    }
                    self.path.push(i.to_string());
                    let result = self.write(elem, Some(item));
                    self.path.pop();
                    result?;
                }
                self.out.push(b']');
                Ok(())
            }
            Ty::Map(elem) => {
                let Value::Object(entries) = value else {
                    return Err(self.mismatch("an object"));
                };
                if self.semantic && entries.is_empty() {
                    return self.write_zero(ty);
                }
                self.write_map(elem, entries)
            }
            Ty::Struct(def) => self.write_struct(def, Some(value)),
            Ty::Quantity => {
                let text = match value {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    _ => return Err(self.mismatch("a quantity string or number")),
                };
                let render: fn(&str) -> Result<String, quantity::QuantityError> = if self.semantic {
                    quantity::value_key
                } else {
                    quantity::canonical
                };
                let canonical = render(&text).map_err(|source| HashError::Quantity {
                    path: self.path_string(),
                    value: text.clone(),
                    source,
                })?;
                write_go_string(&mut self.out, &canonical);
                Ok(())
            }
            Ty::IntOrString => match value {
                Value::String(s) => {
                    write_go_string(&mut self.out, s);
                    Ok(())
                }
                Value::Number(_) => self.write_scalar(Scalar::I32, value),
                _ => Err(self.mismatch("an integer or a string")),
            },
            Ty::Time => {
                let Value::String(text) = value else {
                    return Err(self.mismatch("an RFC 3339 time string"));
                };
                let json = go_time::go_json(text).map_err(|source| HashError::Time {
                    path: self.path_string(),
                    source,
                })?;
                self.out.extend_from_slice(json.as_bytes());
                Ok(())
            }
            Ty::RawJson => {
                write_raw_json(&mut self.out, value);
                Ok(())
            }
        }
    }

    fn write_map(&mut self, elem: &Ty, entries: &Map<String, Value>) -> Result<(), HashError> {
        let mut keys: Vec<&String> = entries.keys().collect();
        keys.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
        self.out.push(b'{');
        for (i, key) in keys.into_iter().enumerate() {
            if i > 0 {
                self.out.push(b',');
            }
            write_go_string(&mut self.out, key);
            self.out.push(b':');
            self.path.push(key.clone());
            let result = self.write(elem, entries.get(key));
            self.path.pop();
            result?;
        }
        self.out.push(b'}');
        Ok(())
    }

    fn write_scalar(&mut self, scalar: Scalar, value: &Value) -> Result<(), HashError> {
        match (scalar, value) {
            (Scalar::Str, Value::String(s)) => write_go_string(&mut self.out, s),
            (Scalar::Bool, Value::Bool(b)) => {
                self.out
                    .extend_from_slice(if *b { b"true" } else { b"false" })
            }
            (Scalar::Str, _) => return Err(self.mismatch("a string")),
            (Scalar::Bool, _) => return Err(self.mismatch("a boolean")),
            (int, value) => {
                let n = integer(value).ok_or_else(|| self.mismatch("an integer"))?;
                let (min, max) = int.int_range().unwrap_or((0, 0));
                if n < min || n > max {
                    return Err(HashError::OutOfRange {
                        path: self.path_string(),
                        value: n.to_string(),
                    });
                }
                self.out.extend_from_slice(n.to_string().as_bytes());
            }
        }
        Ok(())
    }

    fn write_zero(&mut self, ty: &Ty) -> Result<(), HashError> {
        let zero: &[u8] = match ty {
            Ty::Scalar(Scalar::Str) => b"\"\"",
            Ty::Scalar(Scalar::Bool) => b"false",
            Ty::Scalar(_) | Ty::IntOrString => b"0",
            Ty::Ptr(_) | Ty::Slice(_) | Ty::Map(_) | Ty::Time | Ty::RawJson => b"null",
            Ty::Quantity => b"\"0\"",
            Ty::Struct(def) => return self.write_struct(def, None),
        };
        self.out.extend_from_slice(zero);
        Ok(())
    }

    fn mismatch(&self, expected: &str) -> HashError {
        HashError::Type {
            path: self.path_string(),
            expected: expected.to_owned(),
        }
    }

    fn path_string(&self) -> String {
        if self.path.is_empty() {
            ".".to_owned()
        } else {
            self.path.join(".")
        }
    }
}

/// Whether `omitempty` drops the field (`None` is an absent or `null` value). A value of
/// the wrong JSON type counts as non-empty, so that writing it reports the mismatch.
fn is_empty(ty: &Ty, value: Option<&Value>) -> bool {
    let Some(value) = value else {
        return ty.zero_is_empty();
    };
    match (ty, value) {
        (Ty::Scalar(Scalar::Str), Value::String(s)) => s.is_empty(),
        (Ty::Scalar(Scalar::Bool), Value::Bool(b)) => !b,
        (Ty::Scalar(Scalar::Str | Scalar::Bool), _) => false,
        (Ty::Scalar(_), value) => integer(value) == Some(0),
        (Ty::Slice(_), Value::Array(items)) => items.is_empty(),
        (Ty::Map(_), Value::Object(entries)) => entries.is_empty(),
        _ => false,
    }
}

/// Whether `omitzero` drops the field: the Go zero value, which for a `metav1.Time` is also
/// a time that reads back as year 1 (its `IsZero`). The table marks only such fields.
fn is_zero(ty: &Ty, value: Option<&Value>) -> bool {
    match (ty, value) {
        (_, None) => true,
        (Ty::Time, Some(Value::String(text))) => go_time::go_json(text).is_ok_and(|j| j == "null"),
        _ => false,
    }
}

/// The value of a JSON integer; Go refuses fractions and exponents for integer fields.
fn integer(value: &Value) -> Option<i128> {
    let Value::Number(n) = value else {
        return None;
    };
    n.as_i64()
        .map(i128::from)
        .or_else(|| n.as_u64().map(i128::from))
}

/// Raw JSON kept as given (`metav1.FieldsV1`): Go compacts it and escapes HTML
/// characters but keeps the key order.
fn write_raw_json(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Number(n) => out.extend_from_slice(n.to_string().as_bytes()),
        Value::String(s) => write_go_string(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_raw_json(out, item);
            }
            out.push(b']');
        }
        Value::Object(entries) => {
            out.push(b'{');
            for (i, (key, item)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_go_string(out, key);
                out.push(b':');
                write_raw_json(out, item);
            }
            out.push(b'}');
        }
    }
}

/// A JSON string as Go's `encoding/json` writes it with HTML escaping on (the default
/// of `json.Marshal`): `<`, `>`, `&`, U+2028 and U+2029 become `\u` escapes, other
/// non-ASCII characters stay as UTF-8. Backspace and form feed use the short escapes of
/// Go 1.22 and later.
pub fn write_go_string(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let escape: Option<&[u8]> = match b {
            b'"' => Some(b"\\\""),
            b'\\' => Some(b"\\\\"),
            b'\n' => Some(b"\\n"),
            b'\r' => Some(b"\\r"),
            b'\t' => Some(b"\\t"),
            0x08 => Some(b"\\b"),
            0x0c => Some(b"\\f"),
            _ => None,
        };
        let needs_hex = b < 0x20 || b == b'<' || b == b'>' || b == b'&';
        // U+2028 and U+2029 are E2 80 A8 / E2 80 A9 in UTF-8.
        let line_separator = b == 0xe2
            && bytes.get(i + 1) == Some(&0x80)
            && matches!(bytes.get(i + 2), Some(0xa8 | 0xa9));
        if escape.is_none() && !needs_hex && !line_separator {
            i += 1;
            continue;
        }
        out.extend_from_slice(&bytes[start..i]);
        if let Some(escape) = escape {
            out.extend_from_slice(escape);
            i += 1;
        } else if line_separator {
            out.extend_from_slice(if bytes[i + 2] == 0xa8 {
                b"\\u2028"
            } else {
                b"\\u2029"
            });
            i += 3;
        } else {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0x0f)]);
            i += 1;
        }
        start = i;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn go_string(s: &str) -> String {
        let mut out = Vec::new();
        write_go_string(&mut out, s);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn escapes_like_go() {
        assert_eq!(go_string("a<b>&c"), r#""a\u003cb\u003e\u0026c""#);
        assert_eq!(go_string("q\"\\"), r#""q\"\\""#);
        assert_eq!(go_string("\n\r\t"), r#""\n\r\t""#);
        assert_eq!(go_string("\u{8}\u{c}"), r#""\b\f""#);
        assert_eq!(go_string("\u{1}\u{1f}\u{7f}"), "\"\\u0001\\u001f\u{7f}\"");
        assert_eq!(go_string("x\u{2028}y\u{2029}z"), r#""x\u2028y\u2029z""#);
        assert_eq!(go_string("héllo ✓ 日本"), "\"héllo ✓ 日本\"");
    }
}
