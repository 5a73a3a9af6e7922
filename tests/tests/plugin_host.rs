//! Whole-plugin tests: the built `Stemflow.clap` (debug, `assert_process_allocs`) hosted
//! in-process through its CLAP interface. Build it first with `cargo xtask test`.
//!
//! The plugin is a debug build and the machines are small, so each test renders only a second or
//! two of audio. Tests take a shared lock while rendering; the realtime test takes it exclusively
//! so that nothing else competes for the CPU while it checks for underruns.

use std::path::PathBuf;
use std::process::Command;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use stemflow_host_tests::checks::{
    assert_all_finite, assert_reconstructs, assert_same_render, stem_sum, RECONSTRUCTION_TOLERANCE,
    ROUNDING_TOLERANCE,
};
use stemflow_host_tests::compare::{
    argmax_abs, assert_bit_identical, assert_close, assert_ports_bit_identical, assert_silent,
    delayed, is_subnormal, scaled, sum,
};
use stemflow_host_tests::signal::{self, impulse, pad_end};
use stemflow_host_tests::state::{decode_state, encode_state};
use stemflow_host_tests::{
    cli_path, render, run_ok, BlockSizes, RenderMode, RenderSettings, Rendered, TestPlugin,
    ALL_STEMS, OUTPUT_PORT_NAMES, PLUGIN_ID, STEMS,
};
use stemflow_kit::demo_song::DemoSong;
use stemflow_kit::testing::{read_wav, write_wav};

const SAMPLE_RATE_HZ: u32 = 44_100;
/// What counts as silence for a muted or bypassed output: −180 dBFS.
const SILENCE: f32 = 1e-9;
/// Time for gain (20 ms) and switch (10 ms) ramps to finish, with margin.
const SETTLE_MS: f64 = 60.0;
/// Output port indices of the stems in the default configuration.
const VOCALS: usize = 1;
const DRUMS: usize = 2;
const BASS: usize = 3;
const OTHER: usize = 4;

static CPU: RwLock<()> = RwLock::new(());

/// Taken by every test that renders.
fn shared_cpu() -> RwLockReadGuard<'static, ()> {
    CPU.read().unwrap_or_else(|e| e.into_inner())
}

/// Taken by timing-sensitive tests: nothing else renders meanwhile.
fn exclusive_cpu() -> RwLockWriteGuard<'static, ()> {
    CPU.write().unwrap_or_else(|e| e.into_inner())
}

/// The test music: the engine's deterministic demo song (all four stems play from the first
/// beat), `seconds` long at [`SAMPLE_RATE_HZ`].
fn song(seconds: f32) -> Vec<Vec<f32>> {
    DemoSong::generate(SAMPLE_RATE_HZ, seconds).mix().to_vec()
}

fn offline(block_sizes: BlockSizes) -> RenderSettings {
    RenderSettings {
        block_sizes,
        mode: RenderMode::Offline,
        ..RenderSettings::default()
    }
}

fn settle_frames(rendered: &Rendered) -> usize {
    rendered.latency_samples + (SETTLE_MS * 1e-3 * rendered.sample_rate_hz) as usize
}

fn rms(x: &[f32]) -> f32 {
    (x.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / x.len().max(1) as f64).sqrt() as f32
}

// --- identity, ports, parameters ----------------------------------------------------------------

#[test]
fn bundle_exposes_stemflow() {
    let plugin = TestPlugin::load();
    let descriptors = plugin.descriptors();
    assert!(
        descriptors
            .iter()
            .any(|(id, name)| id == PLUGIN_ID && name == "Stemflow"),
        "descriptors: {descriptors:?}"
    );
}

#[test]
fn default_port_config_has_named_stereo_ports() {
    let mut plugin = TestPlugin::load();
    let layout = plugin.audio_ports();
    let inputs: Vec<(&str, u32, bool)> = layout
        .inputs
        .iter()
        .map(|p| (p.name.as_str(), p.channel_count, p.is_main))
        .collect();
    assert_eq!(inputs, vec![("Input", 2, true)], "input ports");
    let outputs: Vec<(&str, u32, bool)> = layout
        .outputs
        .iter()
        .map(|p| (p.name.as_str(), p.channel_count, p.is_main))
        .collect();
    let expected: Vec<(&str, u32, bool)> = OUTPUT_PORT_NAMES
        .iter()
        .enumerate()
        .map(|(i, name)| (*name, 2, i == 0))
        .collect();
    assert_eq!(outputs, expected, "output ports (name, channels, is_main)");
}

