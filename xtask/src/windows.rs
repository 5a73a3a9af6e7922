//! `cargo xtask windows [--test] [--flavor directml|cpu]`: the Windows build, cross-compiled on
//! Debian, and its tests under Wine.
//!
//! Debian's `rustc-web` toolchain with its standard library source (`rust-web-src`) builds the
//! standard library for `x86_64-pc-windows-gnu` (`-Zbuild-std`), MinGW-w64 links, and pip
//! fetches ONNX Runtime's Windows wheels. The result, in `target/windows/`:
//! - `bundled/Stemflow.clap` and `bundled/Stemflow.vst3/Contents/x86_64-win/Stemflow.vst3`;
//! - `Stemflow-<version>-windows-x86_64.zip`: both bundles and `stemflow.exe`, each with ONNX
//!   Runtime beside it (the DirectML build by default: CPU and any DirectX 12 GPU);
//! - `test/`: the executables, the Windows build of the CLAP test host (`plugin_host.exe`) and
//!   what they need under Wine, for `tests/tests/windows.rs`.
//!
//! On Windows itself nothing here is needed: `cargo xtask install` builds natively.

use std::path::{Path, PathBuf};
use std::process::Command;

use nice_plug_xtask::Result;

use crate::setup::{
    cargo, fetch_runtime_for, flavor_arg, run, TestSetup, BUNDLE_NAME, PLUGIN_PACKAGE,
    TEST_BUILD_ARGS,
};
use crate::tools::{apt_install, copy_recursively, python};

/// The Rust target: MinGW-w64's ABI, which Debian's linker and Wine run.
pub const TARGET: &str = "x86_64-pc-windows-gnu";
/// Where the cross build, the bundles, the zip and the test folder go.
const OUT_DIR: &str = "target/windows";
/// Debian's Rust toolchain with the standard library's source (rustup cannot add targets
/// offline, and `-Zbuild-std` needs the source), and the MinGW-w64 linker.
const BUILD_PACKAGES: [&str; 4] = [
    "rustc-web",
    "cargo-web",
    "rust-web-src",
    "gcc-mingw-w64-x86-64",
];
/// Runs the tests.
const WINE_PACKAGES: [&str; 1] = ["wine64"];
/// Debian's `wine64` binary (the `wine` wrapper package is not needed).
const WINE: &str = "/usr/lib/wine/wine64";
/// Debian's toolchain; rustup's `rustc` comes first on the PATH, so it is named by path.
const DEBIAN_RUSTC: &str = "/usr/bin/rustc";
const DEBIAN_CARGO: &str = "/usr/bin/cargo";
/// Where `-Zbuild-std` looks for the standard library's source, below rustc's sysroot (`/usr`).
const BUILD_STD_SOURCE: &str = "/usr/lib/rustlib/src/rust";
/// The Wine-only stand-in for `bcryptprimitives.dll` (see the C file).
const PRNG_SHIM_SOURCE: &str = "xtask/windows/bcryptprimitives.c";

/// What the cross build made.
pub struct WindowsBuild {
    /// `stemflow.exe`.
    pub cli: PathBuf,
    /// The plugin DLL (`stemflow.dll`), the binary of both bundles.
    pub plugin: PathBuf,
    /// The Windows build of the CLAP test host (`tests/tests/plugin_host.rs`).
    pub test_host: PathBuf,
}

/// `cargo xtask windows`: installs what is missing, cross-builds, bundles and packs the zip;
/// with `--test`, runs the Wine tests too.
pub fn windows(args: &[String]) -> Result<()> {
    let flavor = flavor_arg(args).map(|f| {
        if args.iter().any(|a| a.starts_with("--flavor")) {
            f
        } else {
            "directml".into()
        }
    })?;
    let should_test = args.iter().any(|a| a == "--test");
    let build = build()?;
    let out = Path::new(OUT_DIR);
    let (clap, vst3) = bundle(&build.plugin, &out.join("bundled"))?;
    let runtime = fetch_runtime_for(
        &flavor,
        "windows",
        "x86_64",
        &out.join("runtime").join(&flavor),
    )?;
    let zip = pack(&build, &clap, &vst3, runtime.parent().unwrap_or(out))?;
    println!("CLAP: {}", clap.display());
    println!("VST3: {}", vst3.display());
    println!(
        "Release zip ({} MB, ONNX Runtime '{flavor}'): {}",
        std::fs::metadata(&zip)?.len() / 1_000_000,
        zip.display()
    );
    if should_test {
        let setup = TestSetup::prepare()?;
        test(&setup, &build)?;
    }
    Ok(())
}

