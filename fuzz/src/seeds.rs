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
            files.push(("pcm-stereo.wav".into(), tiny_wav()));
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

/// A 16-bit stereo WAV of 64 frames at 44.1 kHz (a ramp).
fn tiny_wav() -> Vec<u8> {
    let samples: Vec<u8> = (0..128i16).flat_map(|i| (i * 200).to_le_bytes()).collect();
    let mut wav = b"RIFF".to_vec();
    wav.extend_from_slice(&(36 + samples.len() as u32).to_le_bytes());
    wav.extend_from_slice(b"WAVEfmt ");
    wav.extend_from_slice(&16u32.to_le_bytes());
    wav.extend_from_slice(&1u16.to_le_bytes()); // PCM
    wav.extend_from_slice(&2u16.to_le_bytes()); // channels
    wav.extend_from_slice(&44_100u32.to_le_bytes());
    wav.extend_from_slice(&(44_100u32 * 4).to_le_bytes());
    wav.extend_from_slice(&4u16.to_le_bytes()); // block align
    wav.extend_from_slice(&16u16.to_le_bytes()); // bits
    wav.extend_from_slice(b"data");
    wav.extend_from_slice(&(samples.len() as u32).to_le_bytes());
    wav.extend_from_slice(&samples);
    wav
}
