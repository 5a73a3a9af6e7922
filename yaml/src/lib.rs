//! YAML as Python tools write it, read into JSON values: MSST's configs (with PyYAML's
//! `!!python/tuple` tags) and demucs' bag files. One reader for every YAML Stemflow reads, on
//! `yaml-rust2`'s event parser, driven without recursion:
//!
//! - tags are ignored (a `!!python/tuple` is a list, as PyYAML's `FullLoader` reads it);
//! - plain scalars are typed as PyYAML types them (YAML 1.1: integers, floats with a dot,
//!   booleans including `yes`/`on`, null as `null`, `~` or nothing), else strings; quoted
//!   scalars are strings;
//! - anchors and aliases are refused (no Python config uses them, and an alias of an alias is
//!   how a few bytes of YAML become gigabytes), as are nesting deeper than [`MAX_DEPTH`] and
//!   more than [`MAX_NODES`] values.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::TScalarStyle;

/// The deepest nesting of lists and mappings accepted.
pub const MAX_DEPTH: usize = 32;
/// The most values (scalars, lists and mappings) a document may hold.
pub const MAX_NODES: usize = 1 << 20;

/// A list or mapping being read.
enum Open {
    List(Vec<Value>),
    /// The mapping so far and the key waiting for its value.
    Mapping(Map<String, Value>, Option<String>),
}

/// Reads the first YAML document of `text` into a JSON value (an empty document is null).
/// Refuses what the module documentation lists, with the line it was found on.
pub fn read_yaml(text: &str) -> Result<Value, String> {
    let mut parser = Parser::new_from_str(text);
    let mut open: Vec<Open> = Vec::new();
    let mut nodes = 0usize;
    loop {
        let (event, mark) = parser.next_token().map_err(|e| e.to_string())?;
        let line = mark.line();
        let value = match event {
            Event::StreamEnd | Event::DocumentEnd => return Ok(Value::Null),
            Event::Nothing | Event::StreamStart | Event::DocumentStart => continue,
            Event::Alias(_) => return Err(anchors_refused(line)),
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                if anchor != 0 {
                    return Err(anchors_refused(line));
                }
                if open.len() == MAX_DEPTH {
                    return Err(format!(
                        "line {line}: nested deeper than {MAX_DEPTH} levels"
                    ));
                }
                nodes += 1;
                open.push(match event {
                    Event::SequenceStart(..) => Open::List(Vec::new()),
                    _ => Open::Mapping(Map::new(), None),
                });
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => match open.pop() {
                Some(Open::List(items)) => Value::Array(items),
                Some(Open::Mapping(map, None)) => Value::Object(map),
                Some(Open::Mapping(_, Some(key))) => {
                    return Err(format!("line {line}: `{key}` has no value"))
                }
                None => return Err(format!("line {line}: a list or mapping ends twice")),
            },
            Event::Scalar(text, style, anchor, _) => {
                if anchor != 0 {
                    return Err(anchors_refused(line));
                }
                nodes += 1;
                match style {
                    TScalarStyle::Plain => plain_scalar(&text),
                    _ => Value::String(text),
                }
            }
        };
        if nodes > MAX_NODES {
            return Err(format!("more than {MAX_NODES} values"));
        }
        match open.last_mut() {
            None => return Ok(value),
            Some(Open::List(items)) => items.push(value),
            Some(Open::Mapping(map, pending)) => match pending.take() {
                Some(key) => {
                    map.insert(key, value);
                }
                None => match value {
                    Value::String(key) => *pending = Some(key),
                    Value::Number(_) | Value::Bool(_) | Value::Null => {
                        *pending = Some(value.to_string())
                    }
                    _ => return Err(format!("line {line}: a mapping key is a list or mapping")),
                },
            },
        }
    }
}

/// Why a document with an anchor or alias found on `line` is refused.
fn anchors_refused(line: usize) -> String {
    format!(
        "YAML anchors and aliases (`&name`, `*name`) are not supported (line {line}); write the \
         values out"
    )
}