#[test]
fn alternative_port_configs_have_expected_channels() {
    let mut plugin = TestPlugin::load();
    let configs = plugin.port_configs();
    assert!(
        configs.len() >= 3,
        "expected ≥ 3 audio-ports-configs, got {configs:?}"
    );
    let summary: Vec<(u32, u32, Option<u32>, Option<u32>)> = configs[..3]
        .iter()
        .map(|c| {
            (
                c.input_port_count,
                c.output_port_count,
                c.main_input_channels,
                c.main_output_channels,
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (1, 7, Some(2), Some(2)),
            (1, 7, Some(1), Some(1)),
            (1, 1, Some(2), Some(10))
        ],
        "(inputs, outputs, main in channels, main out channels) of configs 0..3: {configs:?}"
    );

    plugin.select_port_config(configs[1].id);
    let mono = plugin.audio_ports();
    let inputs: Vec<(&str, u32)> = mono
        .inputs
        .iter()
        .map(|p| (p.name.as_str(), p.channel_count))
        .collect();
    assert_eq!(inputs, vec![("Input", 1)], "mono config inputs");
    let outputs: Vec<(&str, u32)> = mono
        .outputs
        .iter()
        .map(|p| (p.name.as_str(), p.channel_count))
        .collect();
    let expected: Vec<(&str, u32)> = OUTPUT_PORT_NAMES.iter().map(|n| (*n, 1)).collect();
    assert_eq!(outputs, expected, "mono config outputs");

    plugin.select_port_config(configs[2].id);
    let ten = plugin.audio_ports();
    let channels = |ports: &[stemflow_host_tests::PortInfo]| {
        ports.iter().map(|p| p.channel_count).collect::<Vec<_>>()
    };
    assert_eq!(channels(&ten.inputs), vec![2], "10-channel config inputs");
    assert_eq!(
        channels(&ten.outputs),
        vec![10],
        "10-channel config outputs"
    );
    assert!(ten.outputs[0].is_main);

    plugin.select_port_config(configs[0].id);
    assert_eq!(
        plugin.audio_ports().outputs.len(),
        7,
        "back to the default config"
    );
}

#[test]
fn alternative_port_configs_split_consistently() {
    let _cpu = shared_cpu();
    let input = song(0.5);

    // Mono: one channel in, mono main + 4 mono stems.
    let mono_input = vec![input[0].clone()];
    let mono = render(
        &mono_input,
        &RenderSettings {
            port_config: Some(1),
            ..offline(BlockSizes::Fixed(512))
        },
    );
    assert_all_finite("mono", &mono);
    assert_eq!(
        mono.outputs.iter().map(Vec::len).collect::<Vec<_>>(),
        vec![1; 7],
        "mono port channels"
    );
    assert_reconstructs("mono", &mono, &mono_input);

    // 10 channels on one port: mix L/R, then vocals, drums, bass, other (L/R each).
    let ten = render(
        &input,
        &RenderSettings {
            port_config: Some(2),
            ..offline(BlockSizes::Fixed(512))
        },
    );
    assert_all_finite("10-channel", &ten);
    assert_eq!(ten.outputs.len(), 1);
    let channels = &ten.outputs[0];
    assert_eq!(channels.len(), 10);
    let n = ten.num_frames();
    for c in 0..2 {
        let stems: Vec<&[f32]> = (1..5).map(|s| channels[2 * s + c].as_slice()).collect();
        let stems = sum(&stems);
        let expected = delayed(&input[c], ten.latency_samples, n);
        assert_close(
            &format!("10-channel Σ stems ch {c} vs delayed input"),
            &stems,
            &expected,
            0..n,
            RECONSTRUCTION_TOLERANCE,
        );
        assert_close(
            &format!("10-channel mix ch {c} vs Σ stems"),
            &channels[c],
            &stems,
            0..n,
            ROUNDING_TOLERANCE,
        );
    }

    // The stereo default gives the same stems as the 10-channel layout.
    let stereo = render(&input, &offline(BlockSizes::Fixed(512)));
    assert_eq!(
        stereo.latency_samples, ten.latency_samples,
        "latency differs between layouts"
    );
    for s in 1..5 {
        for c in 0..2 {
            assert_close(
                &format!("stem {s} ch {c}: 10-channel vs stereo ports"),
                &channels[2 * s + c],
                &stereo.port(s)[c],
                0..n,
                ROUNDING_TOLERANCE,
            );
        }
    }
}

#[test]
fn parameters_are_listed_under_their_string_ids() {
    let mut plugin = TestPlugin::load();
    for stem in ALL_STEMS {
        let gain = plugin.param(&format!("{stem}_gain")).clone();
        assert!(
            !gain
                .flags
                .contains(clack_extensions::params::ParamInfoFlags::IS_STEPPED),
            "{stem}_gain is stepped"
        );
        for switch in ["mute", "solo"] {
            let desc = plugin.param(&format!("{stem}_{switch}")).clone();
            assert!(
                desc.flags
                    .contains(clack_extensions::params::ParamInfoFlags::IS_STEPPED),
                "{stem}_{switch} not stepped"
            );
            assert_eq!(
                (desc.min_value, desc.max_value, desc.default_value),
                (0.0, 1.0, 0.0),
                "{stem}_{switch} range/default"
            );
        }
    }
    let bypass = plugin.param("bypass").clone();
    assert!(
        bypass
            .flags
            .contains(clack_extensions::params::ParamInfoFlags::IS_BYPASS),
        "bypass lacks CLAP_PARAM_IS_BYPASS"
    );
    assert_eq!(bypass.default_value, 0.0);
    // Guitar & Piano: a two-way switch, not automatable (it changes what the outputs mean).
    let guitar_piano = plugin.param("guitar_piano").clone();
    assert!(guitar_piano
        .flags
        .contains(clack_extensions::params::ParamInfoFlags::IS_STEPPED));
    assert!(
        !guitar_piano
            .flags
            .contains(clack_extensions::params::ParamInfoFlags::IS_AUTOMATABLE),
        "guitar_piano must not be automatable"
    );
    assert_eq!(
        (
            guitar_piano.min_value,
            guitar_piano.max_value,
            guitar_piano.default_value
        ),
        (0.0, 1.0, 0.0),
        "guitar_piano range/default (Into Other)"
    );
    assert_eq!(
        plugin.params().len(),
        6 * 3 + 3,
        "parameter count: {:?}",
        plugin.params()
    );

    // Gains: plain 1.0 is the default, 0 the bottom and +12 dB the top of the CLAP range.
    let saved = plugin.saved_params();
    assert_eq!(
        saved["vocals_gain"],
        serde_json::json!({"f32": 1.0}),
        "saved default gain"
    );
    let default_value = plugin.param("vocals_gain").default_value;
    let unity = plugin.clap_value_for_plain("vocals_gain", 1.0);
    assert!(
        (unity - default_value).abs() < 1e-6,
        "unity gain {unity} vs default {default_value}"
    );
    assert_eq!(plugin.clap_value_for_plain("vocals_gain", 0.0), 0.0);
    let top = plugin.clap_value_for_plain("vocals_gain", 10f64.powf(12.0 / 20.0));
    assert!((top - 1.0).abs() < 1e-6, "+12 dB maps to {top}");
}

// --- latency ------------------------------------------------------------------------------------

#[test]
fn impulse_peak_lands_at_reported_latency() {
    let _cpu = shared_cpu();
    const AMPLITUDE: f32 = 0.5;
    for sample_rate_hz in [22_050.0, 44_100.0, 48_000.0, 96_000.0, 192_000.0] {
        // Early (frame 1000) and late (100 ms): the separator's time-frequency masks smear an
        // impulse back by up to a window, so an early impulse leaves a pre-echo in the stems
        // before the latency (it cancels in the mix); a late one must leave nothing at all there.
        let late_frame = (0.1 * sample_rate_hz) as usize;
        for (impulse_frame, stems_silent_before_latency) in [(1000, false), (late_frame, true)] {
            for block in [64, 512] {
                let what =
                    format!("{sample_rate_hz} Hz, blocks of {block}, impulse at {impulse_frame}");
                let mut plugin = TestPlugin::load();
                plugin.set_render_mode(RenderMode::Offline);
                let latency = plugin.activate(sample_rate_hz, block, block);
                let num_frames = impulse_frame + latency + 4096;
                let input = impulse(2, num_frames, impulse_frame, AMPLITUDE);
                let outputs = plugin.process_buffer(&input, BlockSizes::Fixed(block), &[], None);
                assert_eq!(
                    plugin.latency_samples(),
                    latency,
                    "{what}: latency changed while processing"
                );
                plugin.deactivate();

                for c in 0..2 {
                    let main = &outputs[0][c];
                    let at = argmax_abs(main);
                    assert_eq!(
                        at,
                        impulse_frame + latency,
                        "{what}: main ch {c} peaks at {at} ({}), latency {latency}",
                        main[at]
                    );
                    assert!(
                        (main[at] - AMPLITUDE).abs() <= RECONSTRUCTION_TOLERANCE,
                        "{what}: peak {} vs {AMPLITUDE}",
                        main[at]
                    );
                    let expected = delayed(&input[c], latency, num_frames);
                    assert_close(
                        &format!("{what}: main ch {c} vs delayed impulse"),
                        main,
                        &expected,
                        0..num_frames,
                        RECONSTRUCTION_TOLERANCE,
                    );
                }
                // Nothing comes out before the latency: no fallback, stale or undelayed audio.
                let checked_ports = if stems_silent_before_latency {
                    outputs.len()
                } else {
                    1
                };
                for (p, port) in outputs.iter().enumerate().take(checked_ports) {
                    for (c, channel) in port.iter().enumerate() {
                        assert_silent(
                            &format!("{what}: port {p} ch {c} before the latency"),
                            channel,
                            0..latency,
                            SILENCE,
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn reactivation_at_another_rate_reports_the_new_latency() {
    let _cpu = shared_cpu();
    let mut fresh = TestPlugin::load();
    fresh.set_render_mode(RenderMode::Offline);
    let fresh_latency_96k = fresh.activate(96_000.0, 512, 512);
    fresh.deactivate();

    let mut plugin = TestPlugin::load();
    plugin.set_render_mode(RenderMode::Offline);
    let latency_44k = plugin.activate(44_100.0, 512, 512);
    plugin.deactivate();
    let notified_before = plugin.host_counter(|h| h.latency_changed_count.get());
    let latency_96k = plugin.activate(96_000.0, 512, 512);
    assert_eq!(
        latency_96k, fresh_latency_96k,
        "96 kHz latency after 44.1 kHz vs on a fresh instance"
    );
    if latency_96k != latency_44k {
        assert!(
            plugin.host_counter(|h| h.latency_changed_count.get()) > notified_before,
            "latency went from {latency_44k} to {latency_96k} without clap_host_latency::changed"
        );
    }
    let impulse_frame = 9600;
    let input = impulse(2, impulse_frame + latency_96k + 2048, impulse_frame, 0.5);
    let outputs = plugin.process_buffer(&input, BlockSizes::Fixed(512), &[], None);
    for (c, main) in outputs[0].iter().enumerate() {
        assert_eq!(
            argmax_abs(main),
            impulse_frame + latency_96k,
            "main ch {c} peak after reactivation"
        );
    }
}

#[test]
fn restarting_processing_starts_a_fresh_stream() {
    let _cpu = shared_cpu();
    let input = song(1.0);
    let mut plugin = TestPlugin::load();
    plugin.set_render_mode(RenderMode::Offline);
    plugin.activate(SAMPLE_RATE_HZ as f64, 512, 512);
    // Each process_buffer is start_processing … stop_processing; nice-plug resets the plugin in
    // start_processing, so the second pass must not hear the first one's tail.
    let first = plugin.process_buffer(&input, BlockSizes::Fixed(512), &[], None);
    let second = plugin.process_buffer(&input, BlockSizes::Fixed(512), &[], None);
    plugin.deactivate();
    assert_ports_bit_identical("second pass vs first", &second, &first);
}

// --- offline determinism ------------------------------------------------------------------------

#[test]
fn offline_render_is_bit_identical_across_block_sizes() {
    let _cpu = shared_cpu();
    let input = song(1.0);
    let render_with = |block_sizes| {
        render(
            &input,
            &RenderSettings {
                max_block_frames: Some(4096),
                ..offline(block_sizes)
            },
        )
    };
    let reference = render_with(BlockSizes::Fixed(64));
    assert_all_finite("blocks of 64", &reference);
    for block_sizes in [
        BlockSizes::Fixed(1),
        BlockSizes::Fixed(1000),
        BlockSizes::Fixed(4096),
        BlockSizes::Random { seed: 1, max: 4096 },
        BlockSizes::Random { seed: 2, max: 700 },
    ] {
        let other = render_with(block_sizes);
        assert_same_render(
            &format!("{block_sizes:?} vs blocks of 64"),
            &other,
            &reference,
        );
    }
}

// --- mixing semantics ----------------------------------------------------------------------------

#[test]
fn stems_sum_to_the_delayed_input() {
    let _cpu = shared_cpu();
    let input = song(2.0);
    let rendered = render(&input, &offline(BlockSizes::Fixed(512)));
    assert_all_finite("unity", &rendered);
    assert!(
        !rendered.restart_requested,
        "the plugin asked for a restart while processing"
    );
    assert_eq!(
        rendered.latency_after_samples, rendered.latency_samples,
        "latency changed while processing"
    );
    assert_reconstructs("unity gains", &rendered, &input);

    // The split is a split: at least two stems carry real signal (−60 dBFS RMS).
    let n = rendered.num_frames();
    let levels: Vec<f32> = (VOCALS..=OTHER)
        .map(|p| rms(&rendered.port(p)[0][rendered.latency_samples..n]))
        .collect();
    assert!(
        levels.iter().filter(|l| **l > 1e-3).count() >= 2,
        "stem RMS levels {levels:?}: nothing was separated"
    );
}

#[test]
fn vocals_gain_scales_only_the_vocals_stem() {
    let _cpu = shared_cpu();
    let input = song(1.5);
    let settings = offline(BlockSizes::Fixed(512));
    let unity = render(&input, &settings);

    let mut plugin = TestPlugin::load();
    plugin.set_param("vocals_gain", 0.5);
    let saved = plugin.saved_params()["vocals_gain"]["f32"]
        .as_f64()
        .expect("saved gain");
    assert!(
        (saved - 0.5).abs() < 1e-6,
        "vocals_gain reads back as {saved} after being set to 0.5"
    );
    let flushed = plugin.render(&input, &settings);

    let evented = render(
        &input,
        &RenderSettings {
            param_changes: vec![(0, "vocals_gain".into(), 0.5)],
            ..settings.clone()
        },
    );

    for (how, half) in [
        ("set before activation", &flushed),
        ("event at frame 0", &evented),
    ] {
        assert_all_finite(how, half);
        assert_eq!(half.latency_samples, unity.latency_samples);
        let n = half.num_frames();
        let from = settle_frames(half);
        for c in 0..2 {
            assert_close(
                &format!("{how}: vocals ch {c} vs 0.5 × unity vocals"),
                &half.port(VOCALS)[c],
                &scaled(&unity.port(VOCALS)[c], 0.5),
                from..n,
                ROUNDING_TOLERANCE,
            );
            for p in [DRUMS, BASS, OTHER] {
                assert_close(
                    &format!("{how}: port {p} ch {c} vs unity"),
                    &half.port(p)[c],
                    &unity.port(p)[c],
                    0..n,
                    ROUNDING_TOLERANCE,
                );
            }
            assert_close(
                &format!("{how}: main ch {c} vs Σ stems"),
                &half.main()[c],
                &stem_sum(half, c),
                0..n,
                ROUNDING_TOLERANCE,
            );
        }
    }
}

#[test]
fn muting_drums_removes_them_from_the_mix() {
    let _cpu = shared_cpu();
    let input = song(1.5);
    let muted = render(
        &input,
        &RenderSettings {
            param_changes: vec![(0, "drums_mute".into(), 1.0)],
            ..offline(BlockSizes::Fixed(512))
        },
    );
    assert_all_finite("drums muted", &muted);
    let n = muted.num_frames();
    let from = settle_frames(&muted);
    for c in 0..2 {
        assert_silent(
            &format!("muted drums ch {c}"),
            &muted.port(DRUMS)[c],
            from..n,
            SILENCE,
        );
        let rest = sum(&[
            &muted.port(VOCALS)[c],
            &muted.port(BASS)[c],
            &muted.port(OTHER)[c],
        ]);
        assert_close(
            &format!("main ch {c} vs vocals + bass + other"),
            &muted.main()[c],
            &rest,
            from..n,
            ROUNDING_TOLERANCE,
        );
        assert_close(
            &format!("main ch {c} vs Σ stems (whole render)"),
            &muted.main()[c],
            &stem_sum(&muted, c),
            0..n,
            ROUNDING_TOLERANCE,
        );
    }
    let vocals_level = rms(&muted.port(VOCALS)[0][from..n]) + rms(&muted.port(OTHER)[0][from..n]);
    assert!(
        vocals_level > 1e-3,
        "muting drums silenced the other stems too"
    );
}

#[test]
fn soloing_bass_leaves_only_bass() {
    let _cpu = shared_cpu();
    let input = song(1.5);
    let mut plugin = TestPlugin::load();
    let unity = plugin.render(&input, &offline(BlockSizes::Fixed(512)));
    plugin.set_param("bass_solo", 1.0);
    let solo = plugin.render(&input, &offline(BlockSizes::Fixed(512)));
    assert_all_finite("bass solo", &solo);
    let n = solo.num_frames();
    let from = settle_frames(&solo);
    for c in 0..2 {
        assert_close(
            &format!("main ch {c} vs bass"),
            &solo.main()[c],
            &solo.port(BASS)[c],
            from..n,
            ROUNDING_TOLERANCE,
        );
        assert_close(
            &format!("soloed bass ch {c} vs unity bass"),
            &solo.port(BASS)[c],
            &unity.port(BASS)[c],
            from..n,
            ROUNDING_TOLERANCE,
        );
        for p in [VOCALS, DRUMS, OTHER] {
            assert_silent(
                &format!("non-soloed port {p} ch {c}"),
                &solo.port(p)[c],
                from..n,
                SILENCE,
            );
        }
    }
    assert!(
        rms(&solo.port(BASS)[0][from..n]) > 1e-3,
        "the bass stem is silent: the test signal has no bass?"
    );
}

#[test]
fn bypass_passes_the_delayed_input_and_silences_stems() {
    let _cpu = shared_cpu();
    let input = song(1.5);
    // On a block boundary: whether events inside a block are sample-accurate is tested apart.
    let bypass_frame = 43 * 512;
    let unity = render(&input, &offline(BlockSizes::Fixed(512)));
    let bypassed = render(
        &input,
        &RenderSettings {
            param_changes: vec![(bypass_frame, "bypass".into(), 1.0)],
            ..offline(BlockSizes::Fixed(512))
        },
    );
    assert_all_finite("bypass", &bypassed);
    let n = bypassed.num_frames();
    let from = bypass_frame + settle_frames(&bypassed);
    for (c, input_channel) in input.iter().enumerate() {
        let expected = delayed(input_channel, bypassed.latency_samples, n);
        assert_close(
            &format!("bypassed main ch {c} vs delayed input"),
            &bypassed.main()[c],
            &expected,
            from..n,
            ROUNDING_TOLERANCE,
        );
        for p in VOCALS..=OTHER {
            assert_silent(
                &format!("bypassed port {p} ch {c}"),
                &bypassed.port(p)[c],
                from..n,
                SILENCE,
            );
            // Nothing changes before the bypass event.
            assert_close(
                &format!("port {p} ch {c} before the bypass event"),
                &bypassed.port(p)[c],
                &unity.port(p)[c],
                0..bypass_frame,
                ROUNDING_TOLERANCE,
            );
        }
        // The crossfade keeps the main output equal to the delayed input throughout (both sides
        // of the fade are that signal at unity gains).
        assert_close(
            &format!("main ch {c} across the bypass crossfade"),
            &bypassed.main()[c],
            &expected,
            0..n,
            RECONSTRUCTION_TOLERANCE,
        );
    }
}

#[test]
fn automation_is_sample_accurate_whatever_the_block_size() {
    let _cpu = shared_cpu();
    let input = song(1.0);
    // Inside a block for every schedule below (blocks of 512 start at 22016, of 64 at 22336), so
    // a plugin that applies events at block starts gets different output per schedule.
    let event_frame = 22_350;
    let automated = |block_sizes| {
        render(
            &input,
            &RenderSettings {
                param_changes: vec![
                    (event_frame, "vocals_gain".into(), 0.25),
                    (event_frame, "drums_mute".into(), 1.0),
                ],
                max_block_frames: Some(1024),
                ..offline(block_sizes)
            },
        )
    };
    let reference = automated(BlockSizes::Fixed(512));
    for block_sizes in [
        BlockSizes::Fixed(64),
        BlockSizes::Random { seed: 3, max: 1024 },
    ] {
        let other = automated(block_sizes);
        assert_ports_bit_identical(
            &format!("automation with {block_sizes:?} vs blocks of 512"),
            &other.outputs,
            &reference.outputs,
        );
    }
    // And nothing changes before the event.
    let unity = render(&input, &offline(BlockSizes::Fixed(512)));
    for p in VOCALS..=DRUMS {
        for c in 0..2 {
            assert_close(
                &format!("port {p} ch {c} before the event at frame {event_frame}"),
                &reference.port(p)[c],
                &unity.port(p)[c],
                0..event_frame,
                ROUNDING_TOLERANCE,
            );
        }
    }
}

// --- state --------------------------------------------------------------------------------------

const ALL_PARAMS: [&str; 13] = [
    "vocals_gain",
    "vocals_mute",
    "vocals_solo",
    "drums_gain",
    "drums_mute",
    "drums_solo",
    "bass_gain",
    "bass_mute",
    "bass_solo",
    "other_gain",
    "other_mute",
    "other_solo",
    "bypass",
];

#[test]
fn state_round_trips_into_a_new_instance() {
    let mut original = TestPlugin::load();
    let changes = [
        ("vocals_gain", 0.5),
        ("drums_mute", 1.0),
        ("bass_solo", 1.0),
        ("other_gain", 2.0),
        ("bypass", 1.0),
    ];
    for (id, plain) in changes {
        original.set_param(id, plain);
    }
    let bytes = original.save_state();
    let saved = decode_state(&bytes).expect("the saved state is nice-plug JSON");

    let mut restored = TestPlugin::load();
    let defaults: Vec<f64> = ALL_PARAMS
        .iter()
        .map(|id| restored.param_value(id))
        .collect();
    restored
        .load_state(&bytes)
        .expect("loading a state the plugin saved");
    for (i, id) in ALL_PARAMS.iter().enumerate() {
        let expected = original.param_value(id);
        let actual = restored.param_value(id);
        assert!(
            (actual - expected).abs() <= 1e-6,
            "{id}: restored {actual}, saved instance has {expected}"
        );
        if changes.iter().any(|(changed, _)| changed == id) {
            assert!(
                (actual - defaults[i]).abs() > 1e-3,
                "{id} still at its default {actual} after loading"
            );
        }
    }
    let resaved = decode_state(&restored.save_state()).expect("re-saved state");
    assert_eq!(
        resaved["fields"], saved["fields"],
        "persisted fields differ after a round trip"
    );
    let stemflow_state: serde_json::Value = serde_json::from_str(
        saved["fields"]["stemflow-state"]
            .as_str()
            .expect("stemflow-state is a JSON string"),
    )
    .expect("stemflow-state parses");
    assert_eq!(
        stemflow_state["version"], 1,
        "stemflow-state: {stemflow_state}"
    );
}

/// Every parameter at its default CLAP value.
#[track_caller]
fn assert_params_default(what: &str, plugin: &mut TestPlugin) {
    for id in ALL_PARAMS {
        let default_value = plugin.param(id).default_value;
        let value = plugin.param_value(id);
        assert!(
            (value - default_value).abs() <= 1e-6,
            "{what}: {id} = {value}, default {default_value}"
        );
    }
}

/// Renders half a second and checks that the plugin still separates and reconstructs.
#[track_caller]
fn assert_processes_normally(what: &str, plugin: &mut TestPlugin) {
    let input = song(0.5);
    let rendered = plugin.render(&input, &offline(BlockSizes::Fixed(512)));
    assert_all_finite(what, &rendered);
    assert_reconstructs(what, &rendered, &input);
}

#[test]
fn garbage_state_leaves_a_working_plugin() {
    let _cpu = shared_cpu();
    let mut rng = signal::XorShift64::new(99);
    let random: Vec<u8> = (0..2000).map(|_| rng.next_u64() as u8).collect();
    let mut huge_length = u64::MAX.to_le_bytes().to_vec();
    huge_length.extend_from_slice(b"{}");
    let mut short_length = 100u64.to_le_bytes().to_vec();
    short_length.extend_from_slice(b"{\"params\":");
    let garbage: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("random bytes", random),
        ("length u64::MAX", huge_length),
        ("truncated", short_length),
        (
            "framed non-JSON",
            encode_state_bytes(b"\xff\xfe not json at all"),
        ),
        ("JSON array", encode_state(&serde_json::json!([1, 2, 3]))),
        (
            "params of the wrong type",
            encode_state(&serde_json::json!({
                "version": "0.1.0",
                "params": {"vocals_gain": {"bool": true}, "bypass": {"f32": 0.5}},
                "fields": {}
            })),
        ),
    ];
    let mut plugin = TestPlugin::load();
    for (what, bytes) in &garbage {
        let result = plugin.load_state(bytes);
        eprintln!("loading {what}: {result:?}");
        assert_params_default(what, &mut plugin);
    }
    assert_processes_normally("after garbage states", &mut plugin);
}

fn encode_state_bytes(payload: &[u8]) -> Vec<u8> {
    let mut bytes = (payload.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(payload);
    bytes
}

#[test]
fn unknown_or_mistyped_stemflow_state_loads_with_defaults() {
    let _cpu = shared_cpu();
    let mut fresh = TestPlugin::load();
    let base = decode_state(&fresh.save_state()).expect("fresh state");
    let default_field: serde_json::Value = serde_json::from_str(
        base["fields"]["stemflow-state"]
            .as_str()
            .expect("stemflow-state string"),
    )
    .expect("json");
    assert_eq!(
        default_field,
        serde_json::json!({"version": 1, "separator": "builtin", "device": "auto"})
    );

    let variants = [
        (
            "version 999",
            serde_json::json!({"version": 999, "separator": "quantum", "device": "tpu:7"})
                .to_string(),
        ),
        (
            "wrong types",
            serde_json::json!({"version": "one", "separator": 42, "device": null}).to_string(),
        ),
        (
            "version 1, wrong types",
            serde_json::json!({"version": 1, "separator": ["builtin"], "device": 3}).to_string(),
        ),
        ("not JSON", "{{{".to_string()),
        ("JSON array", "[1,2,3]".to_string()),
    ];
    for (i, (what, field)) in variants.iter().enumerate() {
        let mut state = base.clone();
        state["fields"]["stemflow-state"] = serde_json::Value::String(field.clone());
        let mut plugin = TestPlugin::load();
        plugin
            .load_state(&encode_state(&state))
            .unwrap_or_else(|e| panic!("{what}: load failed: {e}"));
        assert_params_default(what, &mut plugin);
        let resaved = decode_state(&plugin.save_state()).expect("re-saved state");
        let field_json: serde_json::Value = serde_json::from_str(
            resaved["fields"]["stemflow-state"]
                .as_str()
                .expect("stemflow-state string"),
        )
        .expect("re-saved stemflow-state parses");
        if what == &"version 999" {
            // State from a newer Stemflow is kept and written back unchanged, so opening the
            // project in this older version loses nothing.
            let original: serde_json::Value = serde_json::from_str(field).unwrap();
            assert_eq!(field_json, original, "{what}: stemflow-state after loading");
        } else {
            assert_eq!(
                field_json, default_field,
                "{what}: stemflow-state after loading"
            );
        }
        if i == 0 {
            assert_processes_normally(what, &mut plugin);
        }
    }
}

// --- numerical robustness ------------------------------------------------------------------------

#[test]
fn non_finite_input_is_treated_as_silence() {
    let _cpu = shared_cpu();
    let clean = song(1.0);
    let mut poisoned = clean.clone();
    let mut cleaned = clean.clone();
    let mut rng = signal::XorShift64::new(5);
    for c in 0..2 {
        let n = clean[c].len();
        let mut poison = |t: usize, value: f32| {
            poisoned[c][t] = value;
            cleaned[c][t] = 0.0;
        };
        for _ in 0..200 {
            let t = rng.next_in(0, n - 1);
            let value = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY][rng.next_in(0, 2)];
            poison(t, value);
        }
        for t in 10_000 + 3000 * c..10_500 + 3000 * c {
            poison(t, f32::NAN);
        }
        for t in 20_000..20_100 {
            poison(
                t,
                if t % 2 == 0 {
                    f32::INFINITY
                } else {
                    f32::NEG_INFINITY
                },
            );
        }
    }
    let from_poisoned = render(&poisoned, &offline(BlockSizes::Fixed(512)));
    assert_all_finite("NaN/Inf input", &from_poisoned);
    let from_cleaned = render(&cleaned, &offline(BlockSizes::Fixed(512)));
    for (p, (a, b)) in from_poisoned
        .outputs
        .iter()
        .zip(&from_cleaned.outputs)
        .enumerate()
    {
        for c in 0..a.len() {
            assert_close(
                &format!("port {p} ch {c}: NaN/Inf input vs the same input with zeros"),
                &a[c],
                &b[c],
                0..a[c].len(),
                ROUNDING_TOLERANCE,
            );
        }
    }
}

#[test]
fn subnormal_input_gives_no_subnormal_output() {
    let _cpu = shared_cpu();
    let sr = SAMPLE_RATE_HZ as usize;
    let music = song(0.5);
    let mut input = vec![Vec::new(), Vec::new()];
    for (c, channel) in input.iter_mut().enumerate() {
        channel.extend(std::iter::repeat_n(1e-40f32, sr / 4));
        channel.extend((0..sr / 4).map(|t| if (t + c) % 2 == 0 { 1e-39f32 } else { -1e-39 }));
        // Music fading from −40 dBFS down past the smallest subnormal.
        let len = music[c].len();
        channel.extend(
            music[c]
                .iter()
                .enumerate()
                .map(|(t, x)| x * 1e-2 * (-(t as f32) / len as f32 * 100.0).exp()),
        );
        channel.extend(std::iter::repeat_n(0.0, sr / 4));
    }
    let rendered = render(&input, &offline(BlockSizes::Fixed(512)));
    assert_all_finite("subnormal input", &rendered);
    for (p, port) in rendered.outputs.iter().enumerate() {
        for (c, channel) in port.iter().enumerate() {
            if let Some(t) = channel.iter().position(|x| is_subnormal(*x)) {
                let count = channel.iter().filter(|x| is_subnormal(**x)).count();
                panic!(
                    "port {p} ch {c}: {count} subnormal samples, first at frame {t}: {:e}",
                    channel[t]
                );
            }
        }
    }
}

// --- realtime mode ------------------------------------------------------------------------------

#[test]
fn realtime_mode_at_real_time_matches_offline() {
    let input = song(2.0);
    let settings = offline(BlockSizes::Fixed(256));
    let reference = {
        let _cpu = shared_cpu();
        render(&input, &settings)
    };
    let live = {
        let _cpu = exclusive_cpu();
        render(
            &input,
            &RenderSettings {
                mode: RenderMode::Realtime,
                realtime_speed: Some(1.0),
                ..settings.clone()
            },
        )
    };
    assert_all_finite("realtime", &live);
    // Whatever the worker managed, the mix is complete (fallback audio on underruns).
    assert_reconstructs("realtime", &live, &input);

    // After the first second the worker has caught up: the stems equal the offline stems, frame
    // for frame once each render's own latency is removed.
    let n = live.num_frames();
    let compared = SAMPLE_RATE_HZ as usize..n - live.latency_samples.max(reference.latency_samples);
    for p in VOCALS..=OTHER {
        for c in 0..2 {
            assert_close(
                &format!(
                    "realtime vs offline port {p} ch {c} (latencies {} / {})",
                    live.latency_samples, reference.latency_samples
                ),
                &live.port(p)[c][live.latency_samples..],
                &reference.port(p)[c][reference.latency_samples..],
                compared.clone(),
                ROUNDING_TOLERANCE,
            );
        }
    }
}

#[test]
fn realtime_underruns_keep_the_mix_complete() {
    let _cpu = shared_cpu();
    // Unpaced: the host asks for audio far faster than real time, so the worker falls behind
    // and the plugin has to output its fallback. The timeline and the mix must not suffer.
    let input = song(3.0);
    let live = render(
        &input,
        &RenderSettings {
            mode: RenderMode::Realtime,
            realtime_speed: None,
            ..offline(BlockSizes::Fixed(256))
        },
    );
    assert_all_finite("realtime, unpaced", &live);
    assert!(
        !live.restart_requested,
        "the plugin asked for a restart while processing"
    );
    // Diagnostics for a failure: where the stems went silent although the input was not.
    for (c, input_channel) in input.iter().enumerate() {
        let stems = stem_sum(&live, c);
        let lost: Vec<usize> = (live.latency_samples..live.num_frames())
            .filter(|&t| stems[t] == 0.0 && input_channel[t - live.latency_samples] != 0.0)
            .collect();
        if let (Some(first), Some(last)) = (lost.first(), lost.last()) {
            eprintln!(
                "ch {c}: {} frames of silent stems over non-silent input, frames {first}..={last}; \
                 main there: {:e}",
                lost.len(),
                live.main()[c][*first]
            );
        }
    }
    assert_reconstructs("realtime, unpaced", &live, &input);
}

// --- the CLI -------------------------------------------------------------------------------------

#[test]
fn cli_stems_are_the_plugins_offline_stems() {
    let _cpu = shared_cpu();
    let input = song(2.0);
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli_stems_are_the_plugins_offline_stems");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let wav_path = dir.join("song.wav");
    write_wav(&wav_path, SAMPLE_RATE_HZ, &input, 32, true);
    let out_dir = dir.join("out");

    let cli = cli_path();
    // The plugin renders the stream: `--mode stream` (the built-in separator has no whole-file
    // edges of its own and runs as the stream in either mode).
    run_ok(
        "`stemflow separate`",
        Command::new(&cli)
            .arg("separate")
            .args(["--mode", "stream"])
            .arg(&wav_path)
            .arg("-o")
            .arg(&out_dir),
    );

    let mut plugin = TestPlugin::load();
    plugin.set_render_mode(RenderMode::Offline);
    let latency = plugin.activate(SAMPLE_RATE_HZ as f64, 512, 512);
    let outputs =
        plugin.process_buffer(&pad_end(&input, latency), BlockSizes::Fixed(512), &[], None);
    plugin.deactivate();

    let n = input[0].len();
    for (i, stem) in STEMS.iter().enumerate() {
        let path = out_dir.join("song").join(format!("{stem}.wav"));
        assert!(path.is_file(), "the CLI did not write {}", path.display());
        let (spec, channels) = read_wav(&path);
        assert_eq!(
            (
                spec.sample_format,
                spec.bits_per_sample,
                spec.sample_rate,
                spec.channels
            ),
            (hound::SampleFormat::Float, 32, SAMPLE_RATE_HZ, 2),
            "{stem}.wav format"
        );
        for c in 0..2 {
            assert_eq!(channels[c].len(), n, "{stem}.wav length");
            assert_bit_identical(
                &format!(
                    "CLI {stem}.wav ch {c} vs plugin port {} shifted by {latency}",
                    i + 1
                ),
                &channels[c],
                &outputs[i + 1][c][latency..latency + n],
            );
        }
    }
}

/// A mono 16-bit file at 48 kHz (resampled to the separator's 44.1 kHz and back): the CLI decodes
/// it, separates it as two identical channels and writes each stem as the average of its two
/// channels. The plugin, fed the same decoded samples on both inputs, gives the same stems bit
/// for bit.
#[test]
fn cli_mono_stems_at_another_rate_are_the_plugins_offline_stems() {
    const RATE_HZ: u32 = 48_000;
    let _cpu = shared_cpu();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("cli_mono_stems_at_another_rate_are_the_plugins_offline_stems");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let wav_path = dir.join("voice.wav");
    let song = DemoSong::generate(RATE_HZ, 1.5).mix();
    let voice: Vec<f32> = song[0].iter().map(|&x| x * 0.9).collect();
    write_wav(&wav_path, RATE_HZ, &[voice], 16, false);
    // The samples exactly as any decoder reads them back.
    let (_, decoded) = read_wav(&wav_path);
    let mono = decoded[0].clone();

    let out_dir = dir.join("out");
    let cli = cli_path();
    run_ok(
        "`stemflow separate`",
        Command::new(&cli)
            .arg("separate")
            .arg(&wav_path)
            .args(["--mode", "stream", "--bit-depth", "32f", "--quiet", "-o"])
            .arg(&out_dir),
    );

    let mut plugin = TestPlugin::load();
    plugin.set_render_mode(RenderMode::Offline);
    let latency = plugin.activate(RATE_HZ as f64, 512, 512);
    let input = vec![mono.clone(), mono.clone()];
    let outputs =
        plugin.process_buffer(&pad_end(&input, latency), BlockSizes::Fixed(512), &[], None);
    plugin.deactivate();

    let n = mono.len();
    for (i, stem) in STEMS.iter().enumerate() {
        let (spec, channels) = read_wav(&out_dir.join("voice").join(format!("{stem}.wav")));
        assert_eq!(
            (
                spec.sample_format,
                spec.bits_per_sample,
                spec.sample_rate,
                spec.channels
            ),
            (hound::SampleFormat::Float, 32, RATE_HZ, 1),
            "{stem}.wav format"
        );
        let port = &outputs[i + 1];
        let average: Vec<f32> = (latency..latency + n)
            .map(|t| 0.5 * (port[0][t] + port[1][t]))
            .collect();
        assert_bit_identical(
            &format!(
                "CLI mono {stem}.wav vs the average of plugin port {} shifted by {latency}",
                i + 1
            ),
            &channels[0],
            &average,
        );
    }
}