/// Installs Debian's packages the cross build needs and links the standard library's source
/// where `-Zbuild-std` looks. Linux only.
fn ensure_toolchain() -> Result<()> {
    if !cfg!(target_os = "linux") {
        anyhow::bail!(
            "`cargo xtask windows` cross-builds on Debian; on Windows run `cargo xtask install`"
        );
    }
    let has_linker = Command::new(linker()).arg("--version").output().is_ok();
    if !(Path::new(DEBIAN_CARGO).is_file() && Path::new(DEBIAN_RUSTC).is_file() && has_linker) {
        eprintln!("xtask: installing Debian's Rust toolchain and MinGW-w64 for the Windows build");
        apt_install(&BUILD_PACKAGES)?;
    }
    let version =
        String::from_utf8_lossy(&Command::new(DEBIAN_RUSTC).arg("--version").output()?.stdout)
            .split_whitespace()
            .nth(1)
            .map(str::to_owned)
            .ok_or_else(|| anyhow::anyhow!("{DEBIAN_RUSTC} --version said no version"))?;
    let source = PathBuf::from(format!("/usr/src/rustc-{version}"));
    if !source.join("library/std").is_dir() {
        anyhow::bail!(
            "{} is missing: Debian's rust-web-src must match rustc {version}",
            source.display()
        );
    }
    let link = Path::new(BUILD_STD_SOURCE);
    if std::fs::read_link(link).ok().as_deref() != Some(source.as_path()) {
        eprintln!("xtask: linking {} -> {}", link.display(), source.display());
        crate::tools::as_root(&["mkdir", "-p", "/usr/lib/rustlib/src"])?;
        crate::tools::as_root(&["ln", "-sfn", &source.to_string_lossy(), BUILD_STD_SOURCE])?;
    }
    Ok(())
}

fn linker() -> &'static str {
    "x86_64-w64-mingw32-gcc"
}

/// Debian's cargo for the Windows target, building the standard library too.
fn cross_cargo(subcommand: &str) -> Command {
    let mut command = Command::new(DEBIAN_CARGO);
    command
        .arg(subcommand)
        .args([
            "--release",
            "-Zbuild-std=std,panic_abort",
            "--target",
            TARGET,
        ])
        .env("RUSTC", DEBIAN_RUSTC)
        // `-Zbuild-std` is unstable; Debian's stable toolchain allows it with this.
        .env("RUSTC_BOOTSTRAP", "1")
        .env("CARGO_TARGET_DIR", OUT_DIR)
        .env("CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER", linker())
        // rustup's variables would point Debian's cargo at rustup's toolchain.
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("CARGO");
    command
}

/// Cross-builds the CLI, the plugin and the CLAP test host (release builds) in one cargo run:
/// built apart, the test host's dev-dependencies change features shared with the others (`syn`'s,
/// so `serde`'s, …) and everything would be compiled twice.
pub fn build() -> Result<WindowsBuild> {
    ensure_toolchain()?;
    let start = std::time::Instant::now();
    let command_line = "cargo build --release --target x86_64-pc-windows-gnu (the CLI, the \
                        plugin and the test host)";
    eprintln!("xtask: running {command_line}");
    let output = cross_cargo("build")
        .args([
            "-p",
            "stemflow-cli",
            "-p",
            PLUGIN_PACKAGE,
            "-p",
            "stemflow-host-tests",
        ])
        .args(["--bin", "stemflow", "--lib", "--test", "plugin_host"])
        .arg("--message-format=json-render-diagnostics")
        .stderr(std::process::Stdio::inherit())
        .output()?;
    if !output.status.success() {
        anyhow::bail!("{command_line} failed with {}", output.status);
    }
    // The test host is a test binary, named with a hash: its path comes from cargo.
    let test_host = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "plugin_host")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .ok_or_else(|| anyhow::anyhow!("cargo built no Windows plugin_host test binary"))?;
    eprintln!(
        "xtask: the Windows build took {:.0} s",
        start.elapsed().as_secs_f64()
    );
    let release = Path::new(OUT_DIR).join(TARGET).join("release");
    Ok(WindowsBuild {
        cli: release.join("stemflow.exe"),
        plugin: release.join(format!("{PLUGIN_PACKAGE}.dll")),
        test_host,
    })
}

/// Lays the plugin DLL out as `Stemflow.clap` and a VST3 bundle in `folder`.
fn bundle(plugin: &Path, folder: &Path) -> Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(folder)?;
    let clap = folder.join(format!("{BUNDLE_NAME}.clap"));
    std::fs::copy(plugin, &clap)?;
    let vst3 = folder.join(format!("{BUNDLE_NAME}.vst3"));
    let binary_dir = vst3.join("Contents/x86_64-win");
    std::fs::create_dir_all(&binary_dir)?;
    std::fs::copy(plugin, binary_dir.join(format!("{BUNDLE_NAME}.vst3")))?;
    Ok((clap, vst3))
}