/// A plain (unquoted) scalar, typed by PyYAML's (YAML 1.1) resolvers, which MSST and demucs
/// read their files with: `955717e8` and `1e-5` are strings there (a float needs a dot, an
/// exponent its sign), `yes`/`on` are true, `None` is a string. Infinities and NaN, which JSON
/// cannot hold, and sexagesimal numbers stay strings.
fn plain_scalar(text: &str) -> Value {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => {
            return Value::Bool(true)
        }
        "false" | "False" | "FALSE" | "no" | "No" | "NO" | "off" | "Off" | "OFF" => {
            return Value::Bool(false)
        }
        _ => {}
    }
    if let Some(int) = yaml11_int(text) {
        return Value::from(int);
    }
    if is_yaml11_float(text) {
        if let Ok(float) = text.replace('_', "").parse::<f64>() {
            return Value::from(float);
        }
    }
    Value::String(text.to_owned())
}

/// A YAML 1.1 integer: decimal, `0b…`, `0x…` or `0…` octal, with `_` separators.
fn yaml11_int(text: &str) -> Option<i64> {
    let (negative, digits) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let digits = digits.replace('_', "");
    let (radix, body) = if let Some(body) = digits.strip_prefix("0b") {
        (2, body)
    } else if let Some(body) = digits.strip_prefix("0x") {
        (16, body)
    } else if digits.len() > 1 && digits.starts_with('0') {
        (8, &digits[1..])
    } else {
        (10, digits.as_str())
    };
    if body.is_empty() || !body.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = i64::from_str_radix(body, radix).ok()?;
    Some(if negative { -magnitude } else { magnitude })
}

/// Whether `text` is a YAML 1.1 float: `[-+]?[0-9_]*.[0-9_]*` with a digit, and an optional
/// exponent `[eE][-+][0-9]+`.
fn is_yaml11_float(text: &str) -> bool {
    let text = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(at) => (&text[..at], Some(&text[at + 1..])),
        None => (text, None),
    };
    let Some((whole, fraction)) = mantissa.split_once('.') else {
        return false;
    };
    let is_digits = |s: &str| s.chars().all(|c| c.is_ascii_digit() || c == '_');
    let has_digit = mantissa.chars().any(|c| c.is_ascii_digit());
    let is_exponent = exponent.is_none_or(|e| {
        e.len() > 1 && e.starts_with(['-', '+']) && e[1..].chars().all(|c| c.is_ascii_digit())
    });
    has_digit && is_digits(whole) && is_digits(fraction) && is_exponent
}

