//! The MP4 edit list (`moov/trak/edts/elst`) that symphonia 0.5 does not apply: where an
//! M4A/AAC file's audio really starts (after the encoder's priming) and ends.

use std::fs::File;
use std::path::Path;

/// Where an MP4 file's audio really is in the decoded stream: its edit list skips the AAC
/// encoder's priming and ends before the last packet's padding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Mp4AudioEdit {
    /// Decoded frames before the audio starts (the edit's media time).
    pub skip_frames: u64,
    /// Frames of audio.
    pub num_frames: u64,
}

/// Reads the first sound track's edit list (`moov/trak/edts/elst`) of an MP4/M4A file, which
/// symphonia 0.5 does not apply. `None` for other files, files without an edit list, or edits
/// Stemflow does not interpret (several segments, a leading empty edit).
pub(super) fn mp4_audio_edit(path: &Path, sample_rate_hz: u32) -> Option<Mp4AudioEdit> {
    if sample_rate_hz == 0 {
        return None;
    }
    // The movie box (KBs to a few MB) holds the track headers and the edit list.
    let bytes = read_mp4_box(path, b"moov")?;
    let movie_timescale = full_box(&bytes, b"mvhd")
        .and_then(|(version, body)| be_u32(body, if version == 0 { 8 } else { 16 }))?;
    let edit = children(&bytes).find_map(|(kind, trak)| {
        if kind != *b"trak" {
            return None;
        }
        let mdia = children(trak).find(|(k, _)| k == b"mdia")?.1;
        let (_, hdlr) = full_box(mdia, b"hdlr")?;
        if hdlr.get(4..8)? != b"soun" {
            return None;
        }
        let (mdhd_version, mdhd) = full_box(mdia, b"mdhd")?;
        let (media_timescale, media_duration) = if mdhd_version == 0 {
            (be_u32(mdhd, 8)?, u64::from(be_u32(mdhd, 12)?))
        } else {
            (be_u32(mdhd, 16)?, be_u64(mdhd, 20)?)
        };
        let edts = children(trak).find(|(k, _)| k == b"edts")?.1;
        let (version, elst) = full_box(edts, b"elst")?;
        if be_u32(elst, 0)? != 1 {
            return None;
        }
        let (segment_duration, media_time) = if version == 0 {
            (
                u64::from(be_u32(elst, 4)?),
                i64::from(be_u32(elst, 8)? as i32),
            )
        } else {
            (be_u64(elst, 4)?, be_u64(elst, 12)? as i64)
        };
        if media_time < 0 || media_timescale == 0 || movie_timescale == 0 {
            return None;
        }
        let rate = u128::from(sample_rate_hz);
        let to_frames = |value: u64, timescale: u32| {
            ((u128::from(value) * rate + u128::from(timescale) / 2) / u128::from(timescale)) as u64
        };
        let skip_frames = to_frames(media_time as u64, media_timescale);
        // The segment's duration is in the movie's (often millisecond) timescale; the media's
        // own duration minus the priming is exact when it agrees to within one movie tick.
        let segment_frames = to_frames(segment_duration, movie_timescale);
        let media_frames = to_frames(media_duration, media_timescale).saturating_sub(skip_frames);
        let tick_frames = rate as u64 / u64::from(movie_timescale) + 1;
        let num_frames = if media_frames.abs_diff(segment_frames) <= tick_frames {
            media_frames
        } else {
            segment_frames
        };
        Some(Mp4AudioEdit {
            skip_frames,
            num_frames,
        })
    });
    edit
}

/// Whether an MP4 file's movie has a track whose media time scale is 0 (symphonia 0.5 panics
/// on it). `false` for other files.
pub(super) fn mp4_has_a_zero_timescale(path: &Path) -> bool {
    let Some(moov) = read_mp4_box(path, b"moov") else {
        return false;
    };
    let timescale = |trak: &[u8]| {
        let mdia = children(trak).find(|(k, _)| k == b"mdia")?.1;
        let (version, mdhd) = full_box(mdia, b"mdhd")?;
        be_u32(mdhd, if version == 0 { 8 } else { 16 })
    };
    let has_one =
        children(&moov).any(|(kind, trak)| kind == *b"trak" && timescale(trak) == Some(0));
    has_one
}

/// The payload of the top-level box `kind` of an MP4 file (at most 64 MB); `None` for files
/// that do not start with an MP4 `ftyp` box.
fn read_mp4_box(path: &Path, kind: &[u8; 4]) -> Option<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = File::open(path).ok()?;
    let file_len = file.metadata().ok()?.len();
    let mut position = 0u64;
    while position + 8 <= file_len {
        let mut header = [0u8; 16];
        file.seek(SeekFrom::Start(position)).ok()?;
        file.read_exact(&mut header[..8]).ok()?;
        let (size, header_len) = match be_u32(&header, 0)? {
            0 => (file_len - position, 8),
            1 => {
                file.read_exact(&mut header[8..16]).ok()?;
                (be_u64(&header, 8)?, 16)
            }
            size => (u64::from(size), 8),
        };
        if size < header_len || position + size > file_len {
            return None;
        }
        if position == 0 && &header[4..8] != b"ftyp" {
            return None;
        }
        if &header[4..8] == kind {
            if size - header_len > 64 << 20 {
                return None;
            }
            let mut payload = vec![0u8; (size - header_len) as usize];
            file.read_exact(&mut payload).ok()?;
            return Some(payload);
        }
        position += size;
    }
    None
}

