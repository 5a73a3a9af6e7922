//! Streaming stem writers: WAV (16/24-bit integer or 32-bit float, through `hound`) and FLAC
//! (16/24-bit, through `flacenc`, one frame at a time). Each file is written under a temporary
//! name beside its final one and renamed when complete, so a failed run never leaves a
//! half-written stem behind or destroys an older one.

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use flacenc::bitsink::ByteSink;
use flacenc::component::{BitRepr, Stream, StreamInfo};
use flacenc::error::{Verified, Verify};
use flacenc::source::{Context, Fill, FrameBuf};

use crate::decode::io_reason;

/// Frames per FLAC frame (the reference encoder's default).
const FLAC_BLOCK_FRAMES: usize = 4096;

/// The container and codec of the stem files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum OutputFormat {
    /// RIFF WAVE.
    Wav,
    /// Free Lossless Audio Codec (integer samples only).
    Flac,
}

impl OutputFormat {
    /// The file extension.
    pub fn extension(self) -> &'static str {
        match self {
            OutputFormat::Wav => "wav",
            OutputFormat::Flac => "flac",
        }
    }
}

/// The sample format of the stem files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum BitDepth {
    /// 16-bit integer.
    #[cfg_attr(feature = "clap", value(name = "16"))]
    Int16,
    /// 24-bit integer.
    #[cfg_attr(feature = "clap", value(name = "24"))]
    Int24,
    /// 32-bit float (WAV only).
    #[cfg_attr(feature = "clap", value(name = "32f"))]
    Float32,
}

impl BitDepth {
    /// The default for an input: its own depth when it is 16- or 24-bit integer PCM (WAV, AIFF,
    /// FLAC), otherwise 32-bit float for WAV and 24-bit for FLAC, which has no float samples.
    pub fn default_for(input_integer_bits: Option<u32>, format: OutputFormat) -> BitDepth {
        match (input_integer_bits, format) {
            (Some(16), _) => BitDepth::Int16,
            (Some(24), _) => BitDepth::Int24,
            (_, OutputFormat::Wav) => BitDepth::Float32,
            (_, OutputFormat::Flac) => BitDepth::Int24,
        }
    }

    /// Bits per sample.
    pub fn bits(self) -> u16 {
        match self {
            BitDepth::Int16 => 16,
            BitDepth::Int24 => 24,
            BitDepth::Float32 => 32,
        }
    }

    /// "16-bit", "24-bit", "32-bit float".
    pub fn describe(self) -> &'static str {
        match self {
            BitDepth::Int16 => "16-bit",
            BitDepth::Int24 => "24-bit",
            BitDepth::Float32 => "32-bit float",
        }
    }
}

/// Quantizes to a signed `bits`-bit integer, rounding to nearest (no dither) and clipping.
/// Returns the sample and whether it clipped. The scale matches the decoder's, so integer input
/// that passes through unchanged comes back bit-exact.
fn quantize(sample: f32, bits: u16) -> (i32, bool) {
    let scale = (1i64 << (bits - 1)) as f64;
    let max = scale - 1.0;
    let value = (sample as f64 * scale).round();
    if value > max {
        (max as i32, true)
    } else if value < -scale {
        (-scale as i32, true)
    } else {
        (value as i32, false)
    }
}

enum Encoder {
    Wav(hound::WavWriter<BufWriter<File>>),
    Flac(FlacThread),
}

/// Blocks of samples in flight to one FLAC encoder thread: bounds memory when encoding falls
/// behind separation.
const FLAC_QUEUE_BLOCKS: usize = 16;

/// A [`FlacWriter`] on its own thread, so the stems of one input encode in parallel with each
/// other and with the separation (FLAC encoding is the slow part of writing).
struct FlacThread {
    sender: Option<std::sync::mpsc::SyncSender<Vec<i32>>>,
    thread: Option<std::thread::JoinHandle<Result<(), String>>>,
}

impl FlacThread {
    fn start(mut writer: FlacWriter) -> Result<Self, String> {
        let (sender, receiver) = std::sync::mpsc::sync_channel::<Vec<i32>>(FLAC_QUEUE_BLOCKS);
        let thread = std::thread::Builder::new()
            .name("stemflow-flac".into())
            .spawn(move || {
                for samples in receiver {
                    writer.write_interleaved(&samples)?;
                }
                writer.finish()
            })
            .map_err(|e| format!("cannot start a FLAC encoder thread: {e}"))?;
        Ok(Self {
            sender: Some(sender),
            thread: Some(thread),
        })
    }

