//! Streaming decode of any supported audio file (WAV, AIFF, FLAC, MP3, OGG/Vorbis, M4A/AAC) into
//! planar `f32` blocks, through `symphonia`. Memory stays at one decoded packet.
//!
//! What symphonia 0.5 would misread or panic on is read first: WAV headers (`wav.rs`: a 0 Hz
//! rate, the sizes a writer to a pipe leaves open, LIST chunks), AIFF's COMM chunk (`aiff.rs`)
//! and MP4's edit list and time scales (`mp4.rs`).

mod aiff;
mod mp4;
mod pipe;
mod reason;
mod wav;

use std::fs::File;
use std::path::Path;

use symphonia::core::audio::{AudioBufferRef, SampleBuffer};
use symphonia::core::codecs::{Decoder as SymphoniaDecoder, DecoderOptions, CODEC_TYPE_NULL};
use symphonia::core::errors::Error as SymphoniaError;
use symphonia::core::formats::{FormatOptions, FormatReader};
use symphonia::core::io::{MediaSource, MediaSourceStream, ReadOnlySource};
use symphonia::core::meta::MetadataOptions;
use symphonia::core::probe::Hint;
use symphonia::core::sample::SampleFormat;

use aiff::aiff_comm;
use mp4::{mp4_audio_edit, mp4_has_a_zero_timescale};
use pipe::{read_head, SpooledPipe, PIPE_HEAD_BYTES};
pub use reason::io_reason;

/// The container a file's first bytes announce, for messages about damaged files.
fn container_name(path: &Path) -> Option<&'static str> {
    use std::io::Read;
    let mut head = [0u8; 12];
    let mut file = File::open(path).ok()?;
    let read = file.read(&mut head).ok()?;
    container_of(&head[..read])
}

/// The container that bytes at the start of a file announce.
fn container_of(head: &[u8]) -> Option<&'static str> {
    if head.len() >= 8 && &head[4..8] == b"ftyp" {
        Some("M4A/MP4")
    } else if head.starts_with(b"RIFF") {
        Some("WAV")
    } else if head.starts_with(b"fLaC") {
        Some("FLAC")
    } else if head.starts_with(b"OggS") {
        Some("Ogg")
    } else if head.starts_with(b"FORM") {
        Some("AIFF")
    } else if head.starts_with(b"ID3") || head.first() == Some(&0xff) {
        Some("MP3")
    } else {
        None
    }
}

/// The formats `stemflow` reads, for error messages.
pub const SUPPORTED_FORMATS: &str = "WAV, AIFF, FLAC, MP3, OGG/Vorbis or M4A/AAC";

/// What a file holds, known before decoding the rest of it.
#[derive(Debug, Clone)]
pub struct SourceInfo {
    /// Sample rate in hertz.
    pub sample_rate_hz: u32,
    /// 1 (mono) or 2 (stereo); other counts are rejected when the file is opened.
    pub num_channels: usize,
    /// Frames in the file, when the container says (exact for PCM and FLAC, an estimate for
    /// some compressed formats).
    pub num_frames: Option<u64>,
    /// Whether `num_frames` is exact, so that fewer decoded frames mean a truncated file.
    pub is_length_exact: bool,
    /// The codec's short name (`pcm_s16le`, `flac`, `mp3`, …).
    pub codec: String,
    /// Bits per sample of integer PCM or FLAC; `None` for float and compressed audio.
    pub integer_bits: Option<u32>,
}

impl SourceInfo {
    /// "stereo, 44100 Hz, pcm_s16le".
    pub fn describe(&self) -> String {
        format!(
            "{}, {} Hz, {}",
            if self.num_channels == 1 {
                "mono"
            } else {
                "stereo"
            },
            self.sample_rate_hz,
            self.codec
        )
    }
}