/// What a Windows user reads first in the zip.
const ZIP_README: &str = "Stemflow for Windows (x86-64)\r
\r
CLAP\\Stemflow\\  copy the folder into C:\\Program Files\\Common Files\\CLAP\\\r
VST3\\Stemflow.vst3\\  copy the folder into C:\\Program Files\\Common Files\\VST3\\\r
stemflow\\  the command-line tool: stemflow.exe separate song.wav\r
\r
ONNX Runtime (onnxruntime.dll, with DirectML.dll for GPUs) sits beside each binary; keep it\r
there. The plugin's Device button (or stemflow separate --device directml:0) picks a DirectX 12\r
GPU; Auto picks it when it works and falls back to the CPU with a warning when not. ONNX Runtime\r
needs the Microsoft Visual C++ Redistributable (x64), which most DAWs install.\r
Models go in %APPDATA%\\Stemflow\\models. More: https://stemflow.audio and docs/windows.md.\r
";

/// Packs the release zip: the CLAP in its own folder (CLAP hosts search folders), the VST3
/// bundle, the CLI, and ONNX Runtime's DLLs from `runtime_dir` beside each binary.
fn pack(build: &WindowsBuild, clap: &Path, vst3: &Path, runtime_dir: &Path) -> Result<PathBuf> {
    let staging = Path::new(OUT_DIR).join("zip");
    if staging.exists() {
        std::fs::remove_dir_all(&staging)?;
    }
    let clap_dir = staging.join("CLAP").join(BUNDLE_NAME);
    let vst3_bundle = staging.join("VST3").join(format!("{BUNDLE_NAME}.vst3"));
    let cli_dir = staging.join("stemflow");
    std::fs::create_dir_all(&clap_dir)?;
    std::fs::create_dir_all(&cli_dir)?;
    std::fs::copy(clap, clap_dir.join(format!("{BUNDLE_NAME}.clap")))?;
    copy_recursively(vst3, &vst3_bundle)?;
    std::fs::copy(&build.cli, cli_dir.join("stemflow.exe"))?;
    // The line tables (two thirds of each binary) serve MinGW's debuggers, not Windows users.
    let binaries = [
        clap_dir.join(format!("{BUNDLE_NAME}.clap")),
        vst3_bundle.join(format!("Contents/x86_64-win/{BUNDLE_NAME}.vst3")),
        cli_dir.join("stemflow.exe"),
    ];
    run(Command::new("x86_64-w64-mingw32-strip")
        .arg("--strip-debug")
        .args(&binaries))?;
    for dir in [clap_dir, vst3_bundle.join("Contents/x86_64-win"), cli_dir] {
        copy_runtime(runtime_dir, &dir)?;
    }
    std::fs::write(staging.join("README.txt"), ZIP_README)?;
    let version = env!("CARGO_PKG_VERSION");
    let zip =
        std::fs::canonicalize(OUT_DIR)?.join(format!("Stemflow-{version}-windows-x86_64.zip"));
    let _ = std::fs::remove_file(&zip);
    run(Command::new(python()?)
        .args(["-c", ZIP_FOLDER_PY])
        .arg(&staging)
        .arg(&zip))?;
    Ok(zip)
}

/// Zips a folder (its contents at the zip's root), deflated, in a stable order.
const ZIP_FOLDER_PY: &str = r#"
import os, sys, zipfile
root, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
    for folder, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(folder, name)
            z.write(path, os.path.relpath(path, root))
"#;

/// Copies ONNX Runtime's DLLs (and `DirectML.dll`) from `runtime_dir` into `dir`.
fn copy_runtime(runtime_dir: &Path, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    for entry in std::fs::read_dir(runtime_dir)? {
        let path = entry?.path();
        if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("dll"))
        {
            if let Some(name) = path.file_name() {
                std::fs::copy(&path, dir.join(name))?;
            }
        }
    }
    Ok(())
}

/// Installs Wine when missing and makes the tests' own prefix (`target/windows/wine-prefix`).
/// Returns the prefix.
pub fn ensure_wine() -> Result<PathBuf> {
    if !Path::new(WINE).is_file() {
        eprintln!("xtask: installing Debian's Wine for the Windows tests");
        apt_install(&WINE_PACKAGES)?;
    }
    let prefix = std::fs::canonicalize(".")?
        .join(OUT_DIR)
        .join("wine-prefix");
    if !prefix.join("system.reg").is_file() {
        run(Command::new(WINE)
            .args(["wineboot", "--init"])
            .env("WINEPREFIX", &prefix)
            .env("WINEDEBUG", "-all")
            // No Mono or Gecko installers: nothing here is .NET or HTML.
            .env("WINEDLLOVERRIDES", "mscoree,mshtml="))?;
    }
    Ok(prefix)
}

