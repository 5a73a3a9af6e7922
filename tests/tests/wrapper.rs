//! What a host does with buffers, modes and activation, through bare CLAP calls: outputs that
//! alias inputs or each other in every way the format allows, missing buses, per-call mode
//! switches, a host bouncing faster than real time without saying so, and first activation
//! without a second one. Each of these once lost the input, skipped `process()` or built the
//! model stream twice (the wrapper fixes in `vendor/`).

use std::time::{Duration, Instant};

use stemflow_host_tests::raw_host::RawPlugin;
use stemflow_host_tests::{signal, PLUGIN_ID};

const SAMPLE_RATE_HZ: u32 = 44_100;
const BLOCK: usize = 512;
/// Output ports of the default configuration: main, then six stems.
const NUM_PORTS: usize = 7;
const MAIN: usize = 0;
const VOCALS: usize = 1;
const DRUMS: usize = 2;

/// Where each output channel of a block goes, as a host wires it.
#[derive(Clone, Copy)]
enum Wire {
    /// The host's own buffer for this port and channel.
    Own,
    /// The input buffer of this channel (the track's buffers).
    Input(usize),
    /// One scratch buffer shared by everything that points at it.
    Scratch,
    /// A port passed with a null buffer and no channels.
    Absent,
}

/// A whole render's outputs, `[port][channel][frame]`, of the ports the pattern maps.
type Outputs = Vec<Option<[Vec<f32>; 2]>>;

/// Renders `input` through a fresh instance with every output port wired by `wiring(port)`,
/// `num_ports` ports passed (the rest not at all). `mode(frame)` says whether the block that
/// starts at `frame` is offline; `pace` sleeps before each block. Returns the outputs of the
/// ports wired to their own buffers or the input (the ones whose contents a host would use).
fn render(
    input: &[Vec<f32>],
    num_ports: usize,
    wiring: impl Fn(usize) -> [Wire; 2],
    mode: impl Fn(usize) -> bool,
    pace: Option<Duration>,
) -> Outputs {
    let mut plugin = RawPlugin::create(PLUGIN_ID);
    plugin.set_offline(mode(0));
    plugin.activate(f64::from(SAMPLE_RATE_HZ), BLOCK as u32);
    let num_frames = input[0].len();
    let mut inputs = [vec![0.0f32; BLOCK], vec![0.0f32; BLOCK]];
    let mut own: Vec<[Vec<f32>; 2]> = (0..num_ports)
        .map(|_| [vec![0.0f32; BLOCK], vec![0.0f32; BLOCK]])
        .collect();
    let mut scratch = vec![0.0f32; BLOCK];
    let mut out: Outputs = (0..num_ports)
        .map(|port| {
            let kept = wiring(port)
                .iter()
                .all(|w| matches!(w, Wire::Own | Wire::Input(_)));
            kept.then(|| {
                [
                    Vec::with_capacity(num_frames),
                    Vec::with_capacity(num_frames),
                ]
            })
        })
        .collect();
    let mut is_offline = mode(0);
    let mut start = 0;
    let mut next_block = Instant::now();
    while start < num_frames {
        let len = BLOCK.min(num_frames - start);
        if mode(start) != is_offline {
            is_offline = !is_offline;
            plugin.set_offline(is_offline);
        }
        if let Some(pace) = pace {
            next_block += pace;
            std::thread::sleep(next_block.saturating_duration_since(Instant::now()));
        }
        for (channel, buffer) in inputs.iter_mut().enumerate() {
            buffer[..len].copy_from_slice(&input[channel][start..start + len]);
        }
        let mut input_ptrs = [inputs[0].as_mut_ptr(), inputs[1].as_mut_ptr()];
        let mut output_ptrs: Vec<Option<Vec<*mut f32>>> = (0..num_ports)
            .map(|port| {
                let wires = wiring(port);
                if wires.iter().any(|w| matches!(w, Wire::Absent)) {
                    return None;
                }
                Some(
                    wires
                        .iter()
                        .enumerate()
                        .map(|(channel, wire)| match wire {
                            Wire::Own => own[port][channel].as_mut_ptr(),
                            Wire::Input(c) => input_ptrs[*c],
                            Wire::Scratch | Wire::Absent => scratch.as_mut_ptr(),
                        })
                        .collect(),
                )
            })
            .collect();
        // SAFETY: every pointer is one of the buffers above, each `BLOCK` frames long.
        unsafe { plugin.process(len as u32, &mut input_ptrs, &mut output_ptrs) };
        for (port, kept) in out.iter_mut().enumerate() {
            if let Some(channels) = kept {
                for (channel, samples) in channels.iter_mut().enumerate() {
                    let source = match wiring(port)[channel] {
                        Wire::Own => &own[port][channel],
                        Wire::Input(c) => &inputs[c],
                        Wire::Scratch | Wire::Absent => unreachable!("not kept"),
                    };
                    samples.extend_from_slice(&source[..len]);
                }
            }
        }
        start += len;
    }
    out
}

