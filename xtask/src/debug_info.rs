//! The release bundles without their line tables. `[profile.release]` keeps
//! `debug = "line-tables-only"` (file:line in the CLI's backtraces and in profiles), which on
//! Linux is most of the plugin's binary (docs/internals.md, "Release bundles"). After nice-plug's
//! `bundle`, the Linux bundles' binaries have their debug sections moved to
//! `target/bundled/Stemflow.debug`, beside the bundles and not in them, with a `.gnu_debuglink`
//! to it; their symbol table (function names, for crash reports) stays. macOS keeps debug info
//! in the object files, not in the bundle, and the Windows zip is stripped by
//! `cargo xtask windows`, so only Linux needs this.

use std::path::{Path, PathBuf};
use std::process::Command;

use nice_plug_xtask::Result;

use crate::setup::{run, BUNDLE_NAME};

/// Where the bundles are.
const BUNDLED_DIR: &str = "target/bundled";

/// `cargo xtask bundle ARGS`: nice-plug's bundling, then, for a native Linux release build of
/// the plugin, its line tables moved out of the bundles ([`split_debug_info`]).
pub fn bundle(args: &[String]) -> Result<()> {
    nice_plug_xtask::main_with_args("cargo xtask", args.iter().cloned())?;
    let is_release = args
        .iter()
        .any(|a| a == "--release" || a == "--profile=release");
    let is_cross = args
        .iter()
        .any(|a| a == "--target" || a.starts_with("--target="));
    if cfg!(target_os = "linux") && is_release && !is_cross {
        let bundled = Path::new(BUNDLED_DIR);
        if bundled.join(format!("{BUNDLE_NAME}.clap")).is_file() {
            split_debug_info(bundled)?;
        }
    }
    Ok(())
}

/// The plugin binaries of the Linux bundles in `bundled` (CLAP, VST3).
fn linux_binaries(bundled: &Path) -> Vec<PathBuf> {
    [
        bundled.join(format!("{BUNDLE_NAME}.clap")),
        bundled.join(format!(
            "{BUNDLE_NAME}.vst3/Contents/{}-linux/{BUNDLE_NAME}.so",
            std::env::consts::ARCH
        )),
    ]
    .into_iter()
    .filter(|path| path.is_file())
    .collect()
}

/// Moves the debug sections of the bundles' binaries (one build, the same in both) into
/// `bundled/Stemflow.debug`, linked from each binary by `.gnu_debuglink`, with binutils'
/// `objcopy`. Without `objcopy` the bundles stay as they are, and this says so.
fn split_debug_info(bundled: &Path) -> Result<()> {
    let binaries = linux_binaries(bundled);
    let Some(first) = binaries.first() else {
        return Ok(());
    };
    if Command::new("objcopy").arg("--version").output().is_err() {
        eprintln!(
            "xtask: warning: objcopy (binutils) not found: the bundles keep their line tables \
             (about 80 MB); `apt-get install binutils` makes them small"
        );
        return Ok(());
    }
    let debug_file = bundled.join(format!("{BUNDLE_NAME}.debug"));
    let before = std::fs::metadata(first)?.len();
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(first)
        .arg(&debug_file))?;
    for binary in &binaries {
        run(Command::new("objcopy")
            .arg("--strip-debug")
            .arg(format!("--add-gnu-debuglink={}", debug_file.display()))
            .arg(binary))?;
    }
    let after = std::fs::metadata(first)?.len();
    eprintln!(
        "xtask: {} is {:.1} MB ({:.1} MB before); its line tables are in {} (symbols stay in \
         the bundle)",
        first.display(),
        after as f64 / 1e6,
        before as f64 / 1e6,
        debug_file.display()
    );
    Ok(())
}