    /// Hands interleaved samples to the encoder; an encoder that failed says why.
    fn write(&mut self, samples: Vec<i32>) -> Result<(), String> {
        let sent = self.sender.as_ref().map(|s| s.send(samples));
        match sent {
            Some(Ok(())) => Ok(()),
            // The thread stopped on an error: its result says which.
            _ => Err(self
                .join()
                .err()
                .unwrap_or_else(|| "the FLAC encoder stopped".into())),
        }
    }

    /// Encodes what is left, completes the file and waits for the thread.
    fn join(&mut self) -> Result<(), String> {
        self.sender = None;
        match self.thread.take() {
            Some(thread) => thread
                .join()
                .unwrap_or_else(|_| Err("the FLAC encoder panicked".into())),
            None => Err("the FLAC encoder already stopped".into()),
        }
    }
}

/// One stem file being written.
pub struct StemWriter {
    encoder: Option<Encoder>,
    bit_depth: BitDepth,
    num_channels: usize,
    partial_path: PathBuf,
    final_path: PathBuf,
    /// Integer samples, interleaved, for the block being written.
    scratch: Vec<i32>,
    clipped_samples: u64,
    /// The complete partial file belongs to a [`FinishedStem`] now (which renames or removes
    /// it); until then this writer removes it when dropped.
    is_handed_over: bool,
}

/// A stem file written completely under its temporary name, waiting for [`FinishedStem::commit`]
/// to give it its final name. Dropped without that (another stem failed), it is removed, so a
/// failed input never leaves a `.NAME.partial` file behind.
pub struct FinishedStem {
    partial_path: PathBuf,
    final_path: PathBuf,
    is_committed: bool,
}

impl FinishedStem {
    /// Renames the file to its final name (replacing a file of that name). On failure the
    /// temporary file is removed.
    pub fn commit(mut self) -> Result<PathBuf, String> {
        std::fs::rename(&self.partial_path, &self.final_path).map_err(|e| {
            format!(
                "cannot write {}: {}",
                self.final_path.display(),
                io_reason(&e)
            )
        })?;
        self.is_committed = true;
        Ok(self.final_path.clone())
    }
}

impl Drop for FinishedStem {
    fn drop(&mut self) {
        if !self.is_committed {
            let _ = std::fs::remove_file(&self.partial_path);
        }
    }
}

impl StemWriter {
    /// Creates `<final_path>`'s temporary file. `num_channels` is 1 or 2: mono stems are the
    /// average of the engine's two channels.
    pub fn create(
        final_path: &Path,
        format: OutputFormat,
        bit_depth: BitDepth,
        sample_rate_hz: u32,
        num_channels: usize,
    ) -> Result<Self, String> {
        let file_name = final_path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let partial_path = final_path.with_file_name(format!(".{file_name}.partial"));
        let reason =
            |e: std::io::Error| format!("cannot write {}: {}", final_path.display(), io_reason(&e));
        // Found now, not after the separation when the file could not be renamed.
        if final_path.is_dir() {
            return Err(format!(
                "cannot write {}: a folder has that name",
                final_path.display()
            ));
        }
        let file = BufWriter::with_capacity(1 << 16, File::create(&partial_path).map_err(reason)?);
        let encoder = match format {
            OutputFormat::Wav => {
                let spec = hound::WavSpec {
                    channels: num_channels as u16,
                    sample_rate: sample_rate_hz,
                    bits_per_sample: bit_depth.bits(),
                    sample_format: if bit_depth == BitDepth::Float32 {
                        hound::SampleFormat::Float
                    } else {
                        hound::SampleFormat::Int
                    },
                };
                Encoder::Wav(
                    hound::WavWriter::new(file, spec)
                        .map_err(|e| format!("cannot write {}: {e}", final_path.display()))?,
                )
            }
            OutputFormat::Flac => {
                if bit_depth == BitDepth::Float32 {
                    return Err("FLAC has no 32-bit float samples; use --bit-depth 16 or 24".into());
                }
                let writer = FlacWriter::new(
                    file,
                    sample_rate_hz,
                    num_channels,
                    bit_depth.bits() as usize,
                )
                .map_err(|e| format!("cannot write {}: {e}", final_path.display()))?;
                Encoder::Flac(FlacThread::start(writer)?)
            }
        };
        Ok(Self {
            encoder: Some(encoder),
            bit_depth,
            num_channels,
            partial_path,
            final_path: final_path.to_path_buf(),
            scratch: Vec::new(),
            clipped_samples: 0,
            is_handed_over: false,
        })
    }

