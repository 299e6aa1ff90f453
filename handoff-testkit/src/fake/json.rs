//! A tiny JSON value that keeps object keys in insertion order.
//!
//! The real CLIs print keys in a fixed order (`"type"` first, and so on). `serde_json::Map` sorts
//! keys unless the `preserve_order` feature is on, and turning that feature on here would change
//! `serde_json` for every crate in the workspace, so the fake renders through this type instead.

use std::fmt::Write as _;

/// An ordered JSON value.
#[derive(Debug, Clone)]
pub(crate) enum J {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
    /// A `serde_json` value passed through as is (keys sorted).
    Value(serde_json::Value),
}

impl J {
    /// Renders compact JSON, like `JSON.stringify` / `serde_json::to_string`.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        self.render_into(&mut out);
        out
    }

    fn render_into(&self, out: &mut String) {
        match self {
            J::Null => out.push_str("null"),
            J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            J::Int(i) => {
                let _ = write!(out, "{i}");
            }
            J::Float(f) => match serde_json::Number::from_f64(*f) {
                Some(n) => out.push_str(&n.to_string()),
                None => out.push_str("null"),
            },
            J::Str(s) => push_str_literal(out, s),
            J::Arr(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.render_into(out);
                }
                out.push(']');
            }
            J::Obj(fields) => {
                out.push('{');
                for (i, (k, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    push_str_literal(out, k);
                    out.push(':');
                    v.render_into(out);
                }
                out.push('}');
            }
            J::Value(v) => out.push_str(&v.to_string()),
        }
    }

    /// Appends a field to an object (no-op on other values).
    pub(crate) fn push(&mut self, key: &str, value: impl Into<J>) {
        if let J::Obj(fields) = self {
            fields.push((key.to_owned(), value.into()));
        }
    }

    /// The field `key` of an object.
    pub(crate) fn get(&self, key: &str) -> Option<&J> {
        match self {
            J::Obj(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The string value of the field `key` of an object.
    pub(crate) fn str_field(&self, key: &str) -> Option<&str> {
        match self.get(key) {
            Some(J::Str(s)) => Some(s),
            _ => None,
        }
    }

    /// Replaces the field `key` of an object in place, or appends it (no-op on other values).
    pub(crate) fn set(&mut self, key: &str, value: impl Into<J>) {
        if let J::Obj(fields) = self {
            let value = value.into();
            match fields.iter_mut().find(|(k, _)| k == key) {
                Some((_, v)) => *v = value,
                None => fields.push((key.to_owned(), value)),
            }
        }
    }
}

fn push_str_literal(out: &mut String, s: &str) {
    out.push_str(&serde_json::Value::String(s.to_owned()).to_string());
}

impl From<&str> for J {
    fn from(s: &str) -> Self {
        J::Str(s.to_owned())
    }
}

impl From<String> for J {
    fn from(s: String) -> Self {
        J::Str(s)
    }
}

impl From<&String> for J {
    fn from(s: &String) -> Self {
        J::Str(s.clone())
    }
}

impl From<bool> for J {
    fn from(b: bool) -> Self {
        J::Bool(b)
    }
}

impl From<i64> for J {
    fn from(i: i64) -> Self {
        J::Int(i)
    }
}

impl From<i32> for J {
    fn from(i: i32) -> Self {
        J::Int(i64::from(i))
    }
}

impl From<u32> for J {
    fn from(i: u32) -> Self {
        J::Int(i64::from(i))
    }
}

impl From<u64> for J {
    fn from(i: u64) -> Self {
        J::Int(i64::try_from(i).unwrap_or(i64::MAX))
    }
}

impl From<usize> for J {
    fn from(i: usize) -> Self {
        J::Int(i64::try_from(i).unwrap_or(i64::MAX))
    }
}

impl From<f64> for J {
    fn from(f: f64) -> Self {
        J::Float(f)
    }
}

impl From<Vec<J>> for J {
    fn from(v: Vec<J>) -> Self {
        J::Arr(v)
    }
}

impl From<serde_json::Value> for J {
    fn from(v: serde_json::Value) -> Self {
        J::Value(v)
    }
}

impl<T: Into<J>> From<Option<T>> for J {
    fn from(v: Option<T>) -> Self {
        v.map_or(J::Null, Into::into)
    }
}

/// `obj! { "type" => "result", "n" => 2 }` builds an ordered object.
macro_rules! obj {
    ($($k:expr => $v:expr),* $(,)?) => {
        $crate::fake::json::J::Obj(vec![$(($k.to_string(), $crate::fake::json::J::from($v))),*])
    };
}

/// `arr![a, b]` builds an array of ordered values.
macro_rules! arr {
    ($($v:expr),* $(,)?) => {
        $crate::fake::json::J::Arr(vec![$($crate::fake::json::J::from($v)),*])
    };
}

pub(crate) use arr;
pub(crate) use obj;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_in_insertion_order() {
        let v = obj! {
            "type" => "result",
            "a" => arr![1, "x", J::Null, true],
            "f" => 0.000276,
            "s" => "quote \" and \n newline",
        };
        assert_eq!(
            v.render(),
            r#"{"type":"result","a":[1,"x",null,true],"f":0.000276,"s":"quote \" and \n newline"}"#
        );
    }
}
