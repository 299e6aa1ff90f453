//! Codex strict structured outputs: every object's properties all required, formerly optional
//! ones nullable, `additionalProperties: false` everywhere.

use handoff_adapters::codex_strict_schema;
use handoff_core::provider_output_schema;
use serde_json::{Value, json};

/// Every subschema of `schema`, with its JSON pointer. Follows the keywords that hold
/// subschemas (not `properties` maps or `enum` values themselves).
fn subschemas<'a>(pointer: String, schema: &'a Value, out: &mut Vec<(String, &'a Value)>) {
    let Some(map) = schema.as_object() else {
        return;
    };
    out.push((pointer.clone(), schema));
    for keyword in ["properties", "$defs", "definitions", "patternProperties"] {
        if let Some(Value::Object(children)) = map.get(keyword) {
            for (name, child) in children {
                subschemas(format!("{pointer}/{keyword}/{name}"), child, out);
            }
        }
    }
    for keyword in ["anyOf", "oneOf", "allOf", "prefixItems"] {
        if let Some(Value::Array(children)) = map.get(keyword) {
            for (i, child) in children.iter().enumerate() {
                subschemas(format!("{pointer}/{keyword}/{i}"), child, out);
            }
        }
    }
    for keyword in ["items", "additionalProperties", "not", "contains"] {
        if let Some(child @ Value::Object(_)) = map.get(keyword) {
            subschemas(format!("{pointer}/{keyword}"), child, out);
        }
    }
}

fn all_subschemas(schema: &Value) -> Vec<(String, &Value)> {
    let mut out = Vec::new();
    subschemas(String::new(), schema, &mut out);
    out
}

fn is_object_schema(s: &Value) -> bool {
    match s.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.contains(&json!("object")),
        _ => s.get("properties").is_some(),
    }
}

/// Whether `s` lets `null` through (by type, or by an `anyOf` branch).
fn accepts_null(s: &Value) -> bool {
    let by_type = match s.get("type") {
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(ts)) => ts.contains(&json!("null")),
        None => false,
        Some(_) => false,
    };
    let by_enum = s
        .get("enum")
        .and_then(Value::as_array)
        .is_none_or(|e| e.contains(&Value::Null));
    let by_const = s.get("const").is_none_or(Value::is_null);
    let by_any_of = s
        .get("anyOf")
        .and_then(Value::as_array)
        .is_some_and(|branches| branches.iter().any(accepts_null));
    (by_type && by_enum && by_const) || by_any_of
}

fn required_names(s: &Value) -> Vec<String> {
    s.get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Checks `strict` against `original` (the strict-mode rules) and returns how many
/// formerly optional properties were made nullable.
fn check_strict(original: &Value, strict: &Value) -> usize {
    let mut made_nullable = 0;
    for (pointer, s) in all_subschemas(strict) {
        if !is_object_schema(s) {
            continue;
        }
        assert_eq!(
            s.get("additionalProperties"),
            Some(&json!(false)),
            "{pointer}: additionalProperties must be false"
        );
        let props = s
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or_else(|| panic!("{pointer}: object schema without properties"));
        let mut required = required_names(s);
        required.sort();
        let mut names: Vec<String> = props.keys().cloned().collect();
        names.sort();
        assert_eq!(
            required, names,
            "{pointer}: every property must be required"
        );

        let before = original
            .pointer(&pointer)
            .unwrap_or_else(|| panic!("{pointer}: not in the original schema"));
        let was_required = required_names(before);
        for (name, prop) in props {
            let old = &before["properties"][name];
            if was_required.contains(name) {
                // Required properties are untouched apart from the recursive transform.
                assert_eq!(
                    old.get("type"),
                    prop.get("type"),
                    "{pointer}/{name}: type of a required property changed"
                );
            } else {
                assert!(
                    accepts_null(prop),
                    "{pointer}/{name}: formerly optional property must be nullable: {prop}"
                );
                made_nullable += 1;
            }
        }
    }
    made_nullable
}

#[test]
fn provider_output_schema_becomes_strict() {
    let original = provider_output_schema();
    let strict = codex_strict_schema(&original);
    let nullable = check_strict(&original, &strict);
    // evidence[].path, findings[].file, findings[].line and the three self-reported counts.
    assert!(nullable >= 6, "only {nullable} optional properties found");
    // The root and every nested object are covered.
    let objects = all_subschemas(&strict)
        .into_iter()
        .filter(|(_, s)| is_object_schema(s))
        .count();
    assert!(objects >= 4, "only {objects} object schemas found");
    // `$schema`/`$id` are kept, as in the reference.
    assert_eq!(original.get("$schema"), strict.get("$schema"));
    // Idempotent: a strict schema is already strict.
    assert_eq!(codex_strict_schema(&strict), strict);
}

#[test]
fn strict_schema_snapshot() {
    insta::with_settings!({omit_expression => true}, {
        insta::assert_json_snapshot!(codex_strict_schema(&provider_output_schema()));
    });
}

#[test]
fn strict_schema_handles_refs_arrays_and_nested_objects() {
    let original = json!({
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "b": {"type": "integer"},
            "c": {"$ref": "#/$defs/X"},
            "d": {"type": ["string", "null"]},
            "list": {"type": "array", "items": {
                "type": "object",
                "properties": {"k": {"type": "string"}, "v": {"type": ["number", "boolean"]}},
                "required": ["k"]
            }}
        },
        "required": ["a", "list"],
        "$defs": {"X": {"type": "object", "properties": {"y": {"type": "string"}}}}
    });
    let strict = codex_strict_schema(&original);
    // b, c, d at the root, v in the items, y in $defs.
    assert_eq!(check_strict(&original, &strict), 5);
    assert_eq!(
        strict["properties"]["b"]["type"],
        json!(["integer", "null"])
    );
    assert_eq!(
        strict["properties"]["c"],
        json!({"anyOf": [{"$ref": "#/$defs/X"}, {"type": "null"}]})
    );
    assert_eq!(strict["properties"]["d"]["type"], json!(["string", "null"]));
    assert_eq!(
        strict["properties"]["list"]["items"]["properties"]["v"]["type"],
        json!(["number", "boolean", "null"])
    );
    assert_eq!(strict["$defs"]["X"]["required"], json!(["y"]));
    assert_eq!(strict["$defs"]["X"]["additionalProperties"], json!(false));
    // The input is not modified.
    assert_eq!(original["required"], json!(["a", "list"]));
}

#[test]
fn strict_schema_lets_null_through_optional_enums() {
    let original = json!({
        "type": "object",
        "properties": {
            "level": {"type": "string", "enum": ["low", "high"]},
            "kind": {"type": "string", "const": "x"}
        },
        "required": []
    });
    let strict = codex_strict_schema(&original);
    check_strict(&original, &strict);
}

#[test]
fn strict_schema_keeps_a_property_named_properties() {
    let original = json!({
        "type": "object",
        "properties": {
            "properties": {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]},
            "name": {"type": "string"}
        },
        "required": ["properties", "name"]
    });
    let strict = codex_strict_schema(&original);
    let names: Vec<&String> = strict["properties"].as_object().unwrap().keys().collect();
    assert_eq!(names, ["name", "properties"], "{strict:#}");
    check_strict(&original, &strict);
}