/// The child boxes of a box payload, as `(kind, payload)`; stops at the first malformed one.
fn children(mut bytes: &[u8]) -> impl Iterator<Item = ([u8; 4], &[u8])> {
    std::iter::from_fn(move || {
        let size = be_u32(bytes, 0)? as usize;
        let kind: [u8; 4] = bytes.get(4..8)?.try_into().ok()?;
        if size < 8 || size > bytes.len() {
            return None;
        }
        let payload = &bytes[8..size];
        bytes = &bytes[size..];
        Some((kind, payload))
    })
}

/// A full box (version and flags, then the body) among `bytes`' children: `(version, body)`.
fn full_box<'a>(bytes: &'a [u8], kind: &[u8; 4]) -> Option<(u8, &'a [u8])> {
    let payload = children(bytes).find(|(k, _)| k == kind)?.1;
    Some((*payload.first()?, payload.get(4..)?))
}

fn be_u32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn be_u64(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An MP4 box: size, kind, payload.
    fn mp4_box(kind: &[u8; 4], payload: &[u8]) -> Vec<u8> {
        let mut bytes = ((payload.len() + 8) as u32).to_be_bytes().to_vec();
        bytes.extend_from_slice(kind);
        bytes.extend_from_slice(payload);
        bytes
    }

    /// A version-1 movie with one sound track: movie timescale 600, media at 48 kHz with
    /// `media_frames`, an edit list starting at `media_time` lasting `segment` movie ticks.
    fn mp4_v1(media_frames: u64, media_time: i64, segment: u64) -> Vec<u8> {
        let full = |version: u8, body: &[u8]| [&[version, 0, 0, 0][..], body].concat();
        let mvhd = full(
            1,
            &[&[0u8; 16][..], &600u32.to_be_bytes(), &[0u8; 8]].concat(),
        );
        let mdhd = full(
            1,
            &[
                &[0u8; 16][..],
                &48_000u32.to_be_bytes(),
                &media_frames.to_be_bytes(),
            ]
            .concat(),
        );
        let hdlr = full(0, &[&[0u8; 4][..], b"soun", &[0u8; 12]].concat());
        let elst = full(
            1,
            &[
                &1u32.to_be_bytes()[..],
                &segment.to_be_bytes(),
                &media_time.to_be_bytes(),
                &[0, 1, 0, 0],
            ]
            .concat(),
        );
        let mdia = [mp4_box(b"mdhd", &mdhd), mp4_box(b"hdlr", &hdlr)].concat();
        let trak = [
            mp4_box(b"edts", &mp4_box(b"elst", &elst)),
            mp4_box(b"mdia", &mdia),
        ]
        .concat();
        let moov = [mp4_box(b"mvhd", &mvhd), mp4_box(b"trak", &trak)].concat();
        [mp4_box(b"ftyp", b"M4A \0\0\0\0"), mp4_box(b"moov", &moov)].concat()
    }

    #[test]
    fn mp4_edit_lists_give_the_priming_and_the_exact_length() {
        let path = crate::decode::test_path("edit.m4a");
        // 10 s + 2112 frames of priming; the segment (10 s in 1/600 s ticks) agrees.
        std::fs::write(&path, mp4_v1(482_112, 2112, 6_000)).unwrap();
        assert_eq!(
            mp4_audio_edit(&path, 48_000),
            Some(Mp4AudioEdit {
                skip_frames: 2112,
                num_frames: 480_000
            })
        );
        // Padding counted in the media duration: the segment decides.
        std::fs::write(&path, mp4_v1(483_136, 2112, 6_000)).unwrap();
        assert_eq!(mp4_audio_edit(&path, 48_000).unwrap().num_frames, 480_000);
        // A leading empty edit is not interpreted; truncated boxes are no edit, not a panic.
        std::fs::write(&path, mp4_v1(482_112, -1, 6_000)).unwrap();
        assert_eq!(mp4_audio_edit(&path, 48_000), None);
        let bytes = mp4_v1(482_112, 2112, 6_000);
        for cut in [12, 40, 100, bytes.len() - 3] {
            std::fs::write(&path, &bytes[..cut]).unwrap();
            assert_eq!(mp4_audio_edit(&path, 48_000), None, "cut at {cut}");
        }
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_track_without_a_time_scale_is_refused_before_symphonia_panics_on_it() {
        let path = crate::decode::test_path("zero-timescale.m4a");
        let mut bytes = mp4_v1(482_112, 2112, 6_000);
        std::fs::write(&path, &bytes).unwrap();
        assert!(!mp4_has_a_zero_timescale(&path));
        let rate = 48_000u32.to_be_bytes();
        let at = bytes.windows(4).position(|w| w == rate).unwrap();
        bytes[at..at + 4].copy_from_slice(&[0; 4]);
        std::fs::write(&path, &bytes).unwrap();
        assert!(mp4_has_a_zero_timescale(&path));
        let error = crate::decode::AudioDecoder::open(&path).err().unwrap();
        assert!(error.contains("time scale is 0"), "{error}");
        std::fs::remove_file(&path).unwrap();
    }
}
