//! What `clap-validator` checks, as the project's own tests: every sample rate a host may use
//! (1 kHz to 768 kHz, fractional ones too), every parameter's text round-tripping, and no extra
//! cost for denormal input.

use std::time::{Duration, Instant};

use stemflow_host_tests::{signal, BlockSizes, RenderMode, RenderSettings, TestPlugin, ALL_STEMS};

/// Rates from telephone to 768 kHz, including fractional ones hosts derive from clocks.
const RATES_HZ: [f64; 16] = [
    1_000.0, 7_999.5, 8_000.0, 11_025.0, 22_050.0, 32_000.0, 44_100.0, 44_100.5, 48_000.0,
    88_200.0, 96_000.0, 176_400.0, 192_000.0, 352_800.0, 384_000.0, 768_000.0,
];

fn offline_at(rate_hz: f64) -> RenderSettings {
    RenderSettings {
        sample_rate_hz: rate_hz,
        block_sizes: BlockSizes::Fixed(512),
        mode: RenderMode::Offline,
        ..RenderSettings::default()
    }
}

#[test]
fn every_sample_rate_activates_and_processes() {
    let mut checked_content = 0;
    for rate_hz in RATES_HZ {
        // Long enough to pass the latency (which grows at unusual rates) at the common rates.
        let seconds = 0.6;
        let input = signal::test_song(rate_hz.round() as u32, seconds, 3);
        let mut plugin = TestPlugin::load();
        let rendered = plugin.render(&input, &offline_at(rate_hz));
        let latency = rendered.latency_samples;
        assert!(latency > 0, "{rate_hz} Hz: no latency reported");
        for (port, channels) in rendered.outputs.iter().enumerate() {
            for samples in channels {
                assert!(
                    samples.iter().all(|x| x.is_finite()),
                    "{rate_hz} Hz: port {port} is not finite"
                );
            }
        }
        // The mix is the input, one latency later; the stems sum to it.
        for channel in 0..2 {
            for t in 0..rendered.num_frames() {
                let expected = if t >= latency {
                    input[channel][t - latency]
                } else {
                    0.0
                };
                let main = rendered.main()[channel][t];
                assert!(
                    (main - expected).abs() < 1e-4,
                    "{rate_hz} Hz ch {channel} frame {t}: mix {main} vs input {expected}"
                );
                let stems: f32 = (1..rendered.outputs.len())
                    .map(|p| rendered.port(p)[channel][t])
                    .sum();
                assert!(
                    (stems - main).abs() < 1e-4,
                    "{rate_hz} Hz ch {channel} frame {t}: stems {stems} vs mix {main}"
                );
            }
        }
        if latency + 1_000 < rendered.num_frames() {
            checked_content += 1;
        }
    }
    assert!(
        checked_content >= 10,
        "only {checked_content} rates got past their latency: the test checks too little"
    );
}

#[test]
fn every_parameter_text_round_trips() {
    let mut plugin = TestPlugin::load();
    let ids: Vec<String> = ALL_STEMS
        .iter()
        .flat_map(|stem| ["gain", "mute", "solo"].map(|what| format!("{stem}_{what}")))
        .chain(["guitar_piano", "lookahead", "bypass"].map(str::to_owned))
        .collect();
    assert_eq!(
        ids.len(),
        plugin.params().len(),
        "every parameter is checked"
    );
    let mut checked = 0;
    for id in &ids {
        let param = plugin.param(id).clone();
        let span = param.max_value - param.min_value;
        // Many values across the range, including between steps (a host may send any value).
        let values: Vec<f64> = (0..=200)
            .map(|i| param.min_value + span * f64::from(i) / 200.0)
            .chain([param.min_value + span * 0.505, param.max_value])
            .collect();
        for value in values {
            let text = plugin.param_text(id, value);
            let parsed = plugin.param_value_for_text(id, &text).unwrap_or_else(|| {
                panic!(
                    "{}: {value} shows as {text:?}, which does not parse",
                    param.name
                )
            });
            let again = plugin.param_text(id, parsed);
            assert_eq!(
                again, text,
                "{}: {value} → {text:?} → {parsed} → {again:?}",
                param.name
            );
            checked += 1;
        }
    }
    assert!(checked > 3_000);
}

/// The best of `runs` wall-clock times of an offline render of `input`.
fn render_time(input: &[Vec<f32>], runs: usize) -> Duration {
    (0..runs)
        .map(|_| {
            let mut plugin = TestPlugin::load();
            let start = Instant::now();
            plugin.render(input, &offline_at(44_100.0));
            start.elapsed()
        })
        .min()
        .unwrap()
}

#[test]
fn denormal_input_costs_no_more_than_normal_input() {
    let normal = signal::test_song(44_100, 2.0, 5);
    let denormal: Vec<Vec<f32>> = normal
        .iter()
        .map(|c| c.iter().map(|&x| x * 1e-39).collect())
        .collect();
    assert!(denormal[0].iter().any(|x| x.is_subnormal()));
    let normal_time = render_time(&normal, 3);
    let denormal_time = render_time(&denormal, 3);
    let ratio = denormal_time.as_secs_f64() / normal_time.as_secs_f64();
    eprintln!("denormal/normal cost: {ratio:.2} ({denormal_time:?} / {normal_time:?})");
    assert!(
        ratio < 2.0,
        "denormal input is {ratio:.1}× as expensive as normal input"
    );
}
