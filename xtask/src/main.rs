//! The project's tasks: `cargo xtask install`, `cargo xtask test`, plus nice-plug's `bundle`.

use std::path::{Path, PathBuf};
use std::process::Command;

use nice_plug_xtask::Result;

const PLUGIN_PACKAGE: &str = "stemflow";
const BUNDLE_NAME: &str = "Stemflow";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    nice_plug_xtask::chdir_workspace_root()?;
    match args.first().map(String::as_str) {
        Some("install") => install(),
        Some("test") => test(&args[1..]),
        Some("test-bundle") => test_bundle().map(|_| ()),
        _ => nice_plug_xtask::main_with_args("cargo xtask", args),
    }
}

/// Runs a command, failing with its description if it fails.
fn run(command: &mut Command) -> Result<()> {
    eprintln!("xtask: running {command:?}");
    let status = command.status()?;
    if !status.success() {
        anyhow::bail!("{command:?} failed with {status}");
    }
    Ok(())
}

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

/// The file name of the plugin's shared library on this platform.
fn plugin_library_name() -> String {
    if cfg!(target_os = "windows") {
        format!("{PLUGIN_PACKAGE}.dll")
    } else if cfg!(target_os = "macos") {
        format!("lib{PLUGIN_PACKAGE}.dylib")
    } else {
        format!("lib{PLUGIN_PACKAGE}.so")
    }
}

/// Where the user's plugins go on this platform; `STEMFLOW_CLAP_DIR`/`STEMFLOW_VST3_DIR` win.
fn plugin_folders() -> Result<(PathBuf, PathBuf)> {
    let from_env = |name: &str| std::env::var_os(name).map(PathBuf::from);
    let home = || -> Result<PathBuf> {
        std::env::var_os(if cfg!(windows) {
            "LOCALAPPDATA"
        } else {
            "HOME"
        })
        .map(PathBuf::from)
        .ok_or_else(|| anyhow::anyhow!("no home folder (HOME/LOCALAPPDATA unset)"))
    };
    let (clap, vst3) = if cfg!(target_os = "macos") {
        let base = home()?.join("Library/Audio/Plug-Ins");
        (base.join("CLAP"), base.join("VST3"))
    } else if cfg!(windows) {
        let base = home()?.join("Programs/Common");
        (base.join("CLAP"), base.join("VST3"))
    } else {
        (home()?.join(".clap"), home()?.join(".vst3"))
    };
    Ok((
        from_env("STEMFLOW_CLAP_DIR").unwrap_or(clap),
        from_env("STEMFLOW_VST3_DIR").unwrap_or(vst3),
    ))
}

/// Copies a file or a whole folder (bundles are folders on macOS and for VST3).
fn copy_recursively(from: &Path, to: &Path) -> Result<()> {
    if from.is_dir() {
        if to.is_file() {
            std::fs::remove_file(to)?;
        }
        std::fs::create_dir_all(to)?;
        for entry in std::fs::read_dir(from)? {
            let entry = entry?;
            copy_recursively(&entry.path(), &to.join(entry.file_name()))?;
        }
    } else {
        if to.is_dir() {
            std::fs::remove_dir_all(to)?;
        }
        std::fs::copy(from, to)?;
    }
    Ok(())
}

/// README command 1: build the release bundles, install them, separate the demo song.
fn install() -> Result<()> {
    nice_plug_xtask::main_with_args(
        "cargo xtask",
        ["bundle", PLUGIN_PACKAGE, "--release"].map(String::from),
    )?;
    let bundled = Path::new("target/bundled");
    let (clap_dir, vst3_dir) = plugin_folders()?;
    std::fs::create_dir_all(&clap_dir)?;
    std::fs::create_dir_all(&vst3_dir)?;
    let clap_target = clap_dir.join(format!("{BUNDLE_NAME}.clap"));
    let vst3_target = vst3_dir.join(format!("{BUNDLE_NAME}.vst3"));
    copy_recursively(&bundled.join(format!("{BUNDLE_NAME}.clap")), &clap_target)?;
    copy_recursively(&bundled.join(format!("{BUNDLE_NAME}.vst3")), &vst3_target)?;

    run(cargo().args(["build", "--release", "-p", "stemflow-cli"]))?;
    let cli = Path::new("target/release").join(format!("stemflow{}", std::env::consts::EXE_SUFFIX));
    run(Command::new(&cli).args(["demo", "-o", "stemflow-demo"]))?;

    println!();
    println!("Stemflow is installed:");
    println!("  CLAP: {}", clap_target.display());
    println!("  VST3: {}", vst3_target.display());
    println!("  CLI:  {}", cli.display());
    println!("Rescan plugins in your DAW, insert \"Stemflow\" on a stereo track and route its");
    println!("Vocals/Drums/Bass/Other outputs to their own tracks. The demo stems are in ./stemflow-demo/.");
    Ok(())
}

/// Builds the plugin for the host tests: a debug build with allocation checks in `process()`,
/// copied to `target/stemflow-test/Stemflow.clap`. Returns that path.
fn test_bundle() -> Result<PathBuf> {
    run(cargo().args([
        "build",
        "-p",
        PLUGIN_PACKAGE,
        "--lib",
        "--features",
        "assert_process_allocs",
    ]))?;
    let folder = Path::new("target/stemflow-test");
    std::fs::create_dir_all(folder)?;
    let bundle = folder.join(format!("{BUNDLE_NAME}.clap"));
    std::fs::copy(
        Path::new("target/debug").join(plugin_library_name()),
        &bundle,
    )?;
    Ok(std::fs::canonicalize(bundle)?)
}

/// README command 2: every test, including the ones that host the built plugin.
fn test(extra_args: &[String]) -> Result<()> {
    let bundle = test_bundle()?;
    run(cargo().args(["build", "-p", "stemflow-cli"]))?;
    let cli = std::fs::canonicalize(
        Path::new("target/debug").join(format!("stemflow{}", std::env::consts::EXE_SUFFIX)),
    )?;
    run(cargo()
        .args(["test", "--workspace"])
        .args(extra_args)
        .env("STEMFLOW_TEST_CLAP", &bundle)
        .env("STEMFLOW_TEST_CLI", &cli))
}
