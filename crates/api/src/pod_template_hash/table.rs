//! Shape of the generated Go struct table (`go_types.rs`).

/// Go basic kinds that appear in the pod template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    Str,
    Bool,
    I32,
    I64,
}

impl Scalar {
    /// Inclusive range of the Go integer kind, `None` for non-integers.
    pub fn int_range(self) -> Option<(i128, i128)> {
        match self {
            Scalar::Str | Scalar::Bool => None,
            Scalar::I32 => Some((i32::MIN.into(), i32::MAX.into())),
            Scalar::I64 => Some((i64::MIN.into(), i64::MAX.into())),
        }
    }
}

/// A Go type as `encoding/json` sees it.
#[derive(Debug)]
pub enum Ty {
    Scalar(Scalar),
    /// `*T`: omitted by omitempty only when nil; a set pointer is written even if the
    /// pointee is a zero value.
    Ptr(&'static Ty),
    /// `[]T`: nil is `null`, empty is `[]`.
    Slice(&'static Ty),
    /// `map[string]T`: keys sorted by bytes.
    Map(&'static Ty),
    /// A struct value: never omitted, fields in declaration order.
    Struct(&'static StructDef),
    /// `resource.Quantity`: canonical string form.
    Quantity,
    /// `intstr.IntOrString`: a bare number or a string.
    IntOrString,
    /// `metav1.Time`: RFC 3339 in UTC with whole seconds, `null` when zero.
    Time,
    /// `metav1.FieldsV1`: raw JSON, compacted.
    RawJson,
}

impl Ty {
    /// Whether `omitempty` drops the zero value of this type.
    pub fn zero_is_empty(&self) -> bool {
        matches!(self, Ty::Scalar(_) | Ty::Ptr(_) | Ty::Slice(_) | Ty::Map(_))
    }
}

/// One field of a Go struct, embedded structs already flattened.
#[derive(Debug)]
pub struct Field {
    pub json: &'static str,
    pub omitempty: bool,
    /// `omitzero` (apimachinery v0.34 and later): the zero value is left out. Only the
    /// current encoding honours it; see [`super::Encoding`].
    pub omitzero: bool,
    pub ty: Ty,
}

impl Field {
    pub const fn omitempty(json: &'static str, ty: Ty) -> Field {
        Field {
            json,
            omitempty: true,
            omitzero: false,
            ty,
        }
    }

    pub const fn omitempty_omitzero(json: &'static str, ty: Ty) -> Field {
        Field {
            json,
            omitempty: true,
            omitzero: true,
            ty,
        }
    }

    pub const fn always(json: &'static str, ty: Ty) -> Field {
        Field {
            json,
            omitempty: false,
            omitzero: false,
            ty,
        }
    }
}

/// A Go struct: its fields in declaration order.
#[derive(Debug)]
pub struct StructDef {
    pub go_name: &'static str,
    pub fields: &'static [Field],
}
