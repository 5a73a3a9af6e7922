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
//! - [`signal`]: deterministic test audio and block schedules; [`compare`]: sample-exact
//!   assertions; [`state`]: nice-plug's state framing; [`wav`]: float WAV I/O.
//! - [`plugin_path`] / [`cli_path`]: where the artefacts under test are.

#![deny(missing_docs)]

pub mod compare;
pub mod host;
mod plugin;
pub mod signal;
pub mod state;
pub mod wav;

use std::path::{Path, PathBuf};

pub use clack_extensions::render::RenderMode;
pub use plugin::{
    param_hash, render, ParamDesc, ParamEvent, PortConfigInfo, PortInfo, PortLayout,
    RenderSettings, Rendered, TestPlugin,
};
pub use signal::BlockSizes;

/// The CLAP plugin id of Stemflow.
pub const PLUGIN_ID: &str = "audio.stemflow.stemflow";

/// The parameter string ids of the four usual stems, in output-port order.
pub const STEMS: [&str; 4] = ["vocals", "drums", "bass", "other"];

/// The parameter string ids of all six stems, in output-port order (guitar and piano carry
/// six-stem models' guitar and piano when "Guitar & Piano" is set to its own outputs).
pub const ALL_STEMS: [&str; 6] = ["vocals", "drums", "bass", "other", "guitar", "piano"];

/// Output port names of the default configuration, main output first.
pub const OUTPUT_PORT_NAMES: [&str; 7] = [
    "Output", "Vocals", "Drums", "Bass", "Other", "Guitar", "Piano",
];

/// Environment variable overriding [`plugin_path`].
pub const PLUGIN_PATH_ENV: &str = "STEMFLOW_TEST_CLAP";

/// Environment variable overriding [`cli_path`].
pub const CLI_PATH_ENV: &str = "STEMFLOW_TEST_CLI";

/// The workspace root (the parent of this crate's directory).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

fn artefact(env: &str, default: PathBuf, what: &str) -> PathBuf {
    let path = std::env::var_os(env).map(PathBuf::from).unwrap_or(default);
    assert!(
        path.is_file(),
        "{what} not found at {} (set {env} to override); build it with `cargo xtask test`",
        path.display()
    );
    path
}

/// The plugin under test: `$STEMFLOW_TEST_CLAP`, or
/// `<workspace>/target/stemflow-test/Stemflow.clap`. Panics if the file does not exist: these
/// tests never skip silently.
pub fn plugin_path() -> PathBuf {
    artefact(
        PLUGIN_PATH_ENV,
        workspace_root().join("target/stemflow-test/Stemflow.clap"),
        "the test build of Stemflow.clap",
    )
}

/// The CLI under test: `$STEMFLOW_TEST_CLI`, or `<workspace>/target/debug/stemflow`.
/// Panics if the file does not exist.
pub fn cli_path() -> PathBuf {
    let name = if cfg!(windows) {
        "stemflow.exe"
    } else {
        "stemflow"
    };
    artefact(
        CLI_PATH_ENV,
        workspace_root().join("target/debug").join(name),
        "the stemflow CLI",
    )
}
