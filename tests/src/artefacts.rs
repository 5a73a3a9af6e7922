//! What the tests test: the built plugin and CLI, where they are, and the plugin's ids and
//! names as a host sees them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The CLAP plugin id of Stemflow.
pub const PLUGIN_ID: &str = "audio.stemflow.stemflow";

/// The parameter string ids of the four usual stems, in output-port order.
pub const STEMS: [&str; 4] = ["vocals", "drums", "bass", "other"];

/// The parameter string ids of all six stems, in output-port order (guitar and piano carry
/// six-stem models' guitar and piano when "Guitar & Piano" is set to its own outputs).
pub const ALL_STEMS: [&str; 6] = ["vocals", "drums", "bass", "other", "guitar", "piano"];

/// Output port names of the default configuration, main output first.
pub const OUTPUT_PORT_NAMES: [&str; 7] =
    ["Mix", "Vocals", "Drums", "Bass", "Other", "Guitar", "Piano"];

/// Environment variable overriding [`plugin_path`].
pub const PLUGIN_PATH_ENV: &str = "STEMFLOW_TEST_CLAP";

/// Environment variable overriding [`vst3_path`].
pub const VST3_PATH_ENV: &str = "STEMFLOW_TEST_VST3";

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
        path.is_file() || path.is_dir(),
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

/// The VST3 bundle under test (a folder): `$STEMFLOW_TEST_VST3`, or
/// `<workspace>/target/stemflow-test/Stemflow.vst3`. Panics if it does not exist.
pub fn vst3_path() -> PathBuf {
    artefact(
        VST3_PATH_ENV,
        workspace_root().join("target/stemflow-test/Stemflow.vst3"),
        "the test build of Stemflow.vst3",
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

/// Runs `command` (`what` names it in messages) to its end and asserts that it succeeded; a
/// failure shows its exit status, stdout and stderr. Returns its output.
#[track_caller]
pub fn run_ok(what: &str, command: &mut Command) -> Output {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}
