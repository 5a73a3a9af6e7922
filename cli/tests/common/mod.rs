//! Helpers the CLI test files share: running the binary, scratch folders, test signals, WAV
//! reading and writing, and the assertions every case makes. Each test file uses a part of them.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use stemflow_engine::runtime::{DeviceChoice, DeviceId};
use stemflow_engine::{
    EngineError, ExtraStems, OfflineStream, SeparatorChoice, StemFrames, StereoInput, NUM_STEMS,
};
use stemflow_kit::testing::XorShift64;

pub fn stemflow(args: &[&str], ort_lib: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_stemflow"));
    command.args(args);
    match ort_lib {
        Some(path) => command.env("STEMFLOW_ORT_LIB", path),
        None => command.env_remove("STEMFLOW_ORT_LIB"),
    };
    command.output().expect("stemflow runs")
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The real library, as `cargo xtask test` provides it.
pub fn real_runtime() -> String {
    std::env::var("STEMFLOW_ORT_LIB").expect(
        "STEMFLOW_ORT_LIB must point at ONNX Runtime: run the tests with `cargo xtask test`",
    )
}

/// A fresh, empty folder for one test: [`stemflow_kit::testing::scratch_dir`] of `cli-{name}`.
pub fn scratch_dir(name: &str) -> PathBuf {
    stemflow_kit::testing::scratch_dir(&format!("cli-{name}"))
}

/// Writes the CLI tests' standard input: 20,000 frames of two sines, stereo 32-bit float.
pub fn write_test_wav(path: &std::path::Path) {
    let sine = |step: f32, peak: f32| {
        (0..20_000)
            .map(|i| (i as f32 * step).sin() * peak)
            .collect()
    };
    write_wav(path, 44_100, &[sine(0.01, 0.3), sine(0.02, 0.2)], 32, true);
}

pub fn model() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../models/test/waveform_gain.onnx")
        .display()
        .to_string()
}

pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Runs `stemflow ARGS` with the built-in separator and no runtime.
pub fn run(args: &[&str]) -> Output {
    stemflow(args, None)
}

/// Runs `stemflow ARGS` (as [`run`]) and asserts that it is refused as a usage error (exit code
/// 2) that says `expected`.
pub fn assert_usage_error(args: &[&str], expected: &str) {
    let output = run(args);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(stderr.contains(expected), "{args:?}: {stderr}");
}

/// `separate INPUT -o OUT` and then `extra`: the arguments of a separation for [`run`] and
/// its kin.
pub fn separate_args<'a>(input: &'a Path, out: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["separate", path_str(input), "-o", path_str(out)];
    args.extend_from_slice(extra);
    args
}

pub fn path_str(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// A test signal with tones and a noise-like component, deterministic.
pub fn music(num_frames: usize, sample_rate_hz: u32, channel: usize) -> Vec<f32> {
    let mut rng = XorShift64::new(0x2545_f491 + channel as u64);
    (0..num_frames)
        .map(|i| {
            let t = i as f32 / sample_rate_hz as f32;
            let noise = rng.next_bipolar() * 0.05;
            0.3 * (std::f32::consts::TAU * 220.0 * t).sin()
                + 0.2 * (std::f32::consts::TAU * (330.0 + 50.0 * channel as f32) * t).sin()
                + noise
        })
        .collect()
}

pub const STEM_NAMES: [&str; 4] = ["vocals", "drums", "bass", "other"];

/// The four stems of `name` in `out`, as read from WAV files.
pub fn read_stems(out: &Path, name: &str) -> Vec<(hound::WavSpec, Vec<Vec<f32>>)> {
    read_named_stems(out, name, &STEM_NAMES)
}

/// Reads the stem files `stems` of one input (the stems a model writes).
pub fn read_named_stems(
    out: &Path,
    name: &str,
    stems: &[&str],
) -> Vec<(hound::WavSpec, Vec<Vec<f32>>)> {
    stems
        .iter()
        .map(|stem| read_wav(&out.join(name).join(format!("{stem}.wav"))))
        .collect()
}

/// Asserts that the stems add up to `input`, sample by sample, within `tolerance`.
pub fn assert_stems_sum_to(
    stems: &[(hound::WavSpec, Vec<Vec<f32>>)],
    input: &[Vec<f32>],
    tolerance: f32,
) {
    for (c, channel) in input.iter().enumerate() {
        for (t, &x) in channel.iter().enumerate() {
            let sum: f32 = stems.iter().map(|(_, s)| s[c][t]).sum();
            assert!(
                (sum - x).abs() <= tolerance,
                "channel {c} frame {t}: stems sum to {sum}, input {x}"
            );
        }
    }
}

/// Asserts that `actual` stays within `max_abs_error` of `reference`, the output of
/// `reference_name`, over the first `frames` frames (`what` names them when not). Returns the
/// largest difference.
pub fn assert_within(
    reference: &[f32],
    actual: &[f32],
    frames: usize,
    max_abs_error: f32,
    what: &str,
    reference_name: &str,
) -> f32 {
    let mut worst = 0.0f32;
    for i in 0..frames {
        let error = (reference[i] - actual[i]).abs();
        assert!(
            error <= max_abs_error,
            "{what} frame {i}: {reference_name} {}, Stemflow {}",
            reference[i],
            actual[i]
        );
        worst = worst.max(error);
    }
    worst
}

pub fn assert_clean_failure(output: &Output, what: &str) -> String {
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{what}: {stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE"),
        "{what}: {stderr}"
    );
    stderr
}

pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                found.extend(walk(&path));
            }
            found.push(path);
        }
    }
    found
}

