//! 32-bit float WAV files for the CLI comparisons.

use std::path::Path;

/// Writes `channels` (equally long) as a 32-bit float WAV file.
pub fn write_f32(path: &Path, sample_rate_hz: u32, channels: &[Vec<f32>]) {
    let spec = hound::WavSpec {
        channels: channels.len() as u16,
        sample_rate: sample_rate_hz,
        bits_per_sample: 32,
        sample_format: hound::SampleFormat::Float,
    };
    let mut writer = hound::WavWriter::create(path, spec)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", path.display()));
    let num_frames = channels.first().map_or(0, Vec::len);
    for frame in 0..num_frames {
        for channel in channels {
            writer.write_sample(channel[frame]).expect("write sample");
        }
    }
    writer.finalize().expect("finalize wav");
}

/// Reads a WAV file: its spec and its channels (deinterleaved). Float files are read as they are;
/// integer files are scaled to ±1.
pub fn read(path: &Path) -> (hound::WavSpec, Vec<Vec<f32>>) {
    let mut reader = hound::WavReader::open(path)
        .unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()));
    let spec = reader.spec();
    let interleaved: Vec<f32> = match spec.sample_format {
        hound::SampleFormat::Float => reader
            .samples::<f32>()
            .map(|s| s.expect("sample"))
            .collect(),
        hound::SampleFormat::Int => {
            let scale = 1.0 / (1u64 << (spec.bits_per_sample - 1)) as f32;
            reader
                .samples::<i32>()
                .map(|s| s.expect("sample") as f32 * scale)
                .collect()
        }
    };
    let num_channels = spec.channels as usize;
    let channels = (0..num_channels)
        .map(|c| {
            interleaved
                .iter()
                .skip(c)
                .step_by(num_channels)
                .copied()
                .collect()
        })
        .collect();
    (spec, channels)
}
