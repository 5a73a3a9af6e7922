//! The fields of one protobuf message, read one after another without building anything: the
//! borrowed reader every ONNX view is made of (a 300 MB model is walked without copying its
//! weights).

/// One field's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValue<'a> {
    /// A varint (ints, enums, bools).
    Varint(u64),
    /// A length-delimited body (strings, bytes, sub-messages, packed arrays).
    Bytes(&'a [u8]),
    /// A fixed 32- or 64-bit value (not needed by the readers, skipped).
    Fixed,
}

/// Iterates `(field number, value)` over a message's bytes; yields one error and stops at the
/// first malformed field.
pub struct Fields<'a> {
    bytes: &'a [u8],
    pos: usize,
    failed: bool,
}

impl<'a> Fields<'a> {
    /// The fields of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self {
            bytes,
            pos: 0,
            failed: false,
        }
    }

    /// The next field as [`Iterator::next`] gives it, with the bytes it was read from (key
    /// included), for copying a field unchanged into another message.
    #[allow(clippy::type_complexity)]
    pub fn next_with_bytes(&mut self) -> Option<Result<(u32, FieldValue<'a>, &'a [u8]), String>> {
        let start = self.pos;
        let field = self.next()?;
        Some(field.map(|(number, value)| (number, value, &self.bytes[start..self.pos])))
    }

    fn skip(&mut self, len: usize) -> Result<&'a [u8], String> {
        let end = self
            .pos
            .checked_add(len)
            .filter(|&e| e <= self.bytes.len())
            .ok_or("truncated")?;
        let body = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(body)
    }

    fn read_field(&mut self) -> Result<(u32, FieldValue<'a>), String> {
        let key = read_varint(self.bytes, &mut self.pos)?;
        let (field, wire) = (key >> 3, key & 7);
        // Field numbers are 1 to 2^29 - 1.
        let field = u32::try_from(field)
            .ok()
            .filter(|&f| f != 0 && f < 1 << 29)
            .ok_or_else(|| format!("field number {field}"))?;
        let value = match wire {
            0 => FieldValue::Varint(read_varint(self.bytes, &mut self.pos)?),
            1 => self.skip(8).map(|_| FieldValue::Fixed)?,
            2 => {
                let len = usize::try_from(read_varint(self.bytes, &mut self.pos)?)
                    .map_err(|_| "length too large")?;
                FieldValue::Bytes(self.skip(len)?)
            }
            5 => self.skip(4).map(|_| FieldValue::Fixed)?,
            _ => return Err(format!("unknown wire type {wire}")),
        };
        Ok((field, value))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, FieldValue<'a>), String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.bytes.len() {
            return None;
        }
        let field = self.read_field();
        self.failed = field.is_err();
        Some(field)
    }
}

/// Reads a varint at `pos`, advancing it.
pub fn read_varint(bytes: &[u8], pos: &mut usize) -> Result<u64, String> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*pos).ok_or("truncated")?;
        *pos += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err("malformed varint".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_varints_bodies_and_fixed_fields_and_stops_at_garbage() {
        // field 1 varint 300, field 2 bytes "ab", field 3 fixed32, then a truncated body.
        let bytes = [
            0x08, 0xac, 0x02, 0x12, 2, b'a', b'b', 0x1d, 1, 2, 3, 4, 0x22, 9, 1,
        ];
        let fields: Vec<_> = Fields::new(&bytes).collect();
        assert_eq!(fields[0], Ok((1, FieldValue::Varint(300))));
        assert_eq!(fields[1], Ok((2, FieldValue::Bytes(b"ab"))));
        assert_eq!(fields[2], Ok((3, FieldValue::Fixed)));
        assert!(fields[3].is_err());
        assert_eq!(fields.len(), 4);

        let mut fields = Fields::new(&bytes);
        assert_eq!(
            fields.next_with_bytes(),
            Some(Ok((1, FieldValue::Varint(300), &bytes[..3])))
        );
        assert_eq!(
            fields.next_with_bytes(),
            Some(Ok((2, FieldValue::Bytes(b"ab"), &bytes[3..7])))
        );
    }
}