/// An open file being decoded packet by packet.
pub struct AudioDecoder {
    format: Box<dyn FormatReader>,
    decoder: Box<dyn SymphoniaDecoder>,
    track_id: u32,
    info: SourceInfo,
    /// Planar samples of the last decoded packet: `num_channels` runs of `block_frames`. Kept
    /// between packets and grown only when a packet is larger than any before.
    samples: Option<SampleBuffer<f32>>,
    block_frames: usize,
    /// The first packet, decoded by `open` to learn the signal's layout.
    has_pending_block: bool,
    /// Frames the decoder produces before the audio starts: an MP4 edit list's encoder priming
    /// (see [`mp4_audio_edit`]).
    skip_frames: u64,
    /// Where the audio ends, in frames after `skip_frames`, when the decoder would run past it
    /// (see [`audio_end_frames`]).
    end_frames: Option<u64>,
    /// Frames the decoder produced, priming included.
    raw_frames: u64,
    /// Frames handed out.
    frames_decoded: u64,
    /// Damaged packets replaced by silence, with the time (s) each started at.
    damaged_at_s: Vec<f64>,
    /// Zeros in place of a damaged packet (planar, `block_frames` per channel) and whether
    /// they, not `samples`, are the current block.
    silence: Vec<f32>,
    is_silence_current: bool,
    /// Damaged packets in a row; past [`MAX_DAMAGED_IN_A_ROW`] the file is given up.
    damaged_in_a_row: u32,
    /// The temporary copy of a piped input, removed with the decoder.
    _spooled: Option<SpooledPipe>,
    /// Whether packet timestamps count frames (the track's time base is 1 / sample rate).
    is_ts_in_frames: bool,
    /// The timestamp the next packet should have.
    expected_ts: Option<u64>,
    /// A packet read ahead, decoded after the silence that fills the gap before it.
    held_packet: Option<symphonia::core::formats::Packet>,
    /// Frames of damaged audio a reader skipped without saying where, and whether the end was
    /// padded for them.
    skipped_frames: u64,
    has_padded_end: bool,
}

/// The longest gap in the timestamps filled with silence (10 s at 48 kHz); a longer jump is
/// not damage but a file Stemflow does not understand.
const MAX_GAP_FRAMES: u64 = 480_000;

/// Damaged packets in a row after which a file is not audio any more.
const MAX_DAMAGED_IN_A_ROW: u32 = 64;

impl AudioDecoder {
    /// Opens and probes `path`, and decodes its first packet. Errors are sentences for the user.
    pub fn open(path: &Path) -> Result<Self, String> {
        let metadata = std::fs::metadata(path).map_err(|e| io_reason(&e))?;
        if metadata.is_dir() {
            return Err("is a folder, not an audio file".into());
        }
        if metadata.is_file() {
            if metadata.len() == 0 {
                return Err("the file is empty".into());
            }
            let mut file = File::open(path).map_err(|e| io_reason(&e))?;
            // A WAV whose writer left its length open, or with LIST chunks, is read through
            // a fixed head (see `wav::fixed_file_head`).
            return match wav::fixed_file_head(&mut file, metadata.len())? {
                None => Self::open_source(Box::new(file), Some(path), None, None, false),
                Some((head, is_length_exact)) => {
                    let stream = std::io::Read::chain(std::io::Cursor::new(head), file);
                    let source = Box::new(ReadOnlySource::new(stream));
                    Self::open_source(source, Some(path), None, None, !is_length_exact)
                }
            };
        }
        // A pipe (`<(cat song.wav)`, a FIFO, standard input) has no length and cannot seek. It is
        // decoded as it arrives, so an endless one never fills the disk; only the containers
        // that need seeking are copied to a temporary file first, within limits.
        let mut pipe = File::open(path).map_err(|e| io_reason(&e))?;
        let mut head = read_head(&mut pipe, PIPE_HEAD_BYTES)?;
        if head.is_empty() {
            return Err("the pipe delivered nothing".into());
        }
        let container = container_of(&head);
        match container {
            Some(container @ ("M4A/MP4" | "AIFF")) => {
                let spooled = SpooledPipe::read(&head, pipe, container)?;
                let file = File::open(&spooled.path).map_err(|e| io_reason(&e))?;
                let copy = spooled.path.clone();
                Self::open_source(Box::new(file), Some(&copy), None, Some(spooled), false)
            }
            _ => {
                // A WAV written to a pipe does not know its length (`ffmpeg -f wav -`).
                let is_length_open = match wav::read_wav_head(&head)? {
                    Some(wav) if wav.needs_fixing() => !wav.fix(&mut head, None),
                    _ => false,
                };
                let stream =
                    ReadOnlySource::new(std::io::Read::chain(std::io::Cursor::new(head), pipe));
                Self::open_source(Box::new(stream), None, container, None, is_length_open)
            }
        }
    }