/// The generated test fixtures (`STEMFLOW_FIXTURES_DIR`), as every test crate finds them, and
/// the WAV files every test crate writes and reads.
#[allow(unused_imports)]
pub use stemflow_kit::testing::{fixtures_dir, read_wav, write_wav};

/// Streams `input` through `model` offline (the CLI's path) on the CPU, stems aligned to the
/// input.
pub fn separate(
    model: &Path,
    input: &[Vec<f32>; 2],
    extra_stems: ExtraStems,
) -> [[Vec<f32>; 2]; NUM_STEMS] {
    let separator = SeparatorChoice::Model(model.to_path_buf())
        .build(DeviceChoice::Device(DeviceId::CPU))
        .unwrap();
    separate_with(separator, input, extra_stems)
}

/// Streams `input` through `separator` as `stemflow separate --mode stream` does (the plugin's
/// offline render, [`OfflineStream`]), stems aligned to the input.
pub fn separate_with(
    separator: Box<dyn stemflow_engine::Separator>,
    input: &[Vec<f32>; 2],
    extra_stems: ExtraStems,
) -> [[Vec<f32>; 2]; NUM_STEMS] {
    let mut stream = OfflineStream::new(separator, 44_100).unwrap();
    stream.set_extra_stems(extra_stems);
    let mut out: [[Vec<f32>; 2]; NUM_STEMS] = Default::default();
    let mut collect = |frames: StemFrames<'_>| {
        frames.append_to(&mut out);
        Ok::<(), EngineError>(())
    };
    stream
        .push(StereoInput::planar(input).unwrap(), &mut collect)
        .unwrap();
    stream.finish(&mut collect).unwrap();
    out
}

/// `input` through `model` as `stemflow separate` runs a whole file (the reference's edges,
/// `--mode file`) on the CPU, with `other` (`--other`), stems aligned to the input.
pub fn separate_whole_file(
    model: &Path,
    input: &[Vec<f32>; 2],
    extra_stems: ExtraStems,
    other: stemflow_engine::whole_file::OtherStem,
) -> [[Vec<f32>; 2]; NUM_STEMS] {
    use stemflow_engine::whole_file::{WholeFileOptions, WholeFileSeparator};
    let options = WholeFileOptions {
        device: DeviceChoice::Device(DeviceId::CPU),
        other,
        extra_stems,
        ..WholeFileOptions::default()
    };
    WholeFileSeparator::load(
        &SeparatorChoice::Model(model.to_path_buf()).into(),
        &options,
    )
    .unwrap()
    .separate(input, 44_100, |_| {})
    .unwrap()
    .stems
}

/// One way of separating a file in the parity tests: `(what, Other, frames compared, stems)`.
pub type ParitySeparation = (
    &'static str,
    stemflow_engine::whole_file::OtherStem,
    usize,
    [[Vec<f32>; 2]; NUM_STEMS],
);

/// The three ways the parity tests separate `input` with `model`: a whole file with the
/// residual Other and with the model's own, compared over every frame, and the stream (the
/// plugin), compared over the first `stream_frames`.
pub fn parity_separations(
    model: &Path,
    input: &[Vec<f32>; 2],
    stream_frames: usize,
) -> Vec<ParitySeparation> {
    use stemflow_engine::whole_file::OtherStem;
    let frames = input[0].len();
    let whole = |other| separate_whole_file(model, input, ExtraStems::Separate, other);
    vec![
        (
            "whole file",
            OtherStem::Residual,
            frames,
            whole(OtherStem::Residual),
        ),
        (
            "whole file, the model's other",
            OtherStem::Model,
            frames,
            whole(OtherStem::Model),
        ),
        (
            "stream",
            OtherStem::Residual,
            stream_frames,
            separate(model, input, ExtraStems::Separate),
        ),
    ]
}