/// Set to skip the Windows tests under Wine knowingly in `cargo xtask test` (announced).
pub const SKIP_WINDOWS_TEST_ENV: &str = "STEMFLOW_SKIP_WINDOWS_TEST";

/// Everything `tests/tests/windows.rs` needs: the filled test folder and the Wine prefix.
pub struct WineTests {
    folder: PathBuf,
    prefix: PathBuf,
}

impl WineTests {
    /// For `cargo xtask test`: `None` (said loudly) when Wine is absent or the tests are skipped
    /// knowingly; else the cross build and the test folder.
    pub fn for_test_run() -> Result<Option<Self>> {
        if std::env::var_os(SKIP_WINDOWS_TEST_ENV).is_some() {
            eprintln!("xtask: SKIPPING the Windows tests under Wine because {SKIP_WINDOWS_TEST_ENV} is set");
            return Ok(None);
        }
        if !Path::new(WINE).is_file() {
            return Ok(None);
        }
        let build = build()?;
        Self::prepare(&build).map(Some)
    }

    /// The warning `cargo xtask test` prints, at its start and end, when Wine is absent.
    pub fn absent_warning() -> Option<String> {
        (!Path::new(WINE).is_file() && std::env::var_os(SKIP_WINDOWS_TEST_ENV).is_none()).then(
            || {
                format!(
                    "xtask: WARNING: Wine ({WINE}) is not installed, so the Windows build is NOT \
                 tested (apt-get install wine64, or `cargo xtask windows --test`; set \
                 {SKIP_WINDOWS_TEST_ENV}=1 to skip knowingly)"
                )
            },
        )
    }

    /// Fills `target/windows/test/` from `build` and makes the Wine prefix.
    pub fn prepare(build: &WindowsBuild) -> Result<Self> {
        let prefix = ensure_wine()?;
        let folder = Path::new(OUT_DIR).join("test");
        if folder.exists() {
            std::fs::remove_dir_all(&folder)?;
        }
        std::fs::create_dir_all(&folder)?;
        std::fs::copy(&build.cli, folder.join("stemflow.exe"))?;
        std::fs::copy(&build.plugin, folder.join(format!("{BUNDLE_NAME}.clap")))?;
        std::fs::copy(&build.test_host, folder.join("plugin_host.exe"))?;
        // ONNX Runtime's Windows CPU build (the version the Linux tests use) beside the
        // executables, the DirectML build in its own folder.
        let out = Path::new(OUT_DIR);
        let cpu = fetch_runtime_for("cpu", "windows", "x86_64", &out.join("runtime/cpu"))?;
        copy_runtime(cpu.parent().unwrap_or(out), &folder)?;
        let directml = fetch_runtime_for(
            "directml",
            "windows",
            "x86_64",
            &out.join("runtime/directml"),
        )?;
        copy_runtime(directml.parent().unwrap_or(out), &folder.join("directml"))?;
        // Rust's standard library imports ProcessPrng, which Wine 8 lacks: a stand-in, for Wine
        // only (never in the zip).
        run(Command::new(linker())
            .args(["-O2", "-shared", "-o"])
            .arg(folder.join("bcryptprimitives.dll"))
            .arg(PRNG_SHIM_SOURCE)
            .arg("-ladvapi32"))?;
        Ok(Self {
            folder: std::fs::canonicalize(&folder)?,
            prefix,
        })
    }

    /// Points a test command at the Windows build and Wine.
    pub fn environment<'a>(&self, command: &'a mut Command) -> &'a mut Command {
        command
            .env("STEMFLOW_TEST_WINDOWS_DIR", &self.folder)
            .env("STEMFLOW_TEST_WINE", WINE)
            .env("WINEPREFIX", &self.prefix)
    }
}

/// Runs `tests/tests/windows.rs` against `build` and the Linux test build of `setup`.
fn test(setup: &TestSetup, build: &WindowsBuild) -> Result<()> {
    let wine_tests = WineTests::prepare(build)?;
    let start = std::time::Instant::now();
    let mut test = cargo();
    test.arg("test")
        .args(TEST_BUILD_ARGS)
        .args(["--test", "windows"]);
    let result = run(
        wine_tests.environment(setup.environment(&mut test, "target/stemflow-test/user-data")?)
    );
    eprintln!(
        "xtask: the Windows tests under Wine took {:.0} s",
        start.elapsed().as_secs_f64()
    );
    result
}
