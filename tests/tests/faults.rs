//! Fault injection in the hosted plugin: a separator slower than real time, one that panics,
//! one that fails a hop and one that loses its device mid-session. The test build accepts
//! `*.stemflow-fault` plans as models (feature `fault-injection`, `engine/src/fault.rs`); the
//! plan wraps the built-in separator, so a render without faults equals the built-in's.
//!
//! Whatever fails, the host gets a complete mix at the reported latency, never NaN, and the
//! plugin never asks for a restart.

use std::path::PathBuf;

use stemflow_host_tests::checks::{assert_all_finite, assert_reconstructs, assert_same_render};
use stemflow_host_tests::compare::{assert_bit_identical, delayed};
use stemflow_host_tests::state::{decode_state, encode_state};
use stemflow_host_tests::{
    render, BlockSizes, RenderMode, RenderSettings, Rendered, TestPlugin, ALL_STEMS,
};
use stemflow_kit::demo_song::DemoSong;

const SAMPLE_RATE_HZ: u32 = 44_100;
const VOCALS: usize = 1;
const OTHER: usize = 4;

fn song(seconds: f32) -> Vec<Vec<f32>> {
    DemoSong::generate(SAMPLE_RATE_HZ, seconds).mix().to_vec()
}

fn offline() -> RenderSettings {
    RenderSettings {
        block_sizes: BlockSizes::Fixed(512),
        mode: RenderMode::Offline,
        ..RenderSettings::default()
    }
}

/// Writes `plan` to a fault file named after the test.
fn plan_file(test_name: &str, plan: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stemflow-faults-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{test_name}.stemflow-fault"));
    std::fs::write(&path, plan).unwrap();
    path
}

/// A plugin whose saved state runs the fault plan, as a project would restore a model.
fn plugin_with_plan(test_name: &str, plan: &str) -> TestPlugin {
    let path = plan_file(test_name, plan);
    let mut plugin = TestPlugin::load();
    let mut state = decode_state(&plugin.save_state()).expect("the plugin's own state decodes");
    let mut stemflow: serde_json::Value =
        serde_json::from_str(state["fields"]["stemflow-state"].as_str().unwrap()).unwrap();
    stemflow["separator"] = format!("file:{}", path.display()).into();
    state["fields"]["stemflow-state"] = stemflow.to_string().into();
    plugin
        .load_state(&encode_state(&state))
        .expect("the state loads");
    plugin
}

/// Renders `seconds` of the song offline through the fault `plan` and asserts the render is the
/// built-in separator's, bit for bit; returns it.
fn renders_as_builtin(what: &str, seconds: f32, test_name: &str, plan: &str) -> Rendered {
    let input = song(seconds);
    let reference = render(&input, &offline());
    let rendered = plugin_with_plan(test_name, plan).render(&input, &offline());
    assert_same_render(&format!("{what} vs built-in"), &rendered, &reference);
    rendered
}

/// Frames in `range` whose stems are the fallback: Vocals … Bass silent and Other the dry,
/// delayed input, on both channels, where the input is not silent.
fn fallback_frames(
    rendered: &Rendered,
    input: &[Vec<f32>],
    range: std::ops::Range<usize>,
) -> usize {
    let n = rendered.num_frames();
    let dry: Vec<Vec<f32>> = input
        .iter()
        .map(|x| delayed(x, rendered.latency_samples, n))
        .collect();
    range
        .filter(|&t| {
            (0..2).all(|c| {
                dry[c][t] != 0.0
                    && (VOCALS..OTHER).all(|p| rendered.port(p)[c][t] == 0.0)
                    && rendered.port(OTHER)[c][t] == dry[c][t]
            })
        })
        .count()
}

