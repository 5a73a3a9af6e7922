//! nice-plug's CLAP state framing: an 8-byte little-endian length, then that many bytes of JSON
//! (`{"version": …, "params": {…}, "fields": {…}}`; uncompressed without nice-plug's `zstd`
//! feature).

/// The JSON document inside a state saved by nice-plug's CLAP wrapper; `None` if the framing or
/// the JSON is broken.
pub fn decode_state(bytes: &[u8]) -> Option<serde_json::Value> {
    let length_bytes: [u8; 8] = bytes.get(..8)?.try_into().ok()?;
    let length = usize::try_from(u64::from_le_bytes(length_bytes)).ok()?;
    let json = bytes.get(8..8usize.checked_add(length)?)?;
    serde_json::from_slice(json).ok()
}

/// Frames a JSON document the way nice-plug's CLAP wrapper expects it.
pub fn encode_state(state: &serde_json::Value) -> Vec<u8> {
    let json = serde_json::to_vec(state).expect("JSON values always serialize");
    let mut bytes = (json.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(&json);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_round_trips() {
        let state = serde_json::json!({"version": "0.1.0", "params": {}, "fields": {}});
        assert_eq!(decode_state(&encode_state(&state)), Some(state));
    }

    #[test]
    fn truncated_states_do_not_decode() {
        let bytes = encode_state(&serde_json::json!({"params": {}}));
        assert_eq!(decode_state(&bytes[..bytes.len() - 1]), None);
        assert_eq!(decode_state(&bytes[..4]), None);
    }
}