/// An MSST config (`section:` mappings of `key: value`) flattened to `section.key` → value
/// (what a key holds is kept whole: a list stays a list). A document that is not a mapping of
/// mappings is refused, naming the section.
pub fn read_msst_yaml(text: &str) -> Result<BTreeMap<String, Value>, String> {
    let Value::Object(sections) = read_yaml(text)? else {
        return Err("the config is not a mapping of sections (`audio:`, `model:`, …)".into());
    };
    let mut values = BTreeMap::new();
    for (section, keys) in sections {
        match keys {
            Value::Object(keys) => {
                for (key, value) in keys {
                    values.insert(format!("{section}.{key}"), value);
                }
            }
            // An empty section (`inference:` with nothing under it).
            Value::Null => {}
            _ => {
                return Err(format!(
                    "`{section}` is not a section of `key: value` lines"
                ))
            }
        }
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn msst_configs_read_with_their_python_tags() {
        let text = "audio:\n  chunk_size: 352800\n  dim_t: 801 # comment\n  min_mean_abs: 0.000\n\
                    model:\n  stereo: true\n  freqs_per_bands: !!python/tuple\n    - 2\n    - 4\n  \
                    flash_attn: True\n  eps: 1.0e-05\n\
                    training:\n  instruments:\n  - vocals\n  - other\n  target_instrument: 'vocals'\n  \
                    nothing: ~\n  name: \"x: y\"\ninference:\n";
        let values = read_msst_yaml(text).unwrap();
        assert_eq!(values["audio.chunk_size"], 352800);
        assert_eq!(values["audio.dim_t"], 801);
        assert_eq!(values["audio.min_mean_abs"], 0.0);
        assert_eq!(values["model.stereo"], true);
        assert_eq!(values["model.freqs_per_bands"], json!([2, 4]));
        assert_eq!(values["model.flash_attn"], true);
        assert_eq!(values["model.eps"], 1e-5);
        assert_eq!(values["training.instruments"], json!(["vocals", "other"]));
        assert_eq!(values["training.target_instrument"], "vocals");
        assert_eq!(values["training.nothing"], Value::Null);
        assert_eq!(values["training.name"], "x: y");
        assert_eq!(values.len(), 11);
    }

    #[test]
    fn plain_scalars_are_typed_as_pyyaml_types_them() {
        let cases = [
            ("955717e8", json!("955717e8")),
            ("1e-5", json!("1e-5")),
            ("1.0e5", json!("1.0e5")),
            ("1.0e+5", json!(1e5)),
            ("1.", json!(1.0)),
            (".5", json!(0.5)),
            (".", json!(".")),
            ("-3", json!(-3)),
            ("1_000", json!(1000)),
            ("0x1f", json!(31)),
            ("017", json!(15)),
            ("0", json!(0)),
            ("yes", json!(true)),
            ("Off", json!(false)),
            ("None", json!("None")),
            ("~", Value::Null),
            (".inf", json!(".inf")),
            ("f7e0c4bc", json!("f7e0c4bc")),
        ];
        for (text, expected) in cases {
            assert_eq!(plain_scalar(text), expected, "{text}");
        }
    }

    #[test]
    fn lists_at_their_key_s_indent_and_quoted_inline_lists_read() {
        let text = "model:\n  freqs_per_bands: !!python/tuple\n  - 2\n  - 4\n  zero_dc: false\n\
                    training:\n  instruments: ['Drums', 'Bass', 'Other', 'Vocals']\n  \
                    target_instrument: null\n";
        let values = read_msst_yaml(text).unwrap();
        assert_eq!(values["model.freqs_per_bands"], json!([2, 4]));
        assert_eq!(values["model.zero_dc"], false);
        assert_eq!(
            values["training.instruments"],
            json!(["Drums", "Bass", "Other", "Vocals"])
        );
        assert_eq!(values["training.target_instrument"], Value::Null);
    }

    #[test]
    fn flow_lists_and_quoted_numbers_keep_their_types() {
        let values = read_msst_yaml("a:\n  b: [1, 2.5, x]\n  c: '3'\n  d: \"true\"\n").unwrap();
        assert_eq!(values["a.b"], json!([1, 2.5, "x"]));
        assert_eq!(values["a.c"], "3");
        assert_eq!(values["a.d"], "true");
    }

    #[test]
    fn what_is_not_a_config_is_refused() {
        assert!(read_msst_yaml("model:\n  dim 3\n").is_err());
        assert!(read_msst_yaml("- 3\n").is_err());
        assert!(read_msst_yaml("model: 3\n").is_err());
        assert!(read_yaml("a: [1, 2\n").is_err());
        assert!(read_yaml("a: {b: 1\n").is_err());
    }

    #[test]
    fn aliases_anchors_and_deep_nesting_are_refused_not_expanded() {
        let bomb = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\n\
                    c: [*b, *b, *b, *b, *b, *b, *b, *b]\n";
        let error = read_yaml(bomb).unwrap_err();
        assert!(error.contains("anchors and aliases"), "{error}");
        assert!(error.contains("(line 1)"), "{error}");
        let error = read_yaml("a: 1\nb: &x [1]\nc: *x\n").unwrap_err();
        assert!(error.contains("not supported (line 2)"), "{error}");
        // An alias of no anchor is the parser's error, with its line too.
        let error = read_yaml("a: 1\nb: [*x]\n").unwrap_err();
        assert!(
            error.contains("anchor") && error.contains("line 2"),
            "{error}"
        );
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert!(read_yaml(&deep).unwrap_err().contains("deeper"));
        let deepest = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(read_yaml(&deepest).is_ok());
    }

    #[test]
    fn empty_and_scalar_documents_read() {
        assert_eq!(read_yaml("").unwrap(), Value::Null);
        assert_eq!(read_yaml("# only a comment\n").unwrap(), Value::Null);
        assert_eq!(read_yaml("3\n").unwrap(), json!(3));
        assert_eq!(
            read_yaml("{1: a, true: b}\n").unwrap(),
            json!({"1": "a", "true": "b"})
        );
    }
}