#[test]
fn a_separator_slower_than_real_time_underruns_without_moving_the_latency() {
    let input = song(3.0);
    let mut plugin = plugin_with_plan("slow_live", "slow=3");
    let live = plugin.render(
        &input,
        &RenderSettings {
            mode: RenderMode::Realtime,
            realtime_speed: Some(1.0),
            ..offline()
        },
    );
    assert_all_finite("slow, live", &live);
    assert!(!live.restart_requested, "the plugin asked for a restart");
    assert_eq!(
        live.latency_after_samples, live.latency_samples,
        "the latency moved"
    );
    // The mix is complete although the stems are late: the late frames come as dry Other.
    assert_reconstructs("slow, live", &live, &input);
    let counted = live.latency_samples..live.num_frames();
    let fallback = fallback_frames(&live, &input, counted.clone());
    assert!(
        fallback * 4 >= counted.len(),
        "a separator at a third of real time left only {fallback} of {} frames as fallback",
        counted.len()
    );
}

#[test]
fn a_separator_slower_than_real_time_in_an_offline_render_is_waited_for() {
    renders_as_builtin("slow offline", 1.0, "slow_offline", "slow=1.5");
}

#[test]
fn a_separator_that_panics_sends_the_mix_through_other_and_recovers_on_reset() {
    let input = song(2.0);
    let reference = render(&input, &offline());
    let mut plugin = plugin_with_plan("panic", "panic_at_hop=20");
    let crashed = plugin.render(&input, &offline());
    assert_all_finite("after a panic", &crashed);
    assert_reconstructs("after a panic", &crashed, &input);
    assert!(!crashed.restart_requested, "the plugin asked for a restart");
    // Before the crash the stems are the built-in's; from some frame on they are the fallback
    // to the end.
    let n = crashed.num_frames();
    let first_fallback = (crashed.latency_samples..n)
        .find(|&t| fallback_frames(&crashed, &input, t..t + 1) == 1)
        .expect("no fallback frame after the panic");
    assert!(
        first_fallback > crashed.latency_samples,
        "the stems fell back from the start"
    );
    for c in 0..2 {
        assert_bit_identical(
            &format!("vocals ch {c} before the panic"),
            &crashed.port(VOCALS)[c][..first_fallback],
            &reference.port(VOCALS)[c][..first_fallback],
        );
    }
    let after = first_fallback..n;
    let non_silent = after
        .clone()
        .filter(|&t| input.iter().all(|x| x[t - crashed.latency_samples] != 0.0))
        .count();
    assert_eq!(
        fallback_frames(&crashed, &input, after),
        non_silent,
        "after the panic every frame falls back"
    );

    // The host's next start (nice-plug resets the plugin) brings the separator back.
    let recovered = plugin.render(&input, &offline());
    assert_same_render("after the reset vs built-in", &recovered, &reference);
}

#[test]
fn a_failed_hop_falls_back_for_that_hop_and_separation_goes_on() {
    let input = song(2.0);
    let mut plugin = plugin_with_plan("error", "error_at_hop=20");
    let rendered = plugin.render(&input, &offline());
    assert_all_finite("a failed hop", &rendered);
    assert_reconstructs("a failed hop", &rendered, &input);
    let n = rendered.num_frames();
    let fallback = fallback_frames(&rendered, &input, rendered.latency_samples..n);
    assert!(fallback > 0, "the failed hop did not fall back");
    let last_half_second = n - SAMPLE_RATE_HZ as usize / 2..n;
    assert_eq!(
        fallback_frames(&rendered, &input, last_half_second.clone()),
        0,
        "separation did not resume after the failed hop"
    );
    let vocals_energy: f32 = rendered.port(VOCALS)[0][last_half_second]
        .iter()
        .map(|x| x * x)
        .sum();
    assert!(vocals_energy > 0.0, "no vocals after the failed hop");
}

#[test]
fn a_device_lost_mid_session_falls_back_without_a_gap() {
    // The fallback device separates the same way, and not a frame goes missing.
    let rendered = renders_as_builtin("device lost", 1.5, "device", "device_fails_at_hop=10");
    assert_eq!(rendered.outputs.len(), 1 + ALL_STEMS.len());
}

#[test]
fn a_plan_that_cannot_be_read_falls_back_to_the_builtin_separator() {
    renders_as_builtin("unreadable plan", 0.5, "unreadable", "explode=now");
}
