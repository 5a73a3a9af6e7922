//! [`seeds`]: where fuzzing each target starts: the repository's fixtures of that kind, files
//! the crate's test writers make (checkpoints, pickles, zips, crafted checkpoints), and small
//! hand-written examples.

use stemflow_convert::testing::{
    write_numpy_dict, write_torch_state_dict, write_torch_zip, write_zip, TorchTensorSpec,
    ZipMethod,
};

use crate::{read_folder, workspace_root, Target};

/// The seed inputs of `target`, as `(name, bytes)`.
pub fn seeds(target: Target) -> Vec<(String, Vec<u8>)> {
    let root = workspace_root();
    let fixtures = |folder: &str, extensions: &[&str]| -> Vec<(String, Vec<u8>)> {
        read_folder(&root.join(folder))
            .into_iter()
            .filter(|(name, _)| extensions.iter().any(|e| name.ends_with(e)))
            .collect()
    };
    let mut seeds = match target {
        Target::Torch => {
            let mut seeds = fixtures("convert/tests/fixtures/torch", &[".th", ".pt"]);
            seeds.push(("state-dict".into(), state_dict_checkpoint()));
            seeds
        }
        Target::NumpyDict => vec![(
            "two-arrays".into(),
            write_numpy_dict(&[("a", &[2, 2], &[1.0, 2.0, 3.0, 4.0]), ("b", &[1], &[5.0])]),
        )],
        Target::Zip => {
            let mut seeds = fixtures("convert/tests/fixtures/torch", &["_zip.th", "_zip.pt"]);
            seeds.push((
                "stored-and-deflated".into(),
                write_zip(&[
                    ("a/stored.txt", b"hello hello hello", ZipMethod::Stored),
                    ("a/deflated.txt", b"hello hello hello", ZipMethod::Deflated),
                ]),
            ));
            seeds
        }
        Target::Onnx => fixtures("models/test", &[".onnx"]),
        Target::MsstYaml => fixtures("convert/tests/fixtures/roformer", &[".yaml"]),
        Target::Audio => {
            let mut files = fixtures("cli/tests/fixtures", &[""]);
            files.extend(wav_seeds());
            files
                .into_iter()
                .filter_map(|(name, bytes)| {
                    let selector = audio_selector(&name)?;
                    Some((name, [&[selector][..], &bytes].concat()))
                })
                .collect()
        }
        Target::Manifest => vec![(
            "jobs".into(),
            b"{\"input\": \"songs/a.flac\", \"output\": \"a\"}\n\n{\"input\": \"/abs/b.wav\"}\n\
              {\"input\": 5}\nnot json\n{\"input\": \"c.mp3\", \"output\": \"../x\"}\n"
                .to_vec(),
        )],
        Target::PluginState => vec![
            (
                "current".into(),
                br#"{"version": 1, "separator": "file:/m/x.onnx", "device": "cpu", "model_sha256": "ab"}"#
                    .to_vec(),
            ),
            (
                "newer".into(),
                br#"{"version": 7, "separator": "hybrid:x+y", "device": "npu:0"}"#.to_vec(),
            ),
            (
                "builtin".into(),
                br#"{"version": 1, "separator": "builtin", "device": "auto"}"#.to_vec(),
            ),
        ],
    };
    seeds.sort();
    seeds
}

/// The first byte that makes the audio target use `name`'s container, if it is audio.
fn audio_selector(name: &str) -> Option<u8> {
    let extension = name.rsplit('.').next()?;
    let index = ["wav", "aiff", "flac", "mp3", "ogg", "m4a"]
        .iter()
        .position(|e| *e == extension)?;
    u8::try_from(index).ok()
}

/// A small state dict in torch's zip layout: a matrix and a view of it.
fn state_dict_checkpoint() -> Vec<u8> {
    let spec = |name, shape, stride| TorchTensorSpec {
        name,
        storage_class: "FloatStorage",
        storage_key: "0",
        storage_len: 6,
        offset: 0,
        shape,
        stride,
    };
    let pickle =
        write_torch_state_dict(&[spec("w", &[2, 3], &[3, 1]), spec("t", &[3, 2], &[1, 3])]);
    let data: Vec<u8> = (0..6u8).flat_map(|i| f32::from(i).to_le_bytes()).collect();
    write_torch_zip(
        "archive",
        &[
            ("data.pkl", &pickle),
            ("data/0", &data),
            ("version", b"3\n"),
        ],
    )
}

