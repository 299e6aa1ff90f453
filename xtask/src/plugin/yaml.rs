//! The YAML we emit: block mappings (two-space indentation) whose values are plain words or JSON
//! scalars and lists (JSON's syntax is a subset of YAML's flow syntax). Anything else is refused,
//! so what this accepts is valid YAML and means what it says.

use serde_json::Value;

/// A YAML double-quoted scalar (JSON's string syntax is a subset of it).
pub(super) fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// Splits `---` front matter from the body and parses it.
pub(super) fn front_matter(text: &str) -> Result<(Value, &str), String> {
    let rest = text
        .strip_prefix("---\n")
        .ok_or("does not start with `---` front matter")?;
    let end = rest
        .find("\n---\n")
        .ok_or("front matter is not closed by `---`")?;
    let front = parse_yaml(&rest[..=end]).map_err(|e| format!("front matter: {e}"))?;
    Ok((front, &rest[end + 5..]))
}

pub(super) fn parse_yaml(text: &str) -> Result<Value, String> {
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .collect();
    let (value, used) = parse_block(&lines, 0, 0)?;
    if used != lines.len() {
        return Err(format!(
            "line {}: unexpected indentation",
            lines[used].0 + 1
        ));
    }
    Ok(value)
}

fn parse_block(
    lines: &[(usize, &str)],
    start: usize,
    indent: usize,
) -> Result<(Value, usize), String> {
    let mut map = serde_json::Map::new();
    let mut i = start;
    while i < lines.len() {
        let (n, line) = lines[i];
        let here = line.len() - line.trim_start_matches(' ').len();
        if here < indent {
            break;
        }
        if here > indent || line.contains('\t') {
            return Err(format!("line {}: unexpected indentation", n + 1));
        }
        let (key, value) = line[here..]
            .split_once(':')
            .ok_or(format!("line {}: expected `key: value`", n + 1))?;
        if key.is_empty()
            || !key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(format!("line {}: bad key `{key}`", n + 1));
        }
        if map.contains_key(key) {
            return Err(format!("line {}: duplicate key `{key}`", n + 1));
        }
        let value = value.trim_start();
        if value.is_empty() {
            let (child, next) = parse_block(lines, i + 1, indent + 2)?;
            if next == i + 1 {
                return Err(format!("line {}: `{key}` has no value", n + 1));
            }
            map.insert(key.to_owned(), child);
            i = next;
        } else {
            map.insert(
                key.to_owned(),
                scalar(value).map_err(|e| format!("line {}: {e}", n + 1))?,
            );
            i += 1;
        }
    }
    Ok((Value::Object(map), i))
}

fn scalar(value: &str) -> Result<Value, String> {
    if value.starts_with(['"', '[']) {
        return serde_json::from_str(value).map_err(|e| format!("not a JSON scalar or list: {e}"));
    }
    match value {
        "true" => return Ok(Value::Bool(true)),
        "false" => return Ok(Value::Bool(false)),
        _ => {}
    }
    // A plain scalar: a word that YAML cannot read as anything but this string.
    let plain = value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
        && value.starts_with(|c: char| c.is_ascii_alphabetic())
        && !matches!(value, "null" | "yes" | "no" | "on" | "off" | "y" | "n");
    if plain {
        Ok(Value::String(value.to_owned()))
    } else {
        Err(format!("`{value}` must be quoted"))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_yaml_subset_reads_what_we_write_and_refuses_the_rest() {
        let v =
            parse_yaml("a:\n  b: \"x: y\"\n  c: [\"Bash\", \"Read\"]\nd: true\ne: word\n").unwrap();
        assert_eq!(
            v,
            json!({"a": {"b": "x: y", "c": ["Bash", "Read"]}, "d": true, "e": "word"})
        );
        for bad in [
            "a: x: y\n",
            "a: no\n",
            "a: 'q'\n",
            "a: 1\n",
            "a:\n",
            "a: x\na: y\n",
            "- a\n",
        ] {
            assert!(parse_yaml(bad).is_err(), "{bad:?}");
        }
    }
}
