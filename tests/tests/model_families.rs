//! The hosted plugin running each model family's test graph in an offline render, compared with
//! the numpy reference fixtures (see `engine/tests/families.rs`; `cargo xtask test` writes them
//! and sets `STEMFLOW_FIXTURES_DIR`). The model is chosen through the plugin's saved state, as a
//! DAW project would restore it.

use std::path::Path;

use stemflow_host_tests::state::{decode_state, encode_state};
use stemflow_host_tests::{BlockSizes, RenderMode, RenderSettings, Rendered, TestPlugin};
use stemflow_kit::testing::{fixtures_dir, read_stereo_f32, scratch_dir, write_vocals_route};

const MAX_ABS_ERROR: f32 = 1e-5;
/// The stem outputs in port order (ports 1..=6).
const STEM_NAMES: [&str; 6] = ["vocals", "drums", "bass", "other", "guitar", "piano"];

/// A plugin whose saved state selects `model` on the CPU, with guitar and piano on their own
/// outputs or (the default) into Other.
fn plugin_with_model(model: &Path, guitar_piano_own_outputs: bool) -> TestPlugin {
    plugin_with_model_at(model, guitar_piano_own_outputs, None)
}

/// [`plugin_with_model`] with the Look-ahead parameter set to `look_ahead` (its id: `full`,
/// `1s`, `250ms`, …), as a saved project would restore it.
fn plugin_with_model_at(
    model: &Path,
    guitar_piano_own_outputs: bool,
    look_ahead: Option<&str>,
) -> TestPlugin {
    let mut plugin = TestPlugin::load();
    let mut state = decode_state(&plugin.save_state()).expect("the plugin's own state decodes");
    if let Some(look_ahead) = look_ahead {
        state["params"]["lookahead"] = serde_json::json!({ "string": look_ahead });
    }
    if guitar_piano_own_outputs {
        state["params"]["guitar_piano"] = serde_json::json!({"string": "own-outputs"});
    }
    let mut stemflow: serde_json::Value =
        serde_json::from_str(state["fields"]["stemflow-state"].as_str().unwrap()).unwrap();
    stemflow["separator"] = format!("file:{}", model.display()).into();
    stemflow["device"] = "cpu".into();
    state["fields"]["stemflow-state"] = stemflow.to_string().into();
    plugin
        .load_state(&encode_state(&state))
        .expect("the state loads");
    plugin
}

/// Renders `input` offline in blocks of `block`, followed by enough silence (11 s) to flush a
/// model's latency; returns the padded input with the render.
fn render_flushed(
    plugin: &mut TestPlugin,
    input: &[Vec<f32>],
    block: usize,
) -> (Vec<Vec<f32>>, Rendered) {
    let mut padded = input.to_vec();
    for channel in &mut padded {
        channel.resize(input[0].len() + 11 * 44_100, 0.0);
    }
    let rendered = plugin.render(
        &padded,
        &RenderSettings {
            block_sizes: BlockSizes::Fixed(block),
            mode: RenderMode::Offline,
            ..RenderSettings::default()
        },
    );
    (padded, rendered)
}

#[test]
fn offline_renders_of_every_family_match_the_numpy_reference() {
    let dir = fixtures_dir();
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("fixtures.json")).unwrap()).unwrap();
    let mut six_stem_cases = 0;
    for case in index["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let frames = case["frames"].as_u64().unwrap() as usize;
        let valid = case["valid_frames"].as_u64().unwrap() as usize;
        let input = read_stereo_f32(&dir.join(case["input"].as_str().unwrap()), frames);
        let model = dir.join(case["model"].as_str().unwrap());
        // Stems a model lacks (guitar and piano of four-stem models) are silent.
        let expected: Vec<Vec<Vec<f32>>> = STEM_NAMES
            .iter()
            .map(|stem| match case["stems"][stem].as_str() {
                Some(file) => read_stereo_f32(&dir.join(file), frames).to_vec(),
                None => vec![vec![0.0; frames]; 2],
            })
            .collect();
        // The default, guitar and piano into Other: Other + guitar + piano, and silence.
        let mut folded = expected.clone();
        for channel in 0..2 {
            for t in 0..frames {
                folded[3][channel][t] += expected[4][channel][t] + expected[5][channel][t];
            }
            folded[4][channel].fill(0.0);
            folded[5][channel].fill(0.0);
        }
        let has_extras = case["stems"]["guitar"].is_string();
        six_stem_cases += usize::from(has_extras);
        let runs = [(64, true), (4096, true)]
            .into_iter()
            .chain(has_extras.then_some((4096, false)));
        for (block, own_outputs) in runs {
            let expected = if own_outputs { &expected } else { &folded };
            let mut plugin = plugin_with_model(&model, own_outputs);
            let (padded, rendered) = render_flushed(&mut plugin, &input, block);
            let latency = rendered.latency_samples;
            assert!(
                latency > 44_100 / 2,
                "{name}: a neural model reports its look-ahead, got {latency} samples"
            );
            assert!(
                frames + latency <= padded[0].len(),
                "{name}: latency {latency} beyond the flush"
            );
            for (port, stem) in STEM_NAMES.iter().enumerate() {
                let expected = &expected[port];
                for channel in 0..2 {
                    let got = &rendered.port(port + 1)[channel][latency..latency + valid];
                    let (worst, at) = got
                        .iter()
                        .zip(&expected[channel][..valid])
                        .enumerate()
                        .map(|(i, (g, e))| ((g - e).abs(), i))
                        .fold((0.0f32, 0), |m, x| if x.0 > m.0 { x } else { m });
                    println!("{name} {stem} ch{channel} block {block} own outputs {own_outputs}: max abs error {worst:.2e}");
                    assert!(
                        worst <= MAX_ABS_ERROR,
                        "{name} {stem} ch{channel} block {block} own outputs {own_outputs}: error {worst} at {at}"
                    );
                }
            }
        }
    }
    assert!(
        six_stem_cases > 0,
        "no six-stem fixture: guitar and piano went untested"
    );
}

