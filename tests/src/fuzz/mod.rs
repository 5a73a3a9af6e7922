//! The project's plugin fuzzer: seeded, deterministic per seed, run by `cargo xtask fuzz
//! --minutes N` (and for about a minute by `cargo xtask test`, `tests/tests/fuzz.rs`), replayed
//! with `cargo xtask fuzz --seed S`.
//!
//! A seed drives the built plugin as many hosts would, through its C interfaces:
//! - **CLAP** ([`clap_seed`]): which host extensions exist (latency, tail, state, params,
//!   audio-ports and audio-ports-config rescans, thread-check), which plugin of the bundle,
//!   port configurations, render mode, standard and random sample rates (1 kHz–384 kHz), block
//!   size ranges (1–16,384 frames), in-place, missing-bus and 64-bit-only buffers, parameter
//!   values (sample-accurate, without cookies, out of range, non-finite, unknown ids),
//!   modulation, gestures, transport (also mid-block), note and MIDI events the plugin has no
//!   port for, events out of order or past the block, a full output queue, resets, stop/start,
//!   input with NaN, infinity and subnormals; from the main thread while the audio thread
//!   processes: state saved and loaded in 1–64-byte chunks, corrupted states, states naming
//!   another model (the model swapped while processing: ONNX test models, routes, fault plans
//!   that panic, fail or run slow, missing and broken files), parameter text round trips, render
//!   mode switches, queries; instances created and destroyed on up to four threads at once.
//! - **VST3** ([`vst3_seed`]): components created and released on several threads, initialise,
//!   get/set state (own, chunked, corrupted, another model), edit-controller calls, bus
//!   arrangements and activations, setupProcessing at random rates, block sizes and modes,
//!   setActive, process with parameter changes and per-call modes, terminate, release.
//!
//! Checked: nothing crashes or hangs; every output sample the plugin writes is finite and below
//! [`MAX_OUTPUT_MAGNITUDE`]; activation at any of those rates and block sizes succeeds;
//! `process()` never reports an error for valid input; the plugin's own state saves and loads
//! back; main-thread-only host callbacks come on the main thread. The plugin under test is the
//! debug build with allocation checks in `process()`, so an allocation there aborts the seed.

pub mod clap_instance;
pub mod clap_seed;
pub mod events;
pub mod lives;
pub mod rng;
pub mod signal;
pub mod state_edit;
pub mod target;
pub mod vst3_seed;

pub use lives::run_lives;
pub use target::{SeedReport, Target, MAX_OUTPUT_MAGNITUDE};

/// Which plugin format a seed drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `Stemflow.clap`.
    Clap,
    /// `Stemflow.vst3`.
    Vst3,
}

impl Format {
    /// The format seed `seed` drives when both are available: one seed in four is VST3.
    pub fn for_seed(seed: u64, has_vst3: bool) -> Self {
        if has_vst3 && seed % 4 == 3 {
            Format::Vst3
        } else {
            Format::Clap
        }
    }
}

/// Runs seed `seed` (its format from [`Format::for_seed`]). A panic of the harness itself (not
/// of the plugin, which would abort the process) is returned as an error too.
pub fn run_seed(target: &Target, seed: u64) -> Result<(Format, SeedReport), (Format, String)> {
    let format = Format::for_seed(seed, target.vst3.is_some());
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match format {
        Format::Clap => clap_seed::run(target, seed),
        Format::Vst3 => vst3_seed::run(target, seed),
    }));
    match result {
        Ok(Ok(report)) => Ok((format, report)),
        Ok(Err(error)) => Err((format, error)),
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic".into());
            Err((format, format!("the fuzzer panicked: {message}")))
        }
    }
}
