//! Open string enums: the known values of an Argo string field as Rust variants, with a catch-all
//! that keeps any other value verbatim. Objects written by newer or older controllers then still
//! deserialize, and serializing them back gives the same string.

/// Declares an enum that (de)serializes as a plain string.
///
/// Each known variant maps to its wire value; any other string becomes `Other(String)`. The
/// schema is a plain `type: string`, as in Argo's CRDs (which list no enum values).
macro_rules! string_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident => $value:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )+
            /// A value not known to this version, kept as written.
            Other(String),
        }

        impl $name {
            /// The known values, in declaration order.
            pub const KNOWN: &'static [$name] = &[$($name::$variant),+];

            /// The wire form of this value.
            pub fn as_str(&self) -> &str {
                match self {
                    $( $name::$variant => $value, )+
                    $name::Other(other) => other.as_str(),
                }
            }
        }

        impl From<&str> for $name {
            fn from(value: &str) -> Self {
                match value {
                    $( $value => $name::$variant, )+
                    other => $name::Other(other.to_owned()),
                }
            }
        }

        impl From<String> for $name {
            fn from(value: String) -> Self {
                match value.as_str() {
                    $( $value => $name::$variant, )+
                    _ => $name::Other(value),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                <String as serde::Deserialize>::deserialize(deserializer).map($name::from)
            }
        }

        impl schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn inline_schema() -> bool {
                true
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({ "type": "string" })
            }
        }
    };
}

pub(crate) use string_enum;

#[cfg(test)]
mod tests {
    string_enum! {
        /// Test colours.
        pub enum Colour {
            Red => "red",
            Blue => "Blue",
        }
    }

    #[test]
    fn known_values_map_to_variants() {
        assert_eq!(Colour::from("red"), Colour::Red);
        assert_eq!(Colour::Blue.as_str(), "Blue");
        assert_eq!(Colour::KNOWN, &[Colour::Red, Colour::Blue]);
        assert_eq!(Colour::Red, "red");
    }

    #[test]
    fn unknown_values_round_trip_verbatim() {
        let parsed: Colour = serde_json::from_str("\"Green\"").unwrap();
        assert_eq!(parsed, Colour::Other("Green".into()));
        assert_eq!(serde_json::to_string(&parsed).unwrap(), "\"Green\"");
        // Matching is case-sensitive, as in Argo.
        assert_eq!(Colour::from("blue"), Colour::Other("blue".into()));
    }

    #[test]
    fn non_strings_are_rejected() {
        assert!(serde_json::from_str::<Colour>("3").is_err());
    }

    #[test]
    fn schema_is_a_plain_string() {
        let schema = schemars::schema_for!(Colour);
        assert_eq!(schema.get("type"), Some(&serde_json::json!("string")));
        assert!(schema.get("enum").is_none());
    }
}
