//! Coverage-guided fuzzing of every parser that reads what users download or import (issue 45):
//! one [`Target`] per parser, each a function of arbitrary bytes that must return without
//! panicking, hanging or allocating past its bound, and that checks what it can about a
//! successful parse (a round trip, sizes that agree).
//!
//! - `src/bin/fuzz-parsers.rs` (feature `libfuzzer`) runs a target under libFuzzer; `cargo xtask
//!   fuzz-parsers` builds it with coverage instrumentation and runs each target, a few seconds
//!   each in `cargo xtask test`, for as long as asked on demand (docs/internals.md).
//! - `tests/regressions.rs` replays, in every test run, each target's seeds ([`seeds`]: the
//!   repository's fixtures and generated files) and every input a fuzzer found that failed
//!   (`regressions/<target>/`), uninstrumented.
//!
//! The parsers of the CLI and the plugin live in small crates of their own, so the fuzzer builds
//! them, not the CLI or the plugin: `stemflow-audio` (the decoders, without the stem writers),
//! `stemflow-manifest` and `stemflow-plugin-state`.

use std::path::{Path, PathBuf};

mod seeds;
mod targets;

pub use seeds::seeds;

/// A parser under fuzzing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// `torch.save` files, zip and legacy layouts (`stemflow_convert::torch`).
    Torch,
    /// A pickled dict of numpy arrays (Spleeter's checkpoints).
    NumpyDict,
    /// Zip archives: wheels and checkpoints (`stemflow_convert::zip`).
    Zip,
    /// ONNX files: the wire reader, the model and graph views, external data.
    Onnx,
    /// MSST's YAML configs and demucs bags (the one YAML reader, and the RoFormer config).
    MsstYaml,
    /// Audio files: WAV, AIFF, FLAC, MP3, OGG and M4A through symphonia and Stemflow's own code.
    Audio,
    /// `stemflow separate --manifest` lines.
    Manifest,
    /// The plugin's saved state as the host gives it back.
    PluginState,
}

impl Target {
    /// Every target.
    pub const ALL: [Target; 8] = [
        Target::Torch,
        Target::NumpyDict,
        Target::Zip,
        Target::Onnx,
        Target::MsstYaml,
        Target::Audio,
        Target::Manifest,
        Target::PluginState,
    ];

    /// The target's name, as `cargo xtask fuzz-parsers` and `regressions/` spell it.
    pub fn name(self) -> &'static str {
        match self {
            Target::Torch => "torch",
            Target::NumpyDict => "numpy-dict",
            Target::Zip => "zip",
            Target::Onnx => "onnx",
            Target::MsstYaml => "msst-yaml",
            Target::Audio => "audio",
            Target::Manifest => "manifest",
            Target::PluginState => "plugin-state",
        }
    }

    /// The target named `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|target| target.name() == name)
    }

    /// Largest input worth trying (libFuzzer's `-max_len`): real inputs of this kind are
    /// larger, but every structure the parser knows fits.
    pub fn max_len_bytes(self) -> usize {
        match self {
            Target::Torch | Target::Zip | Target::Audio => 64 << 10,
            Target::NumpyDict | Target::Onnx => 32 << 10,
            Target::MsstYaml | Target::Manifest | Target::PluginState => 8 << 10,
        }
    }

    /// Runs the target on `data`. Panics on a bug: a parser that panics, or a successful
    /// parse whose checks fail.
    pub fn run(self, data: &[u8]) {
        match self {
            Target::Torch => targets::torch(data),
            Target::NumpyDict => targets::numpy_dict(data),
            Target::Zip => targets::zip(data),
            Target::Onnx => targets::onnx(data),
            Target::MsstYaml => targets::msst_yaml(data),
            Target::Audio => targets::audio(data),
            Target::Manifest => targets::manifest(data),
            Target::PluginState => targets::plugin_state(data),
        }
    }
}

/// The repository's root (this crate's parent folder).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the fuzz crate lies in the workspace")
        .to_path_buf()
}

/// The inputs a fuzzer found for `target` that once failed, kept as regression tests.
pub fn regressions(target: Target) -> Vec<(String, Vec<u8>)> {
    let folder = workspace_root()
        .join("fuzz/regressions")
        .join(target.name());
    read_folder(&folder)
}

/// Every file in `folder` but its README (none if it does not exist), sorted by name.
fn read_folder(folder: &Path) -> Vec<(String, Vec<u8>)> {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return Vec::new();
    };
    let mut files: Vec<(String, Vec<u8>)> = entries
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            if path.file_name()? == "README.md" {
                return None;
            }
            let bytes = std::fs::read(&path).ok()?;
            Some((path.file_name()?.to_string_lossy().into_owned(), bytes))
        })
        .collect();
    files.sort();
    files
}
