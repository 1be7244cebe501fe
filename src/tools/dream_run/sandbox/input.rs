//! The five tools' inputs: one `Deserialize` struct each, whose derived JSON Schema is the
//! `input_schema` the model is given, so what the model is told and what the tools parse
//! cannot drift apart.
//!
//! Parsing checks the input against that same schema first, only to word a refusal the model
//! can act on (serde's messages do not name the field whose value has the wrong type); the
//! struct is then read by serde. The tests hold the two to the same verdict on every input.

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::sources::SourceInput;
use crate::cli::json::type_name;

/// `shell`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ShellInput {
    /// e.g. grep -rn 'deploy' . | head -20
    pub(super) command: String,
}

/// `read_file`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ReadFileInput {
    /// Absolute, or relative to the memory directory
    pub(super) path: String,
    // The first line shown (1-based); the tool's description says so, the schema need not.
    pub(super) offset: Option<LineCount>,
    // How many lines to show at most.
    pub(super) limit: Option<LineCount>,
}

/// `write_file`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct WriteFileInput {
    /// Absolute, or relative to the memory directory
    pub(super) path: String,
    pub(super) content: String,
    /// Where each new or changed fact comes from
    pub(super) sources: Option<Vec<SourceInput>>,
}

/// `edit_file`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct EditFileInput {
    /// Absolute, or relative to the memory directory
    pub(super) path: String,
    pub(super) old_string: String,
    pub(super) new_string: String,
    /// Where each new or changed fact comes from
    pub(super) sources: Option<Vec<SourceInput>>,
}

/// `delete_file`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct DeleteFileInput {
    /// Absolute, or relative to the memory directory
    pub(super) path: String,
    /// What shows the memory is wrong or no longer needed
    pub(super) sources: Option<Vec<SourceInput>>,
}

/// A line number or a number of lines: an integer of at least 1 (larger than `usize` reads
/// as `usize::MAX`, which no file reaches). `2.0` is an integer too, as JSON Schema counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct LineCount(pub(super) usize);

impl<'de> Deserialize<'de> for LineCount {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let number = serde_json::Number::deserialize(deserializer)?;
        let whole = match (number.as_u64(), number.as_f64()) {
            (Some(n), _) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
            // The cast saturates: a huge whole float is "as many lines as there are".
            (None, Some(f)) if f.fract() == 0.0 && f >= 1.0 => Some(f as usize),
            _ => None,
        };
        match whole {
            Some(n) if n >= 1 => Ok(LineCount(n)),
            _ => Err(serde::de::Error::custom(format_args!(
                "{number} is not an integer of at least 1"
            ))),
        }
    }
}

impl JsonSchema for LineCount {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "LineCount".into()
    }

    // Inline: the model gets one self-contained object, no `$defs`.
    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        schemars::json_schema!({"type": "integer", "minimum": 1})
    }
}

/// The JSON Schema of a tool's input as the model API wants it: a plain object schema, without
/// the `$schema` and `title` a root schema carries, nor the struct's doc comment (written for
/// the reader of this file; the tool's own description speaks to the model).
pub(super) fn schema_of<T: JsonSchema>() -> Value {
    let mut schema = SchemaGenerator::default()
        .into_root_schema_for::<T>()
        .to_value();
    if let Some(object) = schema.as_object_mut() {
        object.remove("$schema");
        object.remove("title");
        object.remove("description");
    }
    schema
}

/// Reads `tool`'s input into `T`, or says in one line what is wrong with it.
pub(super) fn parse<T: JsonSchema + DeserializeOwned>(
    tool: &str,
    input: &Map<String, Value>,
) -> Result<T, String> {
    let refusal = |why: String| format!("{tool}: {why}");
    check(&schema_of::<T>(), input).map_err(refusal)?;
    T::deserialize(Value::Object(input.clone())).map_err(|e| refusal(e.to_string()))
}

/// The first way `input` breaks `schema` (an object schema of the shape [`schema_of`] gives
/// for the structs above: typed properties, `required`, `additionalProperties: false`,
/// `minimum`).
fn check(schema: &Value, input: &Map<String, Value>) -> Result<(), String> {
    let empty = Map::new();
    let properties = schema["properties"].as_object().unwrap_or(&empty);
    let names = || {
        properties
            .keys()
            .map(|k| format!("`{k}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    for (key, value) in input {
        let Some(property) = properties.get(key) else {
            return Err(format!(
                "unknown field `{key}`; the fields are {}: call it again without `{key}`",
                names()
            ));
        };
        check_value(key, property, value)?;
    }
    let required = schema["required"].as_array().map_or(&[][..], Vec::as_slice);
    for key in required.iter().filter_map(Value::as_str) {
        if !input.contains_key(key) {
            return Err(format!("missing required field `{key}`"));
        }
    }
    Ok(())
}

/// Whether one field's value has its property's type and bounds.
fn check_value(key: &str, property: &Value, value: &Value) -> Result<(), String> {
    let types: Vec<&str> = match &property["type"] {
        Value::String(one) => vec![one.as_str()],
        Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
        _ => return Ok(()),
    };
    let fits = |ty: &str| match ty {
        "string" => value.is_string(),
        "integer" => {
            value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        "array" => value.is_array(),
        "object" => value.is_object(),
        "null" => value.is_null(),
        _ => false,
    };
    if !types.iter().any(|ty| fits(ty)) {
        let expected = if types.contains(&"integer") {
            "an integer"
        } else if types.contains(&"array") {
            "an array"
        } else if types.contains(&"object") {
            "an object"
        } else {
            "a string"
        };
        return Err(format!(
            "`{key}` must be {expected}, not {}",
            type_name(value)
        ));
    }
    if let (Some(minimum), Some(n)) = (property["minimum"].as_f64(), value.as_f64()) {
        if n < minimum {
            return Err(format!("`{key}` must be at least {minimum}, not {n}"));
        }
    }
    // An array's items (`sources`: objects of their own fields).
    if let (Some(items), Some(item_schema)) = (value.as_array(), property.get("items")) {
        for (at, item) in items.iter().enumerate() {
            let name = format!("{key}[{at}]");
            match (item.as_object(), item_schema.get("properties")) {
                (Some(fields), Some(_)) => {
                    check(item_schema, fields).map_err(|why| format!("`{name}`: {why}"))?;
                }
                (None, Some(_)) => {
                    return Err(format!(
                        "`{name}` must be an object, not {}",
                        type_name(item)
                    ));
                }
                _ => check_value(&name, item_schema, item)?,
            }
        }
    }
    Ok(())
}