fn song(duration_s: f32) -> Vec<Vec<f32>> {
    signal::test_song(SAMPLE_RATE_HZ, duration_s, 7)
}

fn energy(samples: &[f32]) -> f64 {
    samples.iter().map(|&x| f64::from(x) * f64::from(x)).sum()
}

/// The reference: every output on its own buffer, offline throughout.
fn reference(input: &[Vec<f32>]) -> Outputs {
    let out = render(input, NUM_PORTS, |_| [Wire::Own; 2], |_| true, None);
    let vocals = out[VOCALS].as_ref().unwrap();
    assert!(
        energy(&vocals[0]) > 1e-3 * energy(&input[0]),
        "the reference has no vocals: the test would prove nothing"
    );
    out
}

fn assert_port_equal(what: &str, port: usize, got: &Outputs, want: &Outputs, from_frame: usize) {
    let got = got[port]
        .as_ref()
        .unwrap_or_else(|| panic!("{what}: port {port} not kept"));
    let want = want[port].as_ref().unwrap();
    for channel in 0..2 {
        let (g, w) = (&got[channel][from_frame..], &want[channel][from_frame..]);
        assert_eq!(g.len(), w.len(), "{what}: port {port} length");
        if let Some(t) = (0..g.len()).find(|&t| g[t].to_bits() != w[t].to_bits()) {
            panic!(
                "{what}: port {port} channel {channel} differs from frame {} on ({} vs {})",
                from_frame + t,
                g[t],
                w[t]
            );
        }
    }
}

#[test]
fn every_aliasing_pattern_gives_the_same_stems() {
    let input = song(2.0);
    let want = reference(&input);
    let every_port: Vec<usize> = (0..NUM_PORTS).collect();
    // (what, one port, its wires, every other port's wire, the ports compared)
    let patterns = [
        // In place: the main output is the input buffers.
        (
            "main in place",
            MAIN,
            [Wire::Input(0), Wire::Input(1)],
            Wire::Own,
            &every_port[..],
        ),
        // Ardour, strict I/O, Vocals mapped to the track: the vocals pair is the input buffers,
        // everything unmapped (main included) shares one scratch buffer.
        (
            "vocals on the track, rest on scratch",
            VOCALS,
            [Wire::Input(0), Wire::Input(1)],
            Wire::Scratch,
            &[VOCALS][..],
        ),
        // Everything on one scratch buffer but Drums.
        (
            "drums alone, rest on scratch",
            DRUMS,
            [Wire::Own; 2],
            Wire::Scratch,
            &[DRUMS][..],
        ),
        // Crossed channels: main left is written into the right input's buffer and vice versa.
        (
            "main crossed",
            MAIN,
            [Wire::Input(1), Wire::Input(0)],
            Wire::Own,
            &every_port[..],
        ),
    ];
    for (what, port, wires, rest, compared) in patterns {
        let wiring = |p| if p == port { wires } else { [rest; 2] };
        let got = render(&input, NUM_PORTS, wiring, |_| true, None);
        for &compared_port in compared {
            assert_port_equal(what, compared_port, &got, &want, 0);
        }
    }
}

#[test]
fn missing_buses_still_process_every_present_one() {
    let input = song(2.0);
    let want = reference(&input);
    // Inactive aux buses passed as null buffers with no channels.
    let got = render(
        &input,
        NUM_PORTS,
        |port| {
            if port == MAIN || port == VOCALS {
                [Wire::Own; 2]
            } else {
                [Wire::Absent; 2]
            }
        },
        |_| true,
        None,
    );
    assert_port_equal("null aux buses", MAIN, &got, &want, 0);
    assert_port_equal("null aux buses", VOCALS, &got, &want, 0);
    // Fewer output ports than the layout has.
    let got = render(&input, 2, |_| [Wire::Own; 2], |_| true, None);
    assert_port_equal("two ports", MAIN, &got, &want, 0);
    assert_port_equal("two ports", VOCALS, &got, &want, 0);
}

