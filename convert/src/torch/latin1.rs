//! Protocol-2 pickles hold `bytes` as `_codecs.encode(text, 'latin1')`: a `str` whose code points
//! (all below 256) are the bytes. These helpers check such text and decode it without a branch
//! per byte, so that a checkpoint's 13 MB weight string is scanned quickly.

/// `bytes` as a `&str`, or an error saying that `what` is not UTF-8.
pub fn utf8<'b>(bytes: &'b [u8], what: &str) -> Result<&'b str, String> {
    std::str::from_utf8(bytes).map_err(|error| format!("{what} is not valid UTF-8: {error}"))
}

/// Checks that `utf8_text` is UTF-8 whose code points are all < 256, i.e. that
/// `text.encode('latin1')` gives bytes, and returns how many bytes that is.
///
/// Such UTF-8 is a sequence of bytes < 0x80 and pairs (0xC2 or 0xC3, 0x80..=0xBF): no byte is
/// 0xC0, 0xC1 or ≥ 0xC4, a byte is a continuation (0x80..=0xBF) exactly when the byte before it
/// is 0xC2 or 0xC3, and the text neither starts with a continuation nor ends with a lead byte.
/// These checks look at neighbouring bytes only, so the loop has no data-dependent branch or
/// index and the compiler vectorises it; a failure is explained on the slow path.
pub fn latin1_len_bytes(utf8_text: &[u8]) -> Result<usize, String> {
    let is_continuation = |byte: u8| (byte & 0xC0) == 0x80;
    let is_pair_lead = |byte: u8| (byte & 0xFE) == 0xC2;
    let mut is_invalid = false;
    let mut num_continuations = 0usize;
    for (&before, &byte) in utf8_text.iter().zip(utf8_text.iter().skip(1)) {
        is_invalid |= is_continuation(byte) != is_pair_lead(before);
        num_continuations += usize::from(is_continuation(byte));
    }
    for &byte in utf8_text {
        is_invalid |= (byte >= 0xC4) | ((byte & 0xFE) == 0xC0);
    }
    if let (Some(&first), Some(&last)) = (utf8_text.first(), utf8_text.last()) {
        is_invalid |= is_continuation(first) | is_pair_lead(last);
    }
    if !is_invalid {
        return Ok(utf8_text.len() - num_continuations);
    }
    let text = utf8(utf8_text, "the _codecs.encode argument")?;
    let (index, character) = text
        .chars()
        .enumerate()
        .find(|&(_, character)| u32::from(character) > 0xFF)
        .unwrap_or((0, '\u{FFFD}'));
    Err(format!(
        "_codecs.encode(…, 'latin1') of a string with U+{:04X} at character {index}: latin-1 \
         bytes must be below U+0100",
        u32::from(character)
    ))
}

/// Decodes the first `len_bytes` bytes that `utf8_text` stands for: UTF-8 of code points < 256
/// (checked by [`latin1_len_bytes`]); zeros past its end.
pub fn decode_latin1(utf8_text: &[u8], len_bytes: usize) -> Vec<u8> {
    // Every input byte writes at `filled`, which only advances on a byte that starts a code
    // point (a continuation's write is overwritten): no branch, no serial index chain. One
    // byte of slack takes the last continuation's write.
    let mut bytes = vec![0u8; len_bytes + 1];
    let mut filled = 0usize;
    let nexts = utf8_text.iter().skip(1).chain(std::iter::once(&0));
    for (&lead, &next) in utf8_text.iter().zip(nexts) {
        let pair_value = (lead << 6) | (next & 0x3F);
        let Some(slot) = bytes.get_mut(filled) else {
            break;
        };
        *slot = if lead < 0x80 { lead } else { pair_value };
        filled += usize::from((lead & 0xC0) != 0x80);
    }
    bytes.truncate(len_bytes);
    bytes
}
