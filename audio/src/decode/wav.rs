//! What Stemflow reads of a WAV header before symphonia does: the fields symphonia 0.5 trusts
//! (a 0 Hz sample rate panics inside its reader) and the streaming convention it reads as a
//! truncation (a writer that does not know the length, `ffmpeg -f wav -` to a pipe, leaves the
//! RIFF and data sizes at 0xFFFFFFFF, or the data size at 0).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};

/// The size field value of a chunk whose length the writer did not know.
const UNKNOWN_SIZE: u32 = u32::MAX;

/// The chunks read before the data chunk, at most (the rest is left to symphonia).
const MAX_CHUNKS: usize = 64;

/// What is read of a WAV file to find its data chunk: as much as of a pipe.
const HEAD_BYTES: u64 = super::pipe::PIPE_HEAD_BYTES as u64;

/// What the start of a WAV file says, for what to fix before symphonia reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct WavHead {
    /// Byte offsets of the LIST chunks' ids before the data chunk. Stemflow reads no metadata,
    /// and symphonia 0.5 allocates an INFO entry's announced size before reading it (4 GB for
    /// a damaged one), so they are handed to it as JUNK, which it skips.
    list_ids_at: Vec<usize>,
    /// Byte offset of the data chunk's size field, and of its first audio byte; `None` when
    /// the data chunk lies beyond the head.
    data_at: Option<(usize, u64)>,
    /// Bytes per frame of PCM or float audio (`None` for compressed formats, whose blocks hold
    /// several frames).
    frame_bytes: Option<u16>,
    /// Whether the writer left the length open (0xFFFFFFFF, or 0 with audio following).
    is_length_unknown: bool,
}

/// Checks the header of `file` (at its start, `total_bytes` long) when it is a WAV file. When
/// it needs fixing ([`WavHead::fix`]), returns its first bytes fixed, to decode in place of the
/// file's (the file is left just after them), and whether its length is exact; otherwise
/// `None`, with the file back at its start.
pub(super) fn fixed_file_head(
    file: &mut File,
    total_bytes: u64,
) -> Result<Option<(Vec<u8>, bool)>, String> {
    let mut head = Vec::new();
    let read = Read::by_ref(file).take(HEAD_BYTES).read_to_end(&mut head);
    let rewind = |file: &mut File| {
        file.seek(SeekFrom::Start(0))
            .map(|_| None)
            .map_err(|e| super::reason::io_reason(&e))
    };
    if read.is_err() {
        // Symphonia reports the read error.
        return rewind(file);
    }
    match read_wav_head(&head)? {
        Some(wav) if wav.needs_fixing() => {
            let is_exact = wav.fix(&mut head, Some(total_bytes));
            Ok(Some((head, is_exact)))
        }
        _ => rewind(file),
    }
}

