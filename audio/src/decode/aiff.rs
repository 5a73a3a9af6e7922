//! The COMM chunk of an AIFF file: its frame count (symphonia counts the sound chunk's header
//! as audio) and its sample rate (symphonia panics on one below 1 Hz).

use std::fs::File;
use std::path::Path;

/// What an AIFF file's COMM chunk says.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct AiffComm {
    /// Frames of audio.
    pub num_frames: u64,
    /// The sample rate, as the 80-bit float the chunk holds (NaN, 0 or negative when damaged).
    pub sample_rate_hz: f64,
}

/// The COMM chunk of an AIFF/AIFC file, `None` for other files.
pub(super) fn aiff_comm(path: &Path) -> Option<AiffComm> {
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
            // Channels (2 bytes), frames (4), bits (2), rate (10).
            let mut comm = [0u8; 18];
            file.read_exact(&mut comm).ok()?;
            return Some(AiffComm {
                num_frames: u64::from(u32::from_be_bytes([comm[2], comm[3], comm[4], comm[5]])),
                sample_rate_hz: extended_to_f64(&comm[8..18]),
            });
        }
        file.seek(SeekFrom::Current(size + (size & 1))).ok()?;
    }
    None
}

/// An 80-bit IEEE 754 extended float (big-endian: sign and 15-bit exponent, 64-bit mantissa
/// with an explicit integer bit) as `f64`; NaN for infinities and NaNs.
fn extended_to_f64(bytes: &[u8]) -> f64 {
    let sign_exponent = u16::from_be_bytes([bytes[0], bytes[1]]);
    let mut mantissa = [0u8; 8];
    mantissa.copy_from_slice(&bytes[2..10]);
    let mantissa = u64::from_be_bytes(mantissa);
    let exponent = i32::from(sign_exponent & 0x7fff);
    if exponent == 0x7fff {
        return f64::NAN;
    }
    // value = mantissa × 2^(exponent − 16383 − 63); powi saturates to 0 or infinity.
    let magnitude = mantissa as f64 * 2f64.powi(exponent - 16_446);
    if sign_exponent & 0x8000 != 0 {
        -magnitude
    } else {
        magnitude
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extended_floats_read_as_their_value() {
        // 44100 = 0xAC44 × 2^0: exponent 16383 + 15, mantissa 0xAC44 << 48.
        let mut rate = [0u8; 10];
        rate[..2].copy_from_slice(&(16_383u16 + 15).to_be_bytes());
        rate[2..].copy_from_slice(&(0xAC44u64 << 48).to_be_bytes());
        assert_eq!(extended_to_f64(&rate), 44_100.0);
        assert_eq!(extended_to_f64(&[0; 10]), 0.0);
        rate[0] |= 0x80;
        assert_eq!(extended_to_f64(&rate), -44_100.0);
        assert!(extended_to_f64(&[0x7f, 0xff, 0, 0, 0, 0, 0, 0, 0, 0]).is_nan());
    }

    /// A 16-bit stereo AIFF of 64 frames whose COMM chunk holds `rate` (80-bit float bytes).
    fn aiff(rate: [u8; 10]) -> Vec<u8> {
        let comm = [
            &2i16.to_be_bytes()[..],
            &64u32.to_be_bytes(),
            &16i16.to_be_bytes(),
            &rate,
        ]
        .concat();
        let ssnd = [&[0u8; 8][..], &[7u8; 256]].concat();
        let body = [
            &b"AIFFCOMM"[..],
            &(comm.len() as u32).to_be_bytes(),
            &comm,
            b"SSND",
            &(ssnd.len() as u32).to_be_bytes(),
            &ssnd,
        ]
        .concat();
        [&b"FORM"[..], &(body.len() as u32).to_be_bytes(), &body].concat()
    }

    #[test]
    fn a_0_hz_aiff_is_an_error_not_a_panic() {
        let path = crate::decode::test_path("zero-hz.aiff");
        let mut rate = [0u8; 10];
        rate[..2].copy_from_slice(&(16_383u16 + 15).to_be_bytes());
        rate[2..].copy_from_slice(&(0xAC44u64 << 48).to_be_bytes());
        std::fs::write(&path, aiff(rate)).unwrap();
        let decoder = crate::decode::AudioDecoder::open(&path).unwrap();
        assert_eq!(decoder.info().sample_rate_hz, 44_100);
        assert_eq!(decoder.info().num_frames, Some(64));
        // 0, and 0.5 Hz (symphonia's `as u32` makes it 0 too).
        for rate in [[0u8; 10], [0x3f, 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0]] {
            std::fs::write(&path, aiff(rate)).unwrap();
            let error = crate::decode::AudioDecoder::open(&path).err().unwrap();
            assert!(error.contains("0 Hz"), "{error}");
        }
        std::fs::remove_file(&path).unwrap();
    }
}
