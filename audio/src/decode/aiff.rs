//! The frame count of an AIFF file's COMM chunk (symphonia counts the sound chunk's header as
//! audio).

use std::fs::File;
use std::path::Path;

/// The frame count of an AIFF/AIFC file's COMM chunk, `None` for other files.
pub(super) fn aiff_num_frames(path: &Path) -> Option<u64> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = File::open(path).ok()?;
    let mut header = [0u8; 12];
    file.read_exact(&mut header).ok()?;
    if &header[0..4] != b"FORM" || !(&header[8..12] == b"AIFF" || &header[8..12] == b"AIFC") {
        return None;
    }
    // Chunks: 4-byte id, 4-byte big-endian size, data padded to an even length.
    for _ in 0..64 {
        let mut chunk = [0u8; 8];
        file.read_exact(&mut chunk).ok()?;
        let size = u32::from_be_bytes([chunk[4], chunk[5], chunk[6], chunk[7]]) as i64;
        if &chunk[0..4] == b"COMM" {
            let mut comm = [0u8; 6];
            file.read_exact(&mut comm).ok()?;
            return Some(u64::from(u32::from_be_bytes([
                comm[2], comm[3], comm[4], comm[5],
            ])));
        }
        file.seek(SeekFrom::Current(size + (size & 1))).ok()?;
    }
    None
}