    /// Probes `source` and decodes its first packet. `path` is the file it reads (for the
    /// readers that look at the file itself: AIFF's length, MP4's edit list); a pipe decoded as
    /// it arrives has none, and `container` is what its first bytes announce. With
    /// `is_length_open` the header's frame count is no length (a WAV from a pipe).
    fn open_source(
        source: Box<dyn MediaSource>,
        path: Option<&Path>,
        container: Option<&'static str>,
        spooled: Option<SpooledPipe>,
        is_length_open: bool,
    ) -> Result<Self, String> {
        // Header fields symphonia 0.5 panics on (a 0 Hz AIFF, an MP4 track with no time scale).
        let aiff = path.and_then(aiff_comm);
        if aiff.is_some_and(|comm| comm.sample_rate_hz.is_nan() || comm.sample_rate_hz < 1.0) {
            return Err("a damaged AIFF file: its header says the sample rate is 0 Hz".into());
        }
        if path.is_some_and(mp4_has_a_zero_timescale) {
            return Err("a damaged M4A/MP4 file: a track's time scale is 0".into());
        }
        let stream = MediaSourceStream::new(source, Default::default());
        let mut hint = Hint::new();
        let extension = match path {
            Some(path) => path.extension().and_then(|e| e.to_str()),
            None => container.and_then(|c| match c {
                "WAV" => Some("wav"),
                "FLAC" => Some("flac"),
                "Ogg" => Some("ogg"),
                "MP3" => Some("mp3"),
                _ => None,
            }),
        };
        if let Some(extension) = extension {
            hint.with_extension(extension);
        }
        let format_options = FormatOptions {
            enable_gapless: true,
            ..Default::default()
        };
        let probed = symphonia::default::get_probe()
            .format(&hint, stream, &format_options, &MetadataOptions::default())
            .map_err(|e| match e {
                SymphoniaError::IoError(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                    match path.and_then(container_name).or(container) {
                        Some(container) => format!(
                            "a truncated or damaged {container} file: it ends before its audio is described"
                        ),
                        None => format!("not a supported audio file (too short to be {SUPPORTED_FORMATS})"),
                    }
                }
                SymphoniaError::IoError(e) => io_reason(&e),
                other => match path.and_then(container_name).or(container) {
                    Some(container) => format!(
                        "an unsupported or damaged {container} file ({})",
                        symphonia_reason(&other)
                    ),
                    None => format!("not a supported audio file (expected {SUPPORTED_FORMATS})"),
                },
            })?;
        let format = probed.format;
        let track = format
            .tracks()
            .iter()
            .find(|t| t.codec_params.codec != CODEC_TYPE_NULL)
            .ok_or("the file has no audio track")?;
        let track_id = track.id;
        let params = track.codec_params.clone();
        let codecs = symphonia::default::get_codecs();
        let codec = codecs
            .get_codec(params.codec)
            .map(|d| d.short_name.to_owned())
            .unwrap_or_else(|| "unknown".into());
        let decoder = codecs
            .make(&params, &DecoderOptions::default())
            .map_err(|e| match e {
                SymphoniaError::Unsupported(what) => {
                    format!("unsupported codec ({what}); Stemflow reads {SUPPORTED_FORMATS}")
                }
                other => format!("cannot decode: {}", symphonia_reason(&other)),
            })?;
        if let Some(channels) = params.channels {
            check_channel_count(channels.count())?;
        }
        let aiff_frames = aiff.map(|comm| comm.num_frames);
        let mp4_edit = path.and_then(|path| mp4_audio_edit(path, params.sample_rate.unwrap_or(0)));
        let is_pcm = codec.starts_with("pcm");
        let is_length_exact = is_pcm || codec == "flac";
        let is_float = matches!(
            params.sample_format,
            Some(SampleFormat::F32 | SampleFormat::F64)
        ) || codec.starts_with("pcm_f");
        let integer_bits = if (is_pcm || codec == "flac") && !is_float {
            params.bits_per_sample
        } else {
            None
        };
        let info = SourceInfo {
            sample_rate_hz: params.sample_rate.unwrap_or(0),
            num_channels: params.channels.map_or(0, |c| c.count()),
            // FLAC writes 0 when the encoder did not know the length.
            num_frames: aiff_frames
                .or(mp4_edit.map(|edit| edit.num_frames))
                .or(params.n_frames.filter(|&n| n > 0 && !is_length_open)),
            is_length_exact: is_length_exact && !is_length_open,
            codec,
            integer_bits,
        };
        let end_frames = audio_end_frames(&info, aiff_frames.is_some());
        let is_ts_in_frames = matches!(
            (params.time_base, params.sample_rate),
            (Some(time_base), Some(rate)) if time_base.numer == 1 && time_base.denom == rate
        );
        let mut decoder = Self {
            format,
            decoder,
            track_id,
            info,
            samples: None,
            block_frames: 0,
            has_pending_block: false,
            skip_frames: mp4_edit.map_or(0, |edit| edit.skip_frames),
            end_frames,
            raw_frames: 0,
            frames_decoded: 0,
            damaged_at_s: Vec::new(),
            silence: Vec::new(),
            is_silence_current: false,
            damaged_in_a_row: 0,
            _spooled: spooled,
            is_ts_in_frames,
            expected_ts: None,
            held_packet: None,
            skipped_frames: 0,
            has_padded_end: false,
        };
        // Decode up to the first packet with audio: it fixes the channel count and rate for
        // formats whose headers leave them open.
        if !decoder.decode_next()? {
            return Err("the file contains no audio".into());
        }
        // A first packet that is damaged becomes silence before any packet told the channel
        // count (found by the audio fuzzer: an M4A whose header names none).
        if decoder.info.num_channels == 0 || decoder.info.sample_rate_hz == 0 {
            return Err(
                "a damaged file: its first audio packet is corrupt and its header does not say \
                 how many channels or what sample rate it has"
                    .into(),
            );
        }
        decoder.has_pending_block = true;
        Ok(decoder)
    }

