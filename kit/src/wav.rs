//! Reading and writing WAV files as planar stereo `f32`.

use std::path::Path;

/// A WAV file that could not be read or written; the message names the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WavError(pub String);

impl std::fmt::Display for WavError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WavError {}

/// A decoded audio file: always two channels (mono is duplicated).
pub struct StereoAudio {
    /// Sample rate in hertz.
    pub sample_rate_hz: u32,
    /// `[left, right]`, equal lengths.
    pub channels: [Vec<f32>; 2],
    /// How many channels the file had.
    pub source_channels: u16,
}

/// Reads a mono or stereo WAV file (8/16/24/32-bit integer or 32-bit float). Not realtime-safe.
pub fn read_wav(path: &Path) -> Result<StereoAudio, WavError> {
    let io_error = |e: hound::Error| WavError(format!("{}: {e}", path.display()));
    let mut reader = hound::WavReader::open(path).map_err(io_error)?;
    let spec = reader.spec();
    if spec.channels == 0 || spec.channels > 2 {
        return Err(WavError(format!(
            "{}: {} channels; Stemflow separates mono or stereo files",
            path.display(),
            spec.channels
        )));
    }
    let interleaved: Vec<f32> = match spec.sample_format {
        hound::SampleFormat::Float => reader
            .samples::<f32>()
            .collect::<Result<_, _>>()
            .map_err(io_error)?,
        hound::SampleFormat::Int => {
            let scale = 1.0 / (1u64 << (spec.bits_per_sample - 1)) as f32;
            reader
                .samples::<i32>()
                .map(|s| s.map(|s| s as f32 * scale))
                .collect::<Result<_, _>>()
                .map_err(io_error)?
        }
    };
    let channels = if spec.channels == 1 {
        [interleaved.clone(), interleaved]
    } else {
        [
            interleaved.iter().step_by(2).copied().collect(),
            interleaved.iter().skip(1).step_by(2).copied().collect(),
        ]
    };
    Ok(StereoAudio {
        sample_rate_hz: spec.sample_rate,
        channels,
        source_channels: spec.channels,
    })
}

/// Writes a stereo 32-bit float WAV file. Not realtime-safe.
pub fn write_wav(
    path: &Path,
    sample_rate_hz: u32,
    channels: &[Vec<f32>; 2],
) -> Result<(), WavError> {
    let io_error = |e: hound::Error| WavError(format!("{}: {e}", path.display()));
    let spec = hound::WavSpec {
        channels: 2,
        sample_rate: sample_rate_hz,
        bits_per_sample: 32,
        sample_format: hound::SampleFormat::Float,
    };
    let mut writer = hound::WavWriter::create(path, spec).map_err(io_error)?;
    for (&l, &r) in channels[0].iter().zip(&channels[1]) {
        writer.write_sample(l).map_err(io_error)?;
        writer.write_sample(r).map_err(io_error)?;
    }
    writer.finalize().map_err(io_error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::scratch_dir;

    #[test]
    fn float_round_trip_is_exact_and_mono_is_duplicated() {
        let dir = scratch_dir("wav");
        let path = dir.join("stereo.wav");
        let channels = [vec![0.1, -0.2, 0.3], vec![1e-7, 0.5, -1.0]];
        write_wav(&path, 48_000, &channels).unwrap();
        let read = read_wav(&path).unwrap();
        assert_eq!(read.sample_rate_hz, 48_000);
        assert_eq!(read.channels, channels);

        let mono_path = dir.join("mono.wav");
        let spec = hound::WavSpec {
            channels: 1,
            sample_rate: 22_050,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let mut writer = hound::WavWriter::create(&mono_path, spec).unwrap();
        for s in [0i16, 16384, -32768] {
            writer.write_sample(s).unwrap();
        }
        writer.finalize().unwrap();
        let read = read_wav(&mono_path).unwrap();
        assert_eq!(read.channels[0], vec![0.0, 0.5, -1.0]);
        assert_eq!(read.channels[0], read.channels[1]);
        assert_eq!(read.source_channels, 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn garbage_file_is_a_clear_error() {
        let path =
            std::env::temp_dir().join(format!("stemflow-garbage-{}.wav", std::process::id()));
        std::fs::write(&path, b"definitely not a wav file").unwrap();
        let error = read_wav(&path).err().expect("garbage must not decode");
        assert!(error.to_string().contains("stemflow-garbage"), "{error}");
        std::fs::remove_file(&path).unwrap();
    }
}
