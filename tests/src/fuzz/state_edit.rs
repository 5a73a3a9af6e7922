//! Saved plugin states edited by the fuzzer: one naming another separator (a project or preset
//! that uses another model), and corrupted ones (truncated, bytes flipped, a wrong length, JSON
//! of the wrong shape).

use super::rng::Rng;
use crate::state::{decode_state, encode_state};

/// The state `saved` with the plugin's separator replaced by `separator` (a separator id:
/// `builtin`, `file:/path`); `None` if `saved` is not a state nice-plug wrote.
pub fn state_with_separator(saved: &[u8], separator: &str) -> Option<Vec<u8>> {
    let mut state = decode_state(saved)?;
    let field = state.get_mut("fields")?.get_mut("stemflow-state")?;
    let mut stemflow: serde_json::Value = serde_json::from_str(field.as_str()?).ok()?;
    stemflow["separator"] = separator.into();
    // The old model's hash would let the plugin find the old model again.
    if let Some(object) = stemflow.as_object_mut() {
        object.remove("model_sha256");
    }
    *field = stemflow.to_string().into();
    Some(encode_state(&state))
}

/// A damaged copy of `saved`.
pub fn corrupt_state(saved: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut bytes = saved.to_vec();
    match rng.range_usize(0, 7) {
        0 => bytes.truncate(rng.range_usize(0, bytes.len())),
        1 => {
            for _ in 0..rng.range_usize(1, 16) {
                if !bytes.is_empty() {
                    let i = rng.range_usize(0, bytes.len() - 1);
                    bytes[i] ^= 1 << rng.range_u64(0, 7);
                }
            }
        }
        2 => {
            // A length field far larger than the data.
            let length = *rng.pick(&[u64::MAX, 1 << 40, bytes.len() as u64 * 2]);
            if bytes.len() >= 8 {
                bytes[..8].copy_from_slice(&length.to_le_bytes());
            }
        }
        3 => {
            bytes = (0..rng.range_usize(0, 512))
                .map(|_| rng.next_u64() as u8)
                .collect()
        }
        4 => {
            let shapes = [
                serde_json::json!({}),
                serde_json::json!({"params": 3, "fields": []}),
                serde_json::json!({"version": "0.1.0", "params": {"vocals_gain": {"f32": f32::MAX}}, "fields": {}}),
                serde_json::json!({"version": "0.1.0", "params": {}, "fields": {"stemflow-state": "{\"version\": 1, \"separator\": 7}"}}),
                serde_json::json!({"version": "0.1.0", "params": {}, "fields": {"stemflow-state": "{\"version\": 99}"}}),
                serde_json::json!({"version": "0.1.0", "params": {}, "fields": {"stemflow-state": "not json"}}),
            ];
            bytes = encode_state(rng.pick(&shapes));
        }
        5 => {
            // Every parameter at an extreme.
            if let Some(mut state) = decode_state(saved) {
                if let Some(params) = state.get_mut("params").and_then(|p| p.as_object_mut()) {
                    for value in params.values_mut() {
                        if let Some(object) = value.as_object_mut() {
                            for inner in object.values_mut() {
                                *inner = match inner {
                                    serde_json::Value::Bool(b) => serde_json::Value::Bool(!*b),
                                    serde_json::Value::Number(_) => serde_json::json!(1e30),
                                    _ => serde_json::json!("?"),
                                };
                            }
                        }
                    }
                }
                bytes = encode_state(&state);
            }
        }
        6 => bytes.clear(),
        _ => bytes.extend((0..rng.range_usize(1, 64)).map(|_| rng.next_u64() as u8)),
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_separator_is_replaced_and_the_rest_kept() {
        let inner = serde_json::json!({"version": 1, "separator": "builtin", "device": "auto", "model_sha256": "ab"});
        let state = serde_json::json!({"version": "0.1.0", "params": {"bypass": {"bool": false}}, "fields": {"stemflow-state": inner.to_string()}});
        let edited = state_with_separator(&encode_state(&state), "file:/m/x.onnx").unwrap();
        let decoded = decode_state(&edited).unwrap();
        assert_eq!(decoded["params"], state["params"]);
        let stemflow: serde_json::Value =
            serde_json::from_str(decoded["fields"]["stemflow-state"].as_str().unwrap()).unwrap();
        assert_eq!(stemflow["separator"], "file:/m/x.onnx");
        assert_eq!(stemflow["device"], "auto");
        assert!(stemflow.get("model_sha256").is_none());
    }

    #[test]
    fn a_state_that_is_not_nice_plugs_is_not_edited() {
        assert_eq!(state_with_separator(b"garbage", "builtin"), None);
    }
}