    /// What the file holds.
    pub fn info(&self) -> &SourceInfo {
        &self.info
    }

    /// Where damaged packets were replaced by silence (seconds into the audio), for a warning.
    pub fn damaged_at_s(&self) -> &[f64] {
        &self.damaged_at_s
    }

    /// The next block of frames as `[left, right]` (mono: the same slice twice), or `None` at
    /// the end of the file. A file that ends before its header said is an error.
    pub fn next_block(&mut self) -> Result<Option<[&[f32]; 2]>, String> {
        loop {
            // Priming before the audio starts is decoded and dropped.
            let start = self.skip_frames.saturating_sub(self.raw_frames);
            if !self.next_raw_block()? {
                return Ok(None);
            }
            self.raw_frames += self.block_frames as u64;
            let start = start.min(self.block_frames as u64) as usize;
            if start < self.block_frames {
                return self.hand_out(start);
            }
        }
    }

    /// Makes the next decoded packet current. `false` at the end of the file, an error when it
    /// ends before its header said.
    fn next_raw_block(&mut self) -> Result<bool, String> {
        if self.has_pending_block {
            self.has_pending_block = false;
        } else if !self.decode_next()? {
            if let (true, Some(expected)) = (self.info.is_length_exact, self.info.num_frames) {
                if self.frames_decoded < expected {
                    return Err(format!(
                        "the file is truncated: its header announces {expected} frames ({:.2} s) but the audio ends after {} ({:.2} s)",
                        expected as f64 / self.info.sample_rate_hz as f64,
                        self.frames_decoded,
                        self.frames_decoded as f64 / self.info.sample_rate_hz as f64
                    ));
                }
            }
            // A lossy stream whose header knows its length (an MP3's Xing/LAME frame count) and
            // came out short: its reader skipped damaged data without saying where. The end is
            // padded with silence so the stems keep the file's length, and a warning says how
            // much was lost.
            if let (false, Some(expected), false) = (
                self.info.is_length_exact,
                self.info.num_frames,
                self.has_padded_end,
            ) {
                let missing = expected.saturating_sub(self.frames_decoded);
                if missing > 0 && missing <= MAX_GAP_FRAMES {
                    self.has_padded_end = true;
                    self.skipped_frames = missing;
                    self.make_silence_current(missing as usize);
                    return Ok(true);
                }
            }
            return Ok(false);
        }
        Ok(true)
    }

    /// Frames a lossy stream's reader skipped without saying where (padded at the end).
    pub fn skipped_frames(&self) -> u64 {
        self.skipped_frames
    }

