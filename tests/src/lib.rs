//! A small CLAP host for testing the built Stemflow plugin in-process.
//!
//! The tests in `tests/` load the real `Stemflow.clap` (a debug build with nice-plug's
//! `assert_process_allocs`, made by `cargo xtask test`) through [`clack_host`], exactly as a DAW
//! would: the test thread is the plugin's main thread, `process()` runs on a separate audio
//! thread, and only the CLAP interface is used.
//!
//! ```no_run
//! use stemflow_host_tests::{BlockSizes, RenderSettings, TestPlugin, signal};
//!
//! let input = signal::test_song(44_100, 1.0, 1);
//! let mut plugin = TestPlugin::load();
//! let rendered = plugin.render(
//!     &input,
//!     &RenderSettings { block_sizes: BlockSizes::Fixed(64), ..Default::default() },
//! );
//! let latency = rendered.latency_samples;
//! let vocals_left = &rendered.port(1)[0];
//! # let _ = (latency, vocals_left);
//! ```
//!
//! Pieces:
//! - [`TestPlugin`]: load, inspect ports/params/latency, select a port config, set the render
//!   mode, set parameters (flush) or make [`ParamEvent`]s, save/load state, activate, and
//!   [`TestPlugin::process_buffer`] a whole buffer in [`BlockSizes`]; [`TestPlugin::render`] does
//!   all of it for one activation and returns a [`Rendered`].
//! - [`raw_host::RawPlugin`]: the same plugin through bare CLAP calls, for aliased and missing
//!   buffers and exact counts of host callbacks.
//! - [`signal`]: deterministic test audio and block schedules; [`compare`]: sample-exact
//!   assertions; [`checks`]: what every render must satisfy; [`state`]: nice-plug's state
//!   framing. WAV files are read and written by `stemflow_kit::testing`, as in every crate.
//! - [`vst3_host`]: the built VST3 loaded in-process (components, state streams).
//! - [`fuzz`]: the seeded plugin fuzzer (CLAP and VST3) behind `cargo xtask fuzz`.
//! - [`plugin_path`] / [`vst3_path`] / [`cli_path`]: where the artefacts under test are.

#![deny(missing_docs)]

pub mod artefacts;
pub mod checks;
pub mod clap_library;
pub mod compare;
pub mod fuzz;
pub mod host;
mod load_once;
mod plugin;
pub mod raw_host;
pub mod signal;
pub mod state;
pub mod vst3_host;

pub use artefacts::{
    cli_path, plugin_path, run_ok, vst3_path, workspace_root, ALL_STEMS, CLI_PATH_ENV,
    OUTPUT_PORT_NAMES, PLUGIN_ID, PLUGIN_PATH_ENV, STEMS, VST3_PATH_ENV,
};
pub use clack_extensions::render::RenderMode;
pub use plugin::{
    param_hash, render, ParamDesc, ParamEvent, PortConfigInfo, PortInfo, PortLayout,
    RenderSettings, Rendered, TestPlugin,
};
pub use signal::BlockSizes;