    /// Samples that were clipped to full scale so far (integer formats only).
    pub fn clipped_samples(&self) -> u64 {
        self.clipped_samples
    }

    /// Appends frames; `left` and `right` have equal lengths.
    pub fn write(&mut self, left: &[f32], right: &[f32]) -> Result<(), String> {
        let path = &self.final_path;
        let error = |e: String| format!("cannot write {}: {e}", path.display());
        let frame = |i: usize| -> [f32; 2] { [left[i], right[i]] };
        let num_frames = left.len().min(right.len());
        match (self.encoder.as_mut(), self.bit_depth) {
            (Some(Encoder::Wav(writer)), BitDepth::Float32) => {
                for i in 0..num_frames {
                    let [l, r] = frame(i);
                    if self.num_channels == 1 {
                        writer
                            .write_sample(0.5 * (l + r))
                            .map_err(|e| error(e.to_string()))?;
                    } else {
                        writer.write_sample(l).map_err(|e| error(e.to_string()))?;
                        writer.write_sample(r).map_err(|e| error(e.to_string()))?;
                    }
                }
                Ok(())
            }
            (Some(encoder), bit_depth) => {
                let bits = bit_depth.bits();
                self.scratch.clear();
                for i in 0..num_frames {
                    let [l, r] = frame(i);
                    let samples = if self.num_channels == 1 {
                        [0.5 * (l + r), 0.0]
                    } else {
                        [l, r]
                    };
                    for &sample in &samples[..self.num_channels] {
                        let (value, is_clipped) = quantize(sample, bits);
                        self.clipped_samples += u64::from(is_clipped);
                        self.scratch.push(value);
                    }
                }
                match encoder {
                    Encoder::Wav(writer) if bits == 16 => {
                        // hound's buffered 16-bit writer: one write per block, not per sample.
                        let mut samples = writer.get_i16_writer(self.scratch.len() as u32);
                        for &value in &self.scratch {
                            samples.write_sample(value as i16);
                        }
                        samples.flush().map_err(|e| error(e.to_string()))
                    }
                    Encoder::Wav(writer) => {
                        for &value in &self.scratch {
                            writer
                                .write_sample(value)
                                .map_err(|e| error(e.to_string()))?;
                        }
                        Ok(())
                    }
                    Encoder::Flac(thread) => thread
                        .write(std::mem::take(&mut self.scratch))
                        .map_err(error),
                }
            }
            (None, _) => Err(error("the file was already finished".into())),
        }
    }

    /// Completes the file (headers, last frames) under its temporary name; [`FinishedStem::commit`]
    /// gives it its final name once every stem of the input is complete. On failure the
    /// temporary file is removed.
    pub fn finalize(mut self) -> Result<FinishedStem, String> {
        let path = self.final_path.clone();
        let error = |e: String| format!("cannot write {}: {e}", path.display());
        match self.encoder.take() {
            Some(Encoder::Wav(writer)) => writer.finalize().map_err(|e| error(e.to_string()))?,
            Some(Encoder::Flac(mut thread)) => thread.join().map_err(error)?,
            None => return Err(error("the file was already finished".into())),
        }
        self.is_handed_over = true;
        Ok(FinishedStem {
            partial_path: self.partial_path.clone(),
            final_path: self.final_path.clone(),
            is_committed: false,
        })
    }
}

impl Drop for StemWriter {
    /// An unfinished stem (an error stopped the run, or finishing it failed) is deleted.
    fn drop(&mut self) {
        if let Some(Encoder::Flac(mut thread)) = self.encoder.take() {
            // Stops the thread (it completes the file it is about to lose) before removal.
            let _ = thread.join();
        }
        if !self.is_handed_over {
            let _ = std::fs::remove_file(&self.partial_path);
        }
    }
}

/// A FLAC file written frame by frame: the STREAMINFO header goes first with placeholders and
/// is rewritten in place at the end with the length, frame sizes and MD5.
struct FlacWriter {
    file: BufWriter<File>,
    config: Verified<flacenc::config::Encoder>,
    stream_info: StreamInfo,
    /// `(frame buffer, MD5 and frame counter)`: `flacenc` fills both from the same samples.
    framebuf_and_context: (FrameBuf, Context),
    num_channels: usize,
    /// Interleaved samples not yet encoded (fewer than one block).
    pending: Vec<i32>,
    sink: ByteSink,
    header_len_bytes: usize,
}