    /// Hands out the current packet's frames from `start` on, up to the end of the audio.
    fn hand_out(&mut self, start: usize) -> Result<Option<[&[f32]; 2]>, String> {
        let mut frames = self.block_frames - start;
        if let Some(end) = self.end_frames {
            frames = frames.min(end.saturating_sub(self.frames_decoded) as usize);
            if frames == 0 {
                return Ok(None);
            }
        }
        self.frames_decoded += frames as u64;
        let stride = self.block_frames;
        let planar = if self.is_silence_current {
            &self.silence[..]
        } else {
            self.samples.as_ref().map_or(&[][..], |s| s.samples())
        };
        let left = &planar[start..start + frames];
        let right = if self.info.num_channels == 2 {
            &planar[stride + start..stride + start + frames]
        } else {
            left
        };
        Ok(Some([left, right]))
    }

    /// Decodes packets until one yields audio. Returns `false` at the end of the stream.
    fn decode_next(&mut self) -> Result<bool, String> {
        loop {
            let packet = match self
                .held_packet
                .take()
                .map(Ok)
                .unwrap_or_else(|| self.format.next_packet())
            {
                Ok(packet) => packet,
                Err(SymphoniaError::IoError(e))
                    if e.kind() == std::io::ErrorKind::UnexpectedEof =>
                {
                    return Ok(false)
                }
                Err(SymphoniaError::ResetRequired) => {
                    return Err(
                        "the stream changes its format midway, which Stemflow does not support"
                            .into(),
                    )
                }
                Err(e) => return Err(self.error_at(&e)),
            };
            if packet.track_id() != self.track_id {
                continue;
            }
            if packet.buf().is_empty() {
                // The container promised more data than the file holds.
                return Ok(false);
            }
            // A reader that skipped damaged data (FLAC resyncs on its own) leaves a gap in the
            // timestamps: the gap becomes silence, so the rest stays in time, and a warning.
            if let (Some(expected), true) = (self.expected_ts, self.is_ts_in_frames) {
                let gap = packet.ts.saturating_sub(expected);
                if gap > 0 && gap <= MAX_GAP_FRAMES && self.damaged_in_a_row < MAX_DAMAGED_IN_A_ROW
                {
                    self.damaged_in_a_row += 1;
                    self.damaged_at_s
                        .push(self.raw_frames as f64 / f64::from(self.info.sample_rate_hz.max(1)));
                    self.expected_ts = Some(packet.ts);
                    self.held_packet = Some(packet);
                    self.make_silence_current(gap as usize);
                    return Ok(true);
                }
            }
            self.expected_ts = Some(packet.ts + packet.dur);
            let decoded = match self.decoder.decode(&packet) {
                Ok(decoded) => decoded,
                Err(SymphoniaError::DecodeError(_))
                    if packet.dur > 0
                        && packet.dur <= 1 << 16
                        && self.damaged_in_a_row < MAX_DAMAGED_IN_A_ROW
                        && self.info.sample_rate_hz > 0 =>
                {
                    // One damaged packet: its length in silence (so the rest stays in time) and a
                    // warning; the rest of the file is still good audio.
                    self.damaged_in_a_row += 1;
                    self.damaged_at_s
                        .push(self.raw_frames as f64 / f64::from(self.info.sample_rate_hz));
                    self.decoder.reset();
                    self.make_silence_current(packet.dur as usize);
                    return Ok(true);
                }
                Err(e) => return Err(self.error_at(&e)),
            };
            self.damaged_in_a_row = 0;
            self.is_silence_current = false;
            if decoded.frames() == 0 {
                continue;
            }
            let spec = *decoded.spec();
            let num_channels = spec.channels.count();
            check_channel_count(num_channels)?;
            if self.info.num_channels == 0 {
                self.info.num_channels = num_channels;
            }
            if self.info.sample_rate_hz == 0 {
                self.info.sample_rate_hz = spec.rate;
            }
            if num_channels != self.info.num_channels || spec.rate != self.info.sample_rate_hz {
                return Err(format!(
                    "the stream changes from {} channels at {} Hz to {num_channels} at {} Hz midway",
                    self.info.num_channels, self.info.sample_rate_hz, spec.rate
                ));
            }
            self.block_frames = copy_planar(&mut self.samples, decoded);
            return Ok(true);
        }
    }

    /// Makes `frames` frames of silence the current block (in place of damaged audio).
    fn make_silence_current(&mut self, frames: usize) {
        self.silence.clear();
        self.silence
            .resize(frames * self.info.num_channels.max(1), 0.0);
        self.is_silence_current = true;
        self.block_frames = frames;
    }