fn le_u16(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

fn le_u32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

/// Reads the chunks of a RIFF/WAVE file's first bytes `head` up to its data chunk (or the end
/// of `head`). `Ok(None)` when `head` is not a WAV file; an error for a header symphonia must
/// not be given.
pub(super) fn read_wav_head(head: &[u8]) -> Result<Option<WavHead>, String> {
    if head.get(0..4) != Some(b"RIFF") || head.get(8..12) != Some(b"WAVE") {
        return Ok(None);
    }
    let mut wav = WavHead {
        list_ids_at: Vec::new(),
        data_at: None,
        frame_bytes: None,
        is_length_unknown: false,
    };
    let mut at = 12usize;
    for _ in 0..MAX_CHUNKS {
        let (Some(id), Some(size)) = (head.get(at..at + 4), le_u32(head, at + 4)) else {
            break;
        };
        let body = at + 8;
        match id {
            b"fmt " => {
                let (Some(format_tag), Some(channels), Some(sample_rate_hz), Some(block_align)) = (
                    le_u16(head, body),
                    le_u16(head, body + 2),
                    le_u32(head, body + 4),
                    le_u16(head, body + 12),
                ) else {
                    break;
                };
                if sample_rate_hz == 0 {
                    return Err(
                        "a damaged WAV file: its header says the sample rate is 0 Hz".into(),
                    );
                }
                if channels == 0 {
                    return Err("a damaged WAV file: its header says it has 0 channels".into());
                }
                // WAVE_FORMAT_EXTENSIBLE's channel mask: symphonia 0.5 adds the ones a mask
                // lacks above its highest one, with shifts that overflow (a panic) when 32 or
                // more are missing or the mask's bit 31 is already set.
                if format_tag == 0xfffe {
                    if let Some(mask) = le_u32(head, body + 20) {
                        let missing = i64::from(channels) - i64::from(mask.count_ones());
                        if missing >= 32 || (missing > 0 && mask & 0x8000_0000 != 0) {
                            return Err(format!(
                                "a damaged WAV file: its channel mask {mask:#010x} does not fit its \
                                 {channels} channels"
                            ));
                        }
                    }
                }
                // PCM, IEEE float and WAVE_FORMAT_EXTENSIBLE: one frame per block.
                if matches!(format_tag, 1 | 3 | 0xfffe) && block_align > 0 {
                    wav.frame_bytes = Some(block_align);
                }
            }
            b"LIST" => wav.list_ids_at.push(at),
            b"data" => {
                let follows = head.len() > body;
                wav.is_length_unknown = size == UNKNOWN_SIZE
                    || (size == 0 && follows && !looks_like_a_chunk(&head[body..]));
                wav.data_at = Some((at + 4, body as u64));
                break;
            }
            _ => {}
        }
        // Chunks are padded to an even length.
        match usize::try_from(size)
            .ok()
            .and_then(|size| body.checked_add(size)?.checked_add(size & 1))
        {
            Some(next) => at = next,
            None => break,
        }
    }
    Ok(Some(wav))
}

/// Whether `bytes` start with a chunk header (four printable ASCII characters and a size):
/// an empty data chunk followed by, say, a LIST chunk is an empty file, not one of unknown
/// length.
fn looks_like_a_chunk(bytes: &[u8]) -> bool {
    bytes.len() >= 8 && bytes[..4].iter().all(|b| (0x20..0x7f).contains(b))
}

impl WavHead {
    /// Whether [`fix`](Self::fix) has anything to do.
    pub fn needs_fixing(&self) -> bool {
        self.is_length_unknown || !self.list_ids_at.is_empty()
    }

    /// Rewrites `head` for symphonia: LIST chunks become JUNK, and when the writer left the
    /// length open, the RIFF size becomes 0xFFFFFFFF and the data size, with `total_bytes` (a
    /// file's length), the data's real size, so the length stays exact; without it (a pipe)
    /// 0xFFFFFFFF, the convention symphonia reads to the end of the stream. Returns whether
    /// the header's length is exact now.
    pub fn fix(&self, head: &mut [u8], total_bytes: Option<u64>) -> bool {
        for &at in &self.list_ids_at {
            head[at..at + 4].copy_from_slice(b"JUNK");
        }
        let Some((size_at, data_start)) = self.data_at.filter(|_| self.is_length_unknown) else {
            return true;
        };
        let real_size = total_bytes.and_then(|total| {
            let bytes = total.checked_sub(data_start)?;
            let frame = u64::from(self.frame_bytes?);
            u32::try_from(bytes / frame * frame)
                .ok()
                .filter(|&size| size < UNKNOWN_SIZE)
        });
        head[4..8].copy_from_slice(&UNKNOWN_SIZE.to_le_bytes());
        head[size_at..size_at + 4]
            .copy_from_slice(&real_size.unwrap_or(UNKNOWN_SIZE).to_le_bytes());
        real_size.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 16-bit stereo WAV header at `rate` Hz with the given RIFF and data sizes, then `data`.
    fn wav(rate: u32, riff_size: u32, data_size: u32, data: &[u8]) -> Vec<u8> {
        let mut bytes = b"RIFF".to_vec();
        bytes.extend_from_slice(&riff_size.to_le_bytes());
        bytes.extend_from_slice(b"WAVEfmt ");
        bytes.extend_from_slice(&16u32.to_le_bytes());
        bytes.extend_from_slice(&1u16.to_le_bytes());
        bytes.extend_from_slice(&2u16.to_le_bytes());
        bytes.extend_from_slice(&rate.to_le_bytes());
        bytes.extend_from_slice(&(rate.wrapping_mul(4)).to_le_bytes());
        bytes.extend_from_slice(&4u16.to_le_bytes());
        bytes.extend_from_slice(&16u16.to_le_bytes());
        bytes.extend_from_slice(b"data");
        bytes.extend_from_slice(&data_size.to_le_bytes());
        bytes.extend_from_slice(data);
        bytes
    }

    #[test]
    fn a_channel_mask_symphonia_cannot_fix_is_an_error() {
        // The fuzzer's input: extensible, 2 channels, a mask whose bit 31 is set and one of
        // whose ones is missing.
        let mut head = wav(44_100, 100, 0, &[]);
        let fmt = 20;
        head[fmt..fmt + 2].copy_from_slice(&0xfffeu16.to_le_bytes());
        head.splice(fmt + 16..fmt + 16, [0u8; 24]);
        head[fmt + 16..fmt + 18].copy_from_slice(&22u16.to_le_bytes());
        head[fmt + 20..fmt + 24].copy_from_slice(&0x8000_0000u32.to_le_bytes());
        head[16..20].copy_from_slice(&40u32.to_le_bytes());
        let Err(error) = read_wav_head(&head) else {
            panic!("a mask symphonia cannot fix was accepted");
        };
        assert!(error.contains("channel mask 0x80000000"), "{error}");
        // A mask with its ones all there is read.
        head[fmt + 20..fmt + 24].copy_from_slice(&3u32.to_le_bytes());
        assert!(read_wav_head(&head).is_ok());
    }

    #[test]
    fn a_0_hz_header_is_an_error() {
        let error = read_wav_head(&wav(0, 44, 8, &[0; 8])).unwrap_err();
        assert!(error.contains("0 Hz"), "{error}");
    }

    #[test]
    fn an_announced_length_is_left_as_it_is() {
        let head = read_wav_head(&wav(44_100, 44, 8, &[0; 8]))
            .unwrap()
            .unwrap();
        assert!(!head.needs_fixing());
        assert_eq!(head.data_at, Some((40, 44)));
        assert_eq!(read_wav_head(b"FORM....AIFF"), Ok(None));
    }

    #[test]
    fn an_unknown_length_is_fixed_to_the_files_or_left_open_for_a_pipe() {
        for data_size in [u32::MAX, 0] {
            let mut bytes = wav(44_100, u32::MAX, data_size, &[1; 10]);
            let head = read_wav_head(&bytes).unwrap().unwrap();
            assert!(head.is_length_unknown, "data size {data_size:#x}");
            // A file: 10 bytes of audio are 2 whole frames.
            assert!(head.fix(&mut bytes, Some(44 + 10)));
            assert_eq!(le_u32(&bytes, 40), Some(8));
            assert_eq!(le_u32(&bytes, 4), Some(u32::MAX));
            // A pipe.
            assert!(!head.fix(&mut bytes, None));
            assert_eq!(le_u32(&bytes, 40), Some(u32::MAX));
        }
        // An empty data chunk followed by another chunk is an empty file.
        let bytes = wav(44_100, 56, 0, b"LIST\x04\0\0\0INFO");
        assert!(!read_wav_head(&bytes).unwrap().unwrap().is_length_unknown);
    }

    #[test]
    fn list_chunks_are_handed_to_symphonia_as_junk() {
        // A 4 GB LIST chunk before the data: renamed, and the rest lies beyond the head.
        let mut bytes = wav(44_100, u32::MAX, 8, &[0; 8]);
        let list = [&b"LIST"[..], &0xF000_0000u32.to_le_bytes(), b"INFO"].concat();
        bytes.splice(36..36, list);
        let head = read_wav_head(&bytes).unwrap().unwrap();
        assert!(head.needs_fixing());
        assert_eq!(head.data_at, None);
        assert!(head.fix(&mut bytes, Some(1 << 20)));
        assert_eq!(&bytes[36..40], b"JUNK");
    }
}