impl FlacWriter {
    fn new(
        mut file: BufWriter<File>,
        sample_rate_hz: u32,
        num_channels: usize,
        bits_per_sample: usize,
    ) -> Result<Self, String> {
        let mut config = flacenc::config::Encoder::default();
        config.block_size = FLAC_BLOCK_FRAMES;
        let config = config.into_verified().map_err(|(_, e)| e.to_string())?;
        let mut stream = Stream::new(sample_rate_hz as usize, num_channels, bits_per_sample)
            .map_err(|e| e.to_string())?;
        stream
            .stream_info_mut()
            .set_block_sizes(FLAC_BLOCK_FRAMES, FLAC_BLOCK_FRAMES)
            .map_err(|e| e.to_string())?;
        let stream_info = stream.stream_info().clone();
        let mut sink = ByteSink::new();
        stream.write(&mut sink).map_err(|e| e.to_string())?;
        file.write_all(sink.as_slice()).map_err(|e| io_reason(&e))?;
        Ok(Self {
            file,
            config,
            stream_info,
            framebuf_and_context: (
                FrameBuf::with_size(num_channels, FLAC_BLOCK_FRAMES).map_err(|e| e.to_string())?,
                Context::new(bits_per_sample, num_channels),
            ),
            num_channels,
            pending: Vec::with_capacity(FLAC_BLOCK_FRAMES * num_channels),
            header_len_bytes: sink.as_slice().len(),
            sink,
        })
    }

    fn write_interleaved(&mut self, samples: &[i32]) -> Result<(), String> {
        let block_samples = FLAC_BLOCK_FRAMES * self.num_channels;
        let mut rest = samples;
        while !rest.is_empty() {
            let take = (block_samples - self.pending.len()).min(rest.len());
            self.pending.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if self.pending.len() == block_samples {
                self.encode_pending()?;
            }
        }
        Ok(())
    }

    fn encode_pending(&mut self) -> Result<(), String> {
        if self.pending.is_empty() {
            return Ok(());
        }
        self.framebuf_and_context
            .fill_interleaved(&self.pending)
            .map_err(|e| e.to_string())?;
        let (framebuf, context) = &self.framebuf_and_context;
        let frame_number = context.current_frame_number().unwrap_or(0);
        let frame = flacenc::encode_fixed_size_frame(
            &self.config,
            framebuf,
            frame_number,
            &self.stream_info,
        )
        .map_err(|e| e.to_string())?;
        self.stream_info.update_frame_info(&frame);
        self.sink.clear();
        frame.write(&mut self.sink).map_err(|e| e.to_string())?;
        self.file
            .write_all(self.sink.as_slice())
            .map_err(|e| io_reason(&e))?;
        self.pending.clear();
        Ok(())
    }