    fn error_at(&self, error: &SymphoniaError) -> String {
        let at_s = self.frames_decoded as f64 / self.info.sample_rate_hz.max(1) as f64;
        match error {
            SymphoniaError::IoError(e) => format!("read error at {at_s:.2} s: {}", io_reason(e)),
            other => format!("corrupt audio at {at_s:.2} s: {}", symphonia_reason(other)),
        }
    }
}

/// Where to stop handing out frames, for decoders that would otherwise run past the audio:
/// Vorbis pads the last packet (the final granule position is exact), AAC in MP4 pads it to
/// 1024 frames (the track duration is exact), and symphonia's AIFF reader counts the sound
/// chunk's 8-byte header as audio (the COMM chunk's frame count is exact).
fn audio_end_frames(info: &SourceInfo, is_aiff: bool) -> Option<u64> {
    if is_aiff || info.codec == "vorbis" || info.codec == "aac" {
        info.num_frames
    } else {
        None
    }
}

/// Converts a decoded packet into planar `f32` in `samples`, growing it only when needed.
/// Returns the number of frames.
fn copy_planar(samples: &mut Option<SampleBuffer<f32>>, decoded: AudioBufferRef<'_>) -> usize {
    let frames = decoded.frames();
    let spec = *decoded.spec();
    let capacity = decoded.capacity();
    let samples = match samples {
        Some(samples) if samples.capacity() >= capacity * spec.channels.count() => samples,
        slot => slot.insert(SampleBuffer::new(capacity as u64, spec)),
    };
    samples.copy_planar_ref(decoded);
    frames
}

fn check_channel_count(num_channels: usize) -> Result<(), String> {
    match num_channels {
        1 | 2 => Ok(()),
        0 => Err("the file has no audio channels".into()),
        n => Err(format!(
            "{n} channels; Stemflow separates mono or stereo files (downmix first, e.g. `ffmpeg -i IN -ac 2 OUT.wav`)"
        )),
    }
}

fn symphonia_reason(error: &SymphoniaError) -> String {
    match error {
        SymphoniaError::IoError(e) => io_reason(e),
        SymphoniaError::DecodeError(what) => what.to_string(),
        SymphoniaError::Unsupported(what) => format!("unsupported feature: {what}"),
        SymphoniaError::SeekError(_) => "seek error".into(),
        SymphoniaError::LimitError(what) => format!("limit exceeded: {what}"),
        SymphoniaError::ResetRequired => "the stream changes its format midway".into(),
    }
}

