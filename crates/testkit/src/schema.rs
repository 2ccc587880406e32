//! A small JSON Schema checker for the subset `docs/report.schema.json`
//! uses: `$ref` to `#/$defs/…`, `type` (one or a list), `properties`,
//! `required`, `additionalProperties` (false or a schema), `items`,
//! `minItems`, `maxItems`, `enum`, `anyOf`, `minimum`, `maximum`,
//! `exclusiveMinimum`, and the annotations `title`, `description`,
//! `$schema`, `$id`, `$defs`.
//!
//! Why not the `jsonschema` crate: it pulls in a regex engine, an HTTP
//! client for remote references (unless trimmed) and dozens of crates,
//! minutes of compile time on this two-core machine for a check that needs
//! a hundred lines. Any keyword outside the subset makes the checker fail
//! loudly, so the schema cannot silently grow beyond what is checked.

use serde_json::Value;

const KNOWN: &[&str] = &[
    "$ref",
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "enum",
    "anyOf",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "title",
    "description",
    "$schema",
    "$id",
    "$defs",
];

/// Validates `value` against `schema` (whose `$defs` resolve `$ref`s);
/// returns every violation with its JSON path.
pub fn validate(schema: &Value, value: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    check(schema, schema, value, "$", &mut errors);
    errors
}

fn type_ok(t: &str, v: &Value) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        other => panic!("unknown type {other}"),
    }
}

fn check(root: &Value, s: &Value, v: &Value, path: &str, errors: &mut Vec<String>) {
    let Some(s) = s.as_object() else {
        if s == &Value::Bool(false) {
            errors.push(format!("{path}: not allowed"));
        }
        return;
    };
    for k in s.keys() {
        assert!(
            KNOWN.contains(&k.as_str()),
            "schema keyword {k} is not supported by the checker"
        );
    }
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        let name = r.strip_prefix("#/$defs/").expect("local $defs reference");
        let target = &root["$defs"][name];
        assert!(!target.is_null(), "unresolved $ref {r}");
        check(root, target, v, path, errors);
    }
    if let Some(t) = s.get("type") {
        let ok = match t {
            Value::String(t) => type_ok(t, v),
            Value::Array(ts) => ts.iter().any(|t| type_ok(t.as_str().unwrap(), v)),
            _ => panic!("bad type"),
        };
        if !ok {
            errors.push(format!("{path}: expected type {t}, got {v}"));
            return;
        }
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        if !e.contains(v) {
            errors.push(format!("{path}: {v} not in {e:?}"));
        }
    }
    if let Some(alts) = s.get("anyOf").and_then(Value::as_array) {
        let ok = alts.iter().any(|a| {
            let mut e = Vec::new();
            check(root, a, v, path, &mut e);
            e.is_empty()
        });
        if !ok {
            errors.push(format!("{path}: matches none of anyOf: {v}"));
        }
    }
    if let Some(x) = v.as_f64() {
        if let Some(m) = s.get("minimum").and_then(Value::as_f64) {
            if x < m {
                errors.push(format!("{path}: {x} < minimum {m}"));
            }
        }
        if let Some(m) = s.get("maximum").and_then(Value::as_f64) {
            if x > m {
                errors.push(format!("{path}: {x} > maximum {m}"));
            }
        }
        if let Some(m) = s.get("exclusiveMinimum").and_then(Value::as_f64) {
            if x <= m {
                errors.push(format!("{path}: {x} <= exclusiveMinimum {m}"));
            }
        }
    }
    if let Some(o) = v.as_object() {
        let props = s.get("properties").and_then(Value::as_object);
        if let Some(req) = s.get("required").and_then(Value::as_array) {
            for r in req {
                if !o.contains_key(r.as_str().unwrap()) {
                    errors.push(format!("{path}: missing required {r}"));
                }
            }
        }
        for (k, val) in o {
            let p = format!("{path}.{k}");
            match props.and_then(|ps| ps.get(k)) {
                Some(ps) => check(root, ps, val, &p, errors),
                None => match s.get("additionalProperties") {
                    Some(Value::Bool(false)) => errors.push(format!("{p}: not allowed")),
                    Some(extra @ Value::Object(_)) => check(root, extra, val, &p, errors),
                    _ => {}
                },
            }
        }
    }
    if let Some(a) = v.as_array() {
        if let Some(items) = s.get("items") {
            for (i, x) in a.iter().enumerate() {
                check(root, items, x, &format!("{path}[{i}]"), errors);
            }
        }
        if let Some(m) = s.get("minItems").and_then(Value::as_u64) {
            if (a.len() as u64) < m {
                errors.push(format!("{path}: fewer than {m} items"));
            }
        }
        if let Some(m) = s.get("maxItems").and_then(Value::as_u64) {
            if (a.len() as u64) > m {
                errors.push(format!("{path}: more than {m} items"));
            }
        }
    }
}
