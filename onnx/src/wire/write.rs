//! Encoding protobuf fields by hand: varints and length-delimited fields, written in the order
//! the caller gives (the reference serializer writes fields in field-number order).

/// Wire type of varints (ints, enums, bools).
pub const WIRE_VARINT: u8 = 0;
/// Wire type of fixed 32-bit values (floats).
pub const WIRE_FIXED32: u8 = 5;
/// Wire type of length-delimited bodies (strings, bytes, messages, packed arrays).
pub const WIRE_LEN: u8 = 2;

/// Appends `value` as a varint.
pub fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Bytes [`put_varint`] writes for `value`.
pub fn varint_len(value: u64) -> usize {
    let significant_bits = 64 - value.leading_zeros() as usize;
    significant_bits.max(1).div_ceil(7)
}

/// Appends a field's key: its number and wire type.
pub fn put_key(out: &mut Vec<u8>, field: u32, wire_type: u8) {
    put_varint(out, (u64::from(field) << 3) | u64::from(wire_type));
}

/// Bytes [`put_key`] writes for `field`.
pub fn key_len(field: u32) -> usize {
    varint_len(u64::from(field) << 3)
}

/// An `int64` or `int32` field: negative values take ten bytes (two's complement as `u64`).
pub fn put_int64(out: &mut Vec<u8>, field: u32, value: i64) {
    put_key(out, field, WIRE_VARINT);
    put_varint(out, value as u64);
}

/// A `float` field (fixed 32 bits, little-endian).
pub fn put_float(out: &mut Vec<u8>, field: u32, value: f32) {
    put_key(out, field, WIRE_FIXED32);
    out.extend_from_slice(&value.to_le_bytes());
}

/// A length-delimited field: a string, bytes or an embedded message.
pub fn put_bytes(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    put_key(out, field, WIRE_LEN);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::super::read::{read_varint, FieldValue, Fields};
    use super::*;

    #[test]
    fn varint_lengths_match_the_encoding() {
        for value in [0, 1, 127, 128, 16_383, 16_384, u32::MAX as u64, u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, value);
            assert_eq!(out.len(), varint_len(value), "{value}");
            assert_eq!(read_varint(&out, &mut 0), Ok(value));
        }
    }

    #[test]
    fn written_fields_read_back() {
        let mut out = Vec::new();
        put_int64(&mut out, 1, -2);
        put_bytes(&mut out, 300, b"abc");
        put_float(&mut out, 2, 1.5);
        assert_eq!(
            out.len(),
            key_len(1) + 10 + key_len(300) + 1 + 3 + key_len(2) + 4
        );
        let fields: Vec<_> = Fields::new(&out).map(Result::unwrap).collect();
        assert_eq!(fields[0], (1, FieldValue::Varint(-2i64 as u64)));
        assert_eq!(fields[1], (300, FieldValue::Bytes(b"abc")));
        assert_eq!(fields[2].0, 2);
    }
}