/// `name` in the decoder tests' scratch folder (emptied once per test process).
#[cfg(test)]
fn test_path(name: &str) -> std::path::PathBuf {
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| stemflow_kit::testing::scratch_dir("decode"))
        .join(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_wav(path: &Path, channels: u16, frames: &[i16]) {
        let spec = hound::WavSpec {
            channels,
            sample_rate: 22_050,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let mut writer = hound::WavWriter::create(path, spec).unwrap();
        for &s in frames {
            writer.write_sample(s).unwrap();
        }
        writer.finalize().unwrap();
    }

    fn decode_all(path: &Path) -> Result<(SourceInfo, [Vec<f32>; 2]), String> {
        let mut decoder = AudioDecoder::open(path)?;
        let mut channels = [Vec::new(), Vec::new()];
        while let Some([left, right]) = decoder.next_block()? {
            channels[0].extend_from_slice(left);
            channels[1].extend_from_slice(right);
        }
        Ok((decoder.info().clone(), channels))
    }

    #[test]
    fn sixteen_bit_stereo_decodes_exactly() {
        let path = test_path("stereo.wav");
        let samples: Vec<i16> = (0..20_000)
            .map(|i| ((i * 37) % 65_536 - 32_768) as i16)
            .collect();
        write_wav(&path, 2, &samples);
        let (info, channels) = decode_all(&path).unwrap();
        assert_eq!(info.sample_rate_hz, 22_050);
        assert_eq!(info.num_channels, 2);
        assert_eq!(info.num_frames, Some(10_000));
        assert_eq!(info.integer_bits, Some(16));
        assert_eq!(channels[0].len(), 10_000);
        for (i, &s) in samples.iter().enumerate() {
            assert_eq!(channels[i % 2][i / 2], s as f32 / 32_768.0);
        }
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn mono_is_the_same_slice_twice() {
        let path = test_path("mono.wav");
        write_wav(&path, 1, &[0, 16_384, -32_768]);
        let (info, channels) = decode_all(&path).unwrap();
        assert_eq!(info.num_channels, 1);
        assert_eq!(channels[0], vec![0.0, 0.5, -1.0]);
        assert_eq!(channels[0], channels[1]);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_truncated_wav_is_an_error() {
        let path = test_path("truncated.wav");
        write_wav(&path, 2, &vec![1_000; 40_000]);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
        let error = decode_all(&path).unwrap_err();
        assert!(error.contains("truncated"), "{error}");
        assert!(error.contains("20000 frames"), "{error}");
        std::fs::remove_file(&path).unwrap();
    }

    /// A 16-bit stereo WAV of `num_frames` frames (a ramp), as hound writes it: the canonical
    /// 44-byte header (sample rate at 24, data size at 40).
    fn canonical_wav(path: &Path, num_frames: usize) -> Vec<u8> {
        let samples: Vec<i16> = (0..2 * num_frames).map(|i| (i % 30_000) as i16).collect();
        write_wav(path, 2, &samples);
        let bytes = std::fs::read(path).unwrap();
        assert_eq!(&bytes[36..40], b"data");
        bytes
    }

    #[test]
    fn a_0_hz_wav_is_an_error_not_a_panic() {
        let path = test_path("zero-hz.wav");
        let mut bytes = canonical_wav(&path, 100);
        bytes[24..28].copy_from_slice(&0u32.to_le_bytes());
        std::fs::write(&path, &bytes).unwrap();
        let error = decode_all(&path).unwrap_err();
        assert!(error.contains("sample rate is 0 Hz"), "{error}");
        std::fs::remove_file(&path).unwrap();
    }

    /// Why the header checks exist: symphonia 0.5 panics on a 0 Hz WAV (`TimeBase::new`). When
    /// this fails, symphonia stopped panicking, and the rate checks could go.
    #[test]
    fn symphonia_itself_panics_on_a_0_hz_wav() {
        let path = test_path("zero-hz-raw.wav");
        let mut bytes = canonical_wav(&path, 10);
        bytes[24..28].copy_from_slice(&0u32.to_le_bytes());
        let outcome = std::panic::catch_unwind(|| {
            let source = Box::new(std::io::Cursor::new(bytes));
            let _ = symphonia::default::get_probe().format(
                &Hint::new(),
                MediaSourceStream::new(source, Default::default()),
                &FormatOptions::default(),
                &MetadataOptions::default(),
            );
        });
        assert!(outcome.is_err());
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn hostile_wav_headers_are_clear_errors() {
        let path = test_path("hostile.wav");
        let good = canonical_wav(&path, 1_000);
        let with = |at: usize, field: &[u8]| {
            let mut bytes = good.clone();
            bytes[at..at + field.len()].copy_from_slice(field);
            bytes
        };
        // A 4 GB LIST chunk (an INFO list) before the data: symphonia would allocate it.
        let list = [&b"LIST"[..], &0xF000_0000u32.to_le_bytes(), b"INFOINAM"].concat();
        let mut huge_list = with(4, &u32::MAX.to_le_bytes());
        huge_list.splice(
            36..36,
            [list, 0xEFFF_FFF0u32.to_le_bytes().to_vec()].concat(),
        );
        // 2,000 frames announced, 1,000 there.
        let mut lying_size = with(40, &8_000u32.to_le_bytes());
        lying_size[4..8].copy_from_slice(&8_036u32.to_le_bytes());
        for (what, bytes, expected) in [
            (
                "65,535 channels",
                with(22, &u16::MAX.to_le_bytes()),
                "damaged WAV file (riff: invalid channel count)",
            ),
            (
                "7-bit",
                with(34, &7u16.to_le_bytes()),
                "unsupported or damaged WAV file",
            ),
            ("a data size past the end", lying_size, "truncated"),
            ("a 4 GB LIST chunk", huge_list, "truncated or damaged WAV"),
        ] {
            std::fs::write(&path, &bytes).unwrap();
            let error = decode_all(&path).unwrap_err();
            assert!(error.contains(expected), "{what}: {error}");
        }
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_wav_of_unknown_length_decodes_to_its_end() {
        // ffmpeg to a pipe: RIFF and data sizes 0xFFFFFFFF; other streaming writers: data 0.
        let path = test_path("streamed.wav");
        let good = canonical_wav(&path, 22_050);
        let (_, expected) = decode_all(&path).unwrap();
        for data_size in [u32::MAX, 0] {
            let mut bytes = good.clone();
            bytes[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
            bytes[40..44].copy_from_slice(&data_size.to_le_bytes());
            std::fs::write(&path, &bytes).unwrap();
            let (info, channels) = decode_all(&path).unwrap();
            assert_eq!(info.num_frames, Some(22_050), "data size {data_size:#x}");
            assert!(info.is_length_exact);
            assert_eq!(channels, expected, "data size {data_size:#x}");
        }
        // The header exactly as `ffmpeg -i song.flac -f wav - > song.wav` writes it: a LIST
        // chunk naming the encoder before the data.
        let mut ffmpeg = good.clone();
        ffmpeg[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        ffmpeg[40..44].copy_from_slice(&u32::MAX.to_le_bytes());
        let list = [&b"LIST\x1a\0\0\0INFOISFT\x0e\0\0\0"[..], b"Lavf59.27.100\0"].concat();
        ffmpeg.splice(36..36, list);
        std::fs::write(&path, &ffmpeg).unwrap();
        let (info, channels) = decode_all(&path).unwrap();
        assert_eq!(info.num_frames, Some(22_050));
        assert_eq!(channels, expected);
        // A real announced size larger than what the file holds is still a truncation.
        let mut truncated = good.clone();
        truncated.truncate(44 + 4 * 11_000);
        std::fs::write(&path, &truncated).unwrap();
        let error = decode_all(&path).unwrap_err();
        assert!(error.contains("announces 22050 frames"), "{error}");
        std::fs::remove_file(&path).unwrap();
    }

    /// `bytes` written into a new FIFO by a thread, as `ffmpeg … - | stemflow` or `<(…)` do.
    #[cfg(unix)]
    fn fifo_with(name: &str, bytes: Vec<u8>) -> (std::path::PathBuf, std::thread::JoinHandle<()>) {
        let path = test_path(name);
        let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path; mkfifo keeps nothing.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let writer_path = path.clone();
        let writer = std::thread::spawn(move || {
            use std::io::Write;
            // The reader may stop early (an error); a broken pipe is not this test's concern.
            if let Ok(mut fifo) = File::create(&writer_path) {
                let _ = fifo.write_all(&bytes);
            }
        });
        (path, writer)
    }

    #[cfg(unix)]
    #[test]
    fn a_wav_of_unknown_length_from_a_pipe_decodes_to_its_end() {
        let path = test_path("streamed-source.wav");
        let mut bytes = canonical_wav(&path, 30_001);
        let (_, expected) = decode_all(&path).unwrap();
        bytes[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        bytes[40..44].copy_from_slice(&u32::MAX.to_le_bytes());
        let (fifo, writer) = fifo_with("streamed.fifo", bytes);
        let (info, channels) = decode_all(&fifo).unwrap();
        writer.join().unwrap();
        assert_eq!(info.num_frames, None);
        assert!(!info.is_length_exact);
        assert_eq!(channels[0].len(), 30_001);
        assert_eq!(channels, expected);
        // A 0 Hz header from a pipe is refused before symphonia sees it.
        let mut zero_hz = std::fs::read(&path).unwrap();
        zero_hz[24..28].copy_from_slice(&0u32.to_le_bytes());
        let (fifo, writer) = fifo_with("zero-hz.fifo", zero_hz);
        let error = decode_all(&fifo).unwrap_err();
        writer.join().unwrap();
        assert!(error.contains("0 Hz"), "{error}");
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn empty_and_text_files_are_errors() {
        let empty = test_path("empty.wav");
        std::fs::write(&empty, b"").unwrap();
        assert_eq!(decode_all(&empty).unwrap_err(), "the file is empty");
        let text = test_path("text.mp3");
        std::fs::write(&text, "this is not audio\n".repeat(100)).unwrap();
        let error = decode_all(&text).unwrap_err();
        assert!(error.contains("not a supported audio file"), "{error}");
        let missing = test_path("missing.flac");
        assert_eq!(decode_all(&missing).unwrap_err(), "no such file");
        std::fs::remove_file(&empty).unwrap();
        std::fs::remove_file(&text).unwrap();
    }
}
