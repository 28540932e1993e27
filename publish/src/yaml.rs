//! A small YAML writer for JSON values (`zonemesh publish --dry-run -o yaml`): block style,
//! every string double-quoted (a JSON string is a valid YAML double-quoted scalar, so no value
//! can be mistaken for a number, a boolean or null), plain keys where they are safe.
//!
//! (Kept by hand: serde_yaml, the crate everyone used, is no longer maintained, and this output
//! needs no parser, only a writer of a few dozen lines whose output the CLI test reads back with
//! PyYAML.)

use serde_json::Value;

fn plain_key(k: &str) -> bool {
    !k.is_empty()
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/'))
        && k.as_bytes()[0].is_ascii_alphabetic()
        && !matches!(
            k.to_ascii_lowercase().as_str(),
            "y" | "n" | "yes" | "no" | "on" | "off" | "true" | "false" | "null"
        )
}

fn key(k: &str) -> String {
    if plain_key(k) {
        k.to_owned()
    } else {
        Value::String(k.to_owned()).to_string()
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(_) => v.to_string(),
        Value::Array(a) if a.is_empty() => "[]".into(),
        Value::Object(o) if o.is_empty() => "{}".into(),
        _ => unreachable!("collections are written in block style"),
    }
}

fn is_block(v: &Value) -> bool {
    matches!(v, Value::Array(a) if !a.is_empty()) || matches!(v, Value::Object(o) if !o.is_empty())
}

fn write(out: &mut String, v: &Value, indent: usize) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(o) if !o.is_empty() => {
            for (k, item) in o {
                if is_block(item) {
                    out.push_str(&format!("{pad}{}:\n", key(k)));
                    let inner = if item.is_array() { indent } else { indent + 2 };
                    write(out, item, inner);
                } else {
                    out.push_str(&format!("{pad}{}: {}\n", key(k), scalar(item)));
                }
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for item in a {
                if is_block(item) {
                    // The first line of the item goes after "- ", the rest indented under it.
                    let mut inner = String::new();
                    write(&mut inner, item, indent + 2);
                    let body = &inner[indent + 2..];
                    out.push_str(&format!("{pad}- {body}"));
                } else {
                    out.push_str(&format!("{pad}- {}\n", scalar(item)));
                }
            }
        }
        other => out.push_str(&format!("{pad}{}\n", scalar(other))),
    }
}

/// Documents separated by `---`.
pub fn documents<'a>(values: impl IntoIterator<Item = &'a Value>) -> String {
    let mut out = String::new();
    for v in values {
        out.push_str("---\n");
        write(&mut out, v, 0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_values_come_out_as_block_yaml_with_quoted_strings() {
        let v = json!({
            "apiVersion": "v1",
            "metadata": {"name": "x", "labels": {"app.kubernetes.io/managed-by": "zonemesh"}},
            "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": "a1"}}}],
                     "empty": [], "yes": "true"},
        });
        let text = documents([&v]);
        assert_eq!(
            text,
            "---\napiVersion: \"v1\"\nmetadata:\n  labels:\n    app.kubernetes.io/managed-by: \"zonemesh\"\n  name: \"x\"\nspec:\n  empty: []\n  members:\n  - selector:\n      exactMatch:\n        name: \"a1\"\n    type: \"Node\"\n  tier: 1\n  \"yes\": \"true\"\n"
        );
    }
}