#[test]
fn the_per_call_mode_switches_between_live_and_exact_without_a_gap() {
    let input = song(3.0);
    let want = reference(&input);
    // Half a second live and unpaced (the worker falls behind, less than its input ring),
    // then an export starts without a reactivation; later live again, and offline again.
    let switch_1 = 22_016;
    let switch_2 = 66_048;
    let switch_3 = 88_064;
    let got = render(
        &input,
        NUM_PORTS,
        |_| [Wire::Own; 2],
        |frame| !(frame < switch_1 || (switch_2..switch_3).contains(&frame)),
        None,
    );
    for port in 0..NUM_PORTS {
        let got_port = got[port].as_ref().unwrap();
        let want_port = want[port].as_ref().unwrap();
        for channel in 0..2 {
            // Exact from each switch to offline on, up to the next switch to live.
            for range in [switch_1..switch_2, switch_3..input[0].len()] {
                let (g, w) = (
                    &got_port[channel][range.clone()],
                    &want_port[channel][range.clone()],
                );
                if let Some(t) = (0..g.len()).find(|&t| g[t].to_bits() != w[t].to_bits()) {
                    panic!(
                        "port {port} channel {channel}: offline output differs at frame {}",
                        range.start + t
                    );
                }
            }
        }
    }
}

#[test]
fn a_host_bouncing_fast_without_saying_so_gets_exact_stems_once_detected() {
    // Live mode throughout, paced at 4× real time: the plugin notices the pace within about
    // two seconds of audio and waits for its worker from then on.
    let input = song(6.0);
    let want = reference(&input);
    let block_s = BLOCK as f64 / f64::from(SAMPLE_RATE_HZ);
    let got = render(
        &input,
        NUM_PORTS,
        |_| [Wire::Own; 2],
        |_| false,
        Some(Duration::from_secs_f64(block_s / 4.0)),
    );
    let from_frame = 4 * SAMPLE_RATE_HZ as usize;
    for port in 0..NUM_PORTS {
        assert_port_equal("a fast live host", port, &got, &want, from_frame);
    }
}

#[test]
fn first_activation_reports_the_latency_without_a_second_activation() {
    let mut plugin = RawPlugin::create(PLUGIN_ID);
    plugin.activate(f64::from(SAMPLE_RATE_HZ), BLOCK as u32);
    let counters = plugin.counters();
    assert_eq!(
        counters
            .restart_requests
            .load(std::sync::atomic::Ordering::SeqCst),
        0,
        "activation asked the host to restart (a second activation)"
    );
    assert_eq!(
        counters
            .latency_changes
            .load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the latency was not announced during activation"
    );
    assert!(plugin.latency_samples() > 0);
}

#[test]
fn the_single_bus_plugin_is_in_the_bundle_with_one_ten_channel_output() {
    let input = song(1.0);
    let mut plugin = RawPlugin::create("audio.stemflow.stemflow-single-bus");
    plugin.set_offline(true);
    plugin.activate(f64::from(SAMPLE_RATE_HZ), BLOCK as u32);
    let mut ten: Vec<Vec<f32>> = vec![vec![0.0; BLOCK]; 10];
    let mut mix = vec![Vec::new(); 10];
    let mut inputs = [vec![0.0f32; BLOCK], vec![0.0f32; BLOCK]];
    for start in (0..input[0].len() - BLOCK).step_by(BLOCK) {
        for c in 0..2 {
            inputs[c].copy_from_slice(&input[c][start..start + BLOCK]);
        }
        let mut input_ptrs = [inputs[0].as_mut_ptr(), inputs[1].as_mut_ptr()];
        let mut outputs = vec![Some(ten.iter_mut().map(|c| c.as_mut_ptr()).collect())];
        // SAFETY: the pointers are the buffers above, `BLOCK` frames each.
        unsafe { plugin.process(BLOCK as u32, &mut input_ptrs, &mut outputs) };
        for (channel, samples) in ten.iter().enumerate() {
            mix[channel].extend_from_slice(samples);
        }
    }
    // Channels 3..10 are the four stems; they sum to the mix on channels 1–2.
    for side in 0..2 {
        let stems: f64 = (1..5).map(|s| energy(&mix[2 * s + side])).sum();
        assert!(stems > 0.0, "silent stems on the single bus");
        for t in 0..mix[0].len() {
            let sum: f32 = (1..5).map(|s| mix[2 * s + side][t]).sum();
            assert!(
                (sum - mix[side][t]).abs() < 1e-5,
                "frame {t}: stems do not sum to the mix"
            );
        }
    }
}