/// Small WAV files of every layout the decoders read, so that libFuzzer starts from each
/// header field (the sample rate, the channel count, the sizes, the chunks around the data):
/// integer, float and extensible formats, a LIST chunk, and the sizes a writer to a pipe
/// leaves open.
fn wav_seeds() -> Vec<(String, Vec<u8>)> {
    let pcm = |channels: u16, rate: u32, bits: u16| WavSeed {
        format_tag: 1,
        channels,
        sample_rate_hz: rate,
        bits,
        ..WavSeed::default()
    };
    vec![
        ("pcm-stereo.wav".into(), WavSeed::default().bytes()),
        ("pcm-mono-8bit-8k.wav".into(), pcm(1, 8_000, 8).bytes()),
        (
            "pcm-stereo-24bit-48k.wav".into(),
            pcm(2, 48_000, 24).bytes(),
        ),
        (
            "float-stereo.wav".into(),
            WavSeed {
                format_tag: 3,
                bits: 32,
                ..WavSeed::default()
            }
            .bytes(),
        ),
        (
            "extensible-stereo-24bit.wav".into(),
            WavSeed {
                format_tag: 0xfffe,
                bits: 24,
                ..WavSeed::default()
            }
            .bytes(),
        ),
        (
            "list-info.wav".into(),
            WavSeed {
                // An odd-sized INFO entry: chunks are padded to even lengths.
                chunk_before_data: [
                    &b"LIST"[..],
                    &16u32.to_le_bytes(),
                    b"INFOINAM",
                    &3u32.to_le_bytes(),
                    b"ab\0\0",
                ]
                .concat(),
                ..WavSeed::default()
            }
            .bytes(),
        ),
        (
            "unknown-size-ffmpeg-pipe.wav".into(),
            WavSeed {
                riff_size: Some(u32::MAX),
                data_size: Some(u32::MAX),
                ..WavSeed::default()
            }
            .bytes(),
        ),
        (
            "unknown-size-data-0.wav".into(),
            WavSeed {
                data_size: Some(0),
                ..WavSeed::default()
            }
            .bytes(),
        ),
    ]
}

/// A WAV file's header fields and 64 frames of a ramp.
struct WavSeed {
    /// 1 PCM, 3 IEEE float, 0xFFFE WAVE_FORMAT_EXTENSIBLE (with a PCM or float subformat).
    format_tag: u16,
    channels: u16,
    sample_rate_hz: u32,
    bits: u16,
    /// A whole chunk written between `fmt ` and `data`.
    chunk_before_data: Vec<u8>,
    /// The RIFF and data sizes, when not the real ones.
    riff_size: Option<u32>,
    data_size: Option<u32>,
}

impl Default for WavSeed {
    /// 16-bit stereo PCM at 44.1 kHz.
    fn default() -> Self {
        Self {
            format_tag: 1,
            channels: 2,
            sample_rate_hz: 44_100,
            bits: 16,
            chunk_before_data: Vec::new(),
            riff_size: None,
            data_size: None,
        }
    }
}

impl WavSeed {
    fn bytes(&self) -> Vec<u8> {
        let frame_bytes = self.channels * (self.bits / 8);
        let samples: Vec<u8> = (0..64 * u32::from(frame_bytes))
            .map(|i| (i * 7) as u8)
            .collect();
        let mut fmt = Vec::new();
        fmt.extend_from_slice(&self.format_tag.to_le_bytes());
        fmt.extend_from_slice(&self.channels.to_le_bytes());
        fmt.extend_from_slice(&self.sample_rate_hz.to_le_bytes());
        fmt.extend_from_slice(&(self.sample_rate_hz * u32::from(frame_bytes)).to_le_bytes());
        fmt.extend_from_slice(&frame_bytes.to_le_bytes());
        fmt.extend_from_slice(&self.bits.to_le_bytes());
        if self.format_tag == 0xfffe {
            // cbSize, valid bits, channel mask (front left and right), subformat GUID (PCM).
            fmt.extend_from_slice(&22u16.to_le_bytes());
            fmt.extend_from_slice(&self.bits.to_le_bytes());
            fmt.extend_from_slice(&3u32.to_le_bytes());
            fmt.extend_from_slice(&[
                1, 0, 0, 0, 0, 0, 0x10, 0, 0x80, 0, 0, 0xaa, 0, 0x38, 0x9b, 0x71,
            ]);
        }
        let mut body = b"WAVEfmt ".to_vec();
        body.extend_from_slice(&(fmt.len() as u32).to_le_bytes());
        body.extend_from_slice(&fmt);
        body.extend_from_slice(&self.chunk_before_data);
        body.extend_from_slice(b"data");
        body.extend_from_slice(&self.data_size.unwrap_or(samples.len() as u32).to_le_bytes());
        body.extend_from_slice(&samples);
        let mut wav = b"RIFF".to_vec();
        wav.extend_from_slice(&self.riff_size.unwrap_or(body.len() as u32).to_le_bytes());
        wav.extend_from_slice(&body);
        wav
    }
}