#[test]
fn a_model_that_fails_to_load_leaves_the_builtin_separator_playing() {
    let dir = scratch_dir("hosted-bad");
    let bad = dir.join("broken.onnx");
    std::fs::write(&bad, b"\x08\x07 definitely not a model").unwrap();
    let mut plugin = plugin_with_model(&bad, false);
    let input: Vec<Vec<f32>> = (0..2)
        .map(|c| {
            (0..44_100)
                .map(|i| ((i * (c + 3)) as f32 * 0.01).sin() * 0.3)
                .collect()
        })
        .collect();
    let rendered = plugin.render(&input, &RenderSettings::default());
    // The built-in separator's latency, and stems that still sum to the delayed input.
    let latency = rendered.latency_samples;
    assert!(latency < 44_100, "built-in latency expected, got {latency}");
    for t in latency..input[0].len() {
        let sum: f32 = (1..=4).map(|p| rendered.port(p)[0][t]).sum();
        assert!((sum - input[0][t - latency]).abs() < 1e-5, "frame {t}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_hybrid_route_renders_the_same_at_every_block_size_and_sums_to_the_input() {
    let spleeter = fixtures_dir().join("spleeter_test.onnx");
    let dir = scratch_dir("hosted-hybrid");
    let route = write_vocals_route(&dir, &spleeter);
    let input: Vec<Vec<f32>> = (0..2)
        .map(|c| {
            (0..4 * 44_100)
                .map(|i| {
                    let t = i as f32 / 44_100.0;
                    0.3 * (t * 220.0 * (c + 1) as f32 * std::f32::consts::TAU).sin()
                        + 0.1 * ((i * 7919 % 1013) as f32 / 1013.0 - 0.5)
                })
                .collect()
        })
        .collect();
    let renders: Vec<_> = [64, 4096]
        .into_iter()
        .map(|block| {
            plugin_with_model(&route, false).render(
                &input,
                &RenderSettings {
                    block_sizes: BlockSizes::Fixed(block),
                    mode: RenderMode::Offline,
                    ..RenderSettings::default()
                },
            )
        })
        .collect();
    let latency = renders[0].latency_samples;
    assert_eq!(latency, renders[1].latency_samples);
    for port in 0..renders[0].outputs.len() {
        for channel in 0..2 {
            assert!(
                renders[0].port(port)[channel] == renders[1].port(port)[channel],
                "port {port} ch {channel} differs between blocks of 64 and 4096"
            );
        }
    }
    for channel in 0..2 {
        for t in latency..input[0].len() {
            let sum: f32 = (1..=STEM_NAMES.len())
                .map(|p| renders[0].port(p)[channel][t])
                .sum();
            assert!(
                (sum - input[channel][t - latency]).abs() < 1e-5,
                "ch {channel} frame {t}: {sum}"
            );
        }
    }
    let drums: f32 = renders[0].port(2)[0].iter().map(|x| x * x).sum();
    assert!(drums > 0.0, "the built-in stage gave no drums");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The Look-ahead parameter: each setting's reported latency is where an impulse comes out, the
/// latency falls with the setting, an offline render is bit-identical at any block size, the
/// stems still sum to the input, and `full` is the default's output exactly.
#[test]
fn look_ahead_settings_report_their_latency_and_render_the_same_at_any_block_size() {
    let model = fixtures_dir().join("htdemucs_test.onnx");
    const IMPULSE_AT: usize = 30_000;
    let song_frames = 3 * 44_100;
    // A click on top of a deterministic noise-like signal.
    let mut input: Vec<Vec<f32>> = (0..2)
        .map(|c| {
            (0..song_frames)
                .map(|i| (((i * 7919 + c * 104_729) % 2003) as f32 / 2003.0 - 0.5) * 0.05)
                .collect()
        })
        .collect();
    for channel in &mut input {
        channel[IMPULSE_AT] = 0.9;
    }
    let render = |look_ahead: Option<&str>, block: usize| {
        let mut plugin = plugin_with_model_at(&model, false, look_ahead);
        render_flushed(&mut plugin, &input, block)
    };
    let (_, default) = render(None, 512);
    let mut latencies = Vec::new();
    for setting in ["full", "1s", "250ms"] {
        let (padded, rendered) = render(Some(setting), 512);
        let latency = rendered.latency_samples;
        // The main output is the stems' sum: the input, delayed by the reported latency.
        for channel in 0..2 {
            let main = &rendered.main()[channel];
            let peak = (0..main.len())
                .max_by(|&a, &b| main[a].abs().total_cmp(&main[b].abs()))
                .unwrap();
            assert_eq!(
                peak,
                IMPULSE_AT + latency,
                "{setting}: impulse vs latency {latency}"
            );
            for t in 0..song_frames {
                assert!(
                    (main[t + latency] - padded[channel][t]).abs() < 1e-5,
                    "{setting}: the stems do not sum to the input at {t}"
                );
            }
        }
        if setting == "full" {
            assert_eq!(latency, default.latency_samples, "full is the default");
            for port in 0..7 {
                assert_eq!(
                    rendered.port(port),
                    default.port(port),
                    "full vs default, port {port}"
                );
            }
        } else {
            let (_, small_blocks) = render(Some(setting), 64);
            let (_, large_blocks) = render(Some(setting), 4096);
            for port in 0..7 {
                assert_eq!(
                    rendered.port(port),
                    small_blocks.port(port),
                    "{setting}: 512 vs 64, port {port}"
                );
                assert_eq!(
                    rendered.port(port),
                    large_blocks.port(port),
                    "{setting}: 512 vs 4096, port {port}"
                );
            }
            // The stems are not silent: the model ran.
            assert!(
                rendered.port(1)[0].iter().any(|&x| x != 0.0),
                "{setting}: silent vocals"
            );
        }
        latencies.push(latency);
    }
    assert!(
        latencies.windows(2).all(|w| w[1] < w[0]),
        "shorter settings report less latency: {latencies:?}"
    );
    // 250 ms means at most 250 ms.
    assert!(latencies[2] <= 44_100 / 4, "{latencies:?}");
}

#[test]
fn a_roformer_converted_from_its_msst_checkpoint_renders_msst_s_stems() {
    // The tiny BS-RoFormer checkpoint and the output of MSST's `demix`, made once by
    // `models/roformer_reference.py`; converted here as `stemflow models import` converts it.
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../convert/tests/fixtures/roformer");
    let checkpoint = std::fs::read(fixtures.join("bs_tiny.ckpt")).unwrap();
    let yaml = std::fs::read_to_string(fixtures.join("bs_tiny.yaml")).unwrap();
    let converted = stemflow_convert::roformer::roformer_to_onnx(&checkpoint, &yaml).unwrap();
    let dir = scratch_dir("host-roformer");
    let model = dir.join("bs_tiny.onnx");
    std::fs::write(&model, &converted.onnx).unwrap();

    let (shape, input) = stemflow_kit::npy::read_npy(&fixtures.join("input.npy"));
    let frames = shape[1];
    let input = vec![input[..frames].to_vec(), input[frames..].to_vec()];
    let (_, reference) = stemflow_kit::npy::read_npy(&fixtures.join("bs_tiny_reference.npy"));
    let vocals = converted.stems.iter().position(|s| s == "vocals").unwrap();
    let valid = stemflow_kit::metrics::frames_before_end_chunks(frames, converted.chunk_frames, 2);
    assert!(valid > 0);
    for block in [64, 4096] {
        let mut plugin = plugin_with_model(&model, false);
        let (_, rendered) = render_flushed(&mut plugin, &input, block);
        let latency = rendered.latency_samples;
        for channel in 0..2 {
            let expected = &reference[(vocals * 2 + channel) * frames..][..frames];
            let residual: Vec<f32> = (0..frames)
                .map(|i| input[channel][i] - expected[i])
                .collect();
            // Port 1: vocals; port 4: Other, the rest of the mix.
            for (port, expected) in [(1, expected), (4, &residual[..])] {
                let got = &rendered.port(port)[channel][latency..latency + valid];
                let worst = got
                    .iter()
                    .zip(&expected[..valid])
                    .map(|(g, e)| (g - e).abs())
                    .fold(0.0f32, f32::max);
                println!(
                    "bs_tiny port {port} ch{channel} block {block}: max abs error {worst:.2e}"
                );
                assert!(
                    worst <= 1e-4,
                    "bs_tiny port {port} ch{channel} block {block}: error {worst}"
                );
            }
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