    fn finish(mut self) -> Result<(), String> {
        self.encode_pending()?;
        let context = &self.framebuf_and_context.1;
        self.stream_info.set_md5_digest(&context.md5_digest());
        self.stream_info.set_total_samples(context.total_samples());
        // The minimum excludes the last, shorter block: the stream has a fixed block size
        // (symphonia refuses a fixed-size stream whose STREAMINFO says otherwise).
        self.stream_info
            .set_block_sizes(FLAC_BLOCK_FRAMES, FLAC_BLOCK_FRAMES)
            .map_err(|e| e.to_string())?;
        let stream = Stream::with_stream_info(self.stream_info.clone());
        self.sink.clear();
        stream.write(&mut self.sink).map_err(|e| e.to_string())?;
        if self.sink.as_slice().len() != self.header_len_bytes {
            return Err("internal error: the FLAC header changed size".into());
        }
        let mut file = self.file.into_inner().map_err(|e| io_reason(e.error()))?;
        file.seek(SeekFrom::Start(0))
            .and_then(|_| file.write_all(self.sink.as_slice()))
            .and_then(|_| file.sync_data())
            .map_err(|e| io_reason(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantize_rounds_and_clips() {
        assert_eq!(quantize(0.5, 16), (16_384, false));
        assert_eq!(quantize(-1.0, 16), (-32_768, false));
        assert_eq!(quantize(1.0, 16), (32_767, true));
        assert_eq!(quantize(-1.5, 24), (-8_388_608, true));
        assert_eq!(quantize(1.0 / 65_536.0, 16), (1, false));
        for s in [-32_768i32, -1, 0, 1, 12_345, 32_767] {
            assert_eq!(quantize(s as f32 / 32_768.0, 16), (s, false));
        }
    }

    #[test]
    fn default_depth_follows_the_input() {
        use BitDepth::*;
        use OutputFormat::*;
        assert_eq!(BitDepth::default_for(Some(16), Wav), Int16);
        assert_eq!(BitDepth::default_for(Some(24), Flac), Int24);
        assert_eq!(BitDepth::default_for(None, Wav), Float32);
        assert_eq!(BitDepth::default_for(Some(32), Wav), Float32);
        assert_eq!(BitDepth::default_for(None, Flac), Int24);
        assert_eq!(BitDepth::default_for(Some(8), Flac), Int24);
    }

    #[test]
    fn a_failed_stem_leaves_no_file() {
        let dir = std::env::temp_dir().join(format!("stemflow-encode-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("vocals.wav");
        let mut writer =
            StemWriter::create(&path, OutputFormat::Wav, BitDepth::Int16, 44_100, 2).unwrap();
        writer.write(&[0.1, 0.2], &[0.3, 0.4]).unwrap();
        drop(writer);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn flac_round_trips_exactly_for_short_and_multi_block_streams() {
        let dir = std::env::temp_dir().join(format!("stemflow-flac-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (num_frames, num_channels, depth) in [
            (1_000, 2, BitDepth::Int16),
            (10_000, 1, BitDepth::Int24),
            (4_096, 2, BitDepth::Int24),
        ] {
            let path = dir.join(format!("{num_frames}-{num_channels}.flac"));
            let bits = depth.bits();
            let left: Vec<f32> = (0..num_frames)
                .map(|i| ((i * 7919) % 2001) as f32 / 1000.0 - 1.0)
                .collect();
            let right: Vec<f32> = left.iter().map(|x| -0.5 * x).collect();
            let mut writer =
                StemWriter::create(&path, OutputFormat::Flac, depth, 32_000, num_channels).unwrap();
            // Uneven writes across block boundaries.
            for (l, r) in left.chunks(777).zip(right.chunks(777)) {
                writer.write(l, r).unwrap();
            }
            writer.finalize().unwrap().commit().unwrap();

            let mut decoder = crate::decode::AudioDecoder::open(&path).unwrap();
            assert_eq!(decoder.info().integer_bits, Some(u32::from(bits)));
            assert_eq!(decoder.info().num_frames, Some(num_frames as u64));
            let mut decoded = Vec::new();
            while let Some([l, _]) = decoder.next_block().unwrap() {
                decoded.extend_from_slice(l);
            }
            let scale = (1i64 << (bits - 1)) as f32;
            let expected: Vec<f32> = left
                .iter()
                .zip(&right)
                .map(|(&l, &r)| {
                    let x = if num_channels == 1 { 0.5 * (l + r) } else { l };
                    quantize(x, bits).0 as f32 / scale
                })
                .collect();
            assert_eq!(
                decoded, expected,
                "{num_frames} frames, {num_channels} channels"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn no_partial_file_is_left_when_a_stem_is_not_committed_or_cannot_be() {
        let dir =
            std::env::temp_dir().join(format!("stemflow-encode-partial-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let partials = || -> Vec<_> {
            std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".partial"))
                .collect()
        };
        let write = |name: &str| {
            let mut writer = StemWriter::create(
                &dir.join(name),
                OutputFormat::Wav,
                BitDepth::Int16,
                44_100,
                2,
            )
            .unwrap();
            writer.write(&[0.1; 64], &[0.2; 64]).unwrap();
            writer
        };
        // Completed but dropped (another stem of the input failed).
        drop(write("drums.wav").finalize().unwrap());
        assert_eq!(partials(), Vec::<String>::new());
        assert!(!dir.join("drums.wav").exists());
        // A folder took the final name after the writer was created.
        let writer = write("bass.wav");
        std::fs::create_dir(dir.join("bass.wav")).unwrap();
        let error = writer.finalize().unwrap().commit().unwrap_err();
        assert!(error.contains("bass.wav"), "{error}");
        assert_eq!(partials(), Vec::<String>::new());
        // A folder that has the name already: refused before anything is written.
        let error = StemWriter::create(
            &dir.join("bass.wav"),
            OutputFormat::Wav,
            BitDepth::Int16,
            44_100,
            2,
        )
        .err()
        .unwrap();
        assert!(error.contains("a folder has that name"), "{error}");
        assert_eq!(partials(), Vec::<String>::new());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
