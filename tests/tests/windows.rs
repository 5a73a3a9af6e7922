//! The Windows build under Wine, against the Linux build: `stemflow.exe separate` (built-in
//! separator, and a Spleeter graph on ONNX Runtime's Windows CPU build), `stemflow.exe devices`,
//! the user data folder, and the Windows build of the CLAP test host (`plugin_host.exe`) loading
//! `Stemflow.clap` (a DLL) with the same assertions as on Linux.
//!
//! `cargo xtask windows --test` builds the folder these tests read and runs them; they need
//! `STEMFLOW_TEST_WINDOWS_DIR` (that folder), `STEMFLOW_TEST_WINE` (the `wine64` binary, with
//! `WINEPREFIX` set) and the Linux artefacts of `cargo xtask test` (`STEMFLOW_TEST_CLI`,
//! `STEMFLOW_FIXTURES_DIR`, `STEMFLOW_ORT_LIB`). Without them they fail: they never skip. Every
//! test's name starts with `wine_`, which `cargo xtask test` skips by name, loudly, when it does
//! not run them.

use std::path::{Path, PathBuf};
use std::process::Command;

use stemflow_host_tests::compare::max_abs_diff;
use stemflow_host_tests::{cli_path, run_ok as run, signal, STEMS};
use stemflow_kit::testing::{read_wav, write_wav};

const SAMPLE_RATE_HZ: u32 = 44_100;

/// What the Windows build may differ from the Linux build by, per sample. The two builds run
/// the same Rust code, but their maths libraries (`sin`, `exp`, … from MinGW's CRT and glibc)
/// and ONNX Runtime builds (MSVC and GCC) round differently in the last bits.
const WINDOWS_VS_LINUX_TOLERANCE: f32 = 1e-4;

/// The folder `cargo xtask windows --test` fills: the Windows executables, `Stemflow.clap`, the
/// Wine-only `bcryptprimitives.dll` shim, ONNX Runtime's Windows CPU build beside them and its
/// DirectML build in `directml/`.
fn windows_dir() -> PathBuf {
    stemflow_kit::testing::dir_from_env(
        "STEMFLOW_TEST_WINDOWS_DIR",
        "stemflow.exe",
        "run these tests with `cargo xtask windows --test`",
    )
}

/// The path as a Windows program under Wine sees it (the Unix root is drive `Z:`).
fn wine_path(path: &Path) -> String {
    let absolute = std::path::absolute(path).expect("an absolute path");
    format!("Z:{}", absolute.display()).replace('/', "\\")
}

/// `wine64 program args…` with Wine's own chatter off, in the Windows folder.
fn wine(program: &str, args: &[&str]) -> Command {
    let wine = std::env::var_os("STEMFLOW_TEST_WINE").unwrap_or_else(|| {
        panic!("STEMFLOW_TEST_WINE is not set: run `cargo xtask windows --test`")
    });
    assert!(
        std::env::var_os("WINEPREFIX").is_some(),
        "WINEPREFIX is not set: the tests use their own Wine prefix, never ~/.wine"
    );
    let dir = windows_dir();
    let mut command = Command::new(wine);
    command
        .arg(dir.join(program))
        .args(args)
        .current_dir(&dir)
        .env("WINEDEBUG", "-all")
        .env_remove("STEMFLOW_ORT_LIB")
        .env_remove("STEMFLOW_TEST_CLAP")
        .env_remove("STEMFLOW_TEST_CLI")
        .env_remove("STEMFLOW_DATA_DIR");
    command
}

/// A fresh scratch folder for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("windows")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch folder");
    dir
}

/// Separates a test song with `model` on Linux and on Windows (ONNX Runtime's CPU builds of the
/// same version for both) and returns the largest difference over all stems and channels.
fn windows_stems_against_linux(name: &str, model: &str) -> f32 {
    windows_stems_against_linux_with(name, model, &[], None).0
}

/// [`windows_stems_against_linux`] with more arguments for `stemflow.exe` and another ONNX
/// Runtime library for it (a path in the Windows folder); also returns its stderr.
fn windows_stems_against_linux_with(
    name: &str,
    model: &str,
    windows_args: &[&str],
    windows_runtime: Option<&str>,
) -> (f32, String) {
    let dir = scratch(name);
    let song = dir.join("song.wav");
    write_wav(
        &song,
        SAMPLE_RATE_HZ,
        &signal::test_song(SAMPLE_RATE_HZ, 3.0, 7),
        32,
        true,
    );
    let linux_out = dir.join("linux");
    let windows_out = dir.join("windows");
    let linux_data = dir.join("linux-data");
    let windows_data = dir.join("windows-data");

    let cli = cli_path();
    run(
        "stemflow separate (Linux)",
        Command::new(&cli)
            .args(["separate", "--quiet", "--model", model, "-o"])
            .arg(&linux_out)
            .arg(&song)
            .env("STEMFLOW_DATA_DIR", &linux_data),
    );
    let windows_model = if model.ends_with(".onnx") {
        wine_path(Path::new(model))
    } else {
        model.to_owned()
    };
    let windows_out_arg = wine_path(&windows_out);
    let song_arg = wine_path(&song);
    let mut args = vec![
        "separate",
        "--quiet",
        "--model",
        &windows_model,
        "-o",
        &windows_out_arg,
        &song_arg,
    ];
    args.extend(windows_args);
    let mut command = wine("stemflow.exe", &args);
    command.env("STEMFLOW_DATA_DIR", wine_path(&windows_data));
    if let Some(runtime) = windows_runtime {
        command.env("STEMFLOW_ORT_LIB", wine_path(&windows_dir().join(runtime)));
    }
    let windows_stderr =
        String::from_utf8_lossy(&run("stemflow.exe separate (Wine)", &mut command).stderr)
            .into_owned();

    let mut largest = 0.0f32;
    for stem in STEMS {
        let linux_file = linux_out.join("song").join(format!("{stem}.wav"));
        let windows_file = windows_out.join("song").join(format!("{stem}.wav"));
        if !linux_file.is_file() {
            // Two-stem models write vocals and accompaniment only; both builds must agree.
            assert!(!windows_file.is_file(), "{stem}: only Windows wrote it");
            continue;
        }
        let (linux_spec, linux) = read_wav(&linux_file);
        let (windows_spec, windows) = read_wav(&windows_file);
        assert_eq!(linux_spec, windows_spec, "{stem}.wav format");
        assert_eq!(linux.len(), windows.len(), "{stem}.wav channels");
        for (c, (l, w)) in linux.iter().zip(&windows).enumerate() {
            assert_eq!(l.len(), w.len(), "{stem}.wav channel {c} length");
            assert!(
                l.iter().any(|v| v.abs() > 1e-3),
                "{stem}.wav channel {c} is silent on Linux"
            );
            let (diff, at) = max_abs_diff(l, w, 0..l.len());
            assert!(
                diff <= WINDOWS_VS_LINUX_TOLERANCE,
                "{model} {stem}.wav channel {c}: Windows differs from Linux by {diff:e} at \
                 sample {at}"
            );
            largest = largest.max(diff);
        }
    }
    println!("{model}: the largest difference between Windows and Linux stems is {largest:e}");
    (largest, windows_stderr)
}

#[test]
fn wine_builtin_stems_are_the_linux_stems() {
    windows_stems_against_linux("builtin", "builtin");
}

#[test]
fn wine_spleeter_on_onnx_runtime_for_windows_gives_the_linux_stems() {
    let fixtures = PathBuf::from(
        std::env::var_os("STEMFLOW_FIXTURES_DIR").expect("STEMFLOW_FIXTURES_DIR is not set"),
    );
    let model = fixtures.join("spleeter_test.onnx");
    assert!(model.is_file(), "{} is missing", model.display());
    // The Linux CLI loads the Linux library of `cargo xtask test`; the Windows one finds the
    // Windows CPU build next to stemflow.exe.
    windows_stems_against_linux("spleeter", model.to_str().expect("a UTF-8 path"));
}

/// ONNX Runtime's DirectML build under Wine: Wine's Direct3D 12 (vkd3d) has no usable device
/// here (with no display, DXGI does not start; with Xvfb and Mesa's lavapipe, DirectML starts
/// and fails while initialising the session, docs/windows.md). `stemflow devices` lists
/// `directml:0` with the reason, and a run asked for it falls back to the CPU with the warning,
/// giving the Linux CPU stems. Should DirectML become usable, the run must be on it, silently.
#[test]
fn wine_directml_is_discovered_and_falls_back_to_the_cpu() {
    let runtime = "directml/onnxruntime.dll";
    let output = run(
        "stemflow.exe devices --json (DirectML build)",
        wine("stemflow.exe", &["devices", "--json"])
            .env("STEMFLOW_ORT_LIB", wine_path(&windows_dir().join(runtime))),
    );
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(json["runtime"]["loaded"], true, "{json}");
    assert_eq!(json["runtime"]["version"], "1.24.4", "{json}");
    let devices = json["devices"].as_array().expect("devices");
    let directml = devices
        .iter()
        .find(|d| d["id"] == "directml:0")
        .unwrap_or_else(|| panic!("no directml:0 listed: {json}"));
    assert_eq!(directml["provider"], "directml", "{json}");
    let is_usable = directml["status"]["state"] == "usable";
    if !is_usable {
        let reason = directml["status"]["reason"].as_str().unwrap_or("");
        assert!(
            !reason.is_empty(),
            "directml:0 is unusable without a reason: {json}"
        );
    }

    let fixtures = PathBuf::from(
        std::env::var_os("STEMFLOW_FIXTURES_DIR").expect("STEMFLOW_FIXTURES_DIR is not set"),
    );
    let model = fixtures.join("spleeter_test.onnx");
    let (_, stderr) = windows_stems_against_linux_with(
        "directml",
        model.to_str().expect("a UTF-8 path"),
        &["--device", "directml:0"],
        Some(runtime),
    );
    let has_warning = stderr.contains("warning: directml:0 failed");
    assert_eq!(
        has_warning, !is_usable,
        "usable: {is_usable}; stderr:\n{stderr}"
    );
}

#[test]
fn wine_devices_load_the_runtime_next_to_the_exe() {
    let output = run(
        "stemflow.exe devices --json",
        &mut wine("stemflow.exe", &["devices", "--json"]),
    );
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(json["runtime"]["loaded"], true, "{json}");
    assert_eq!(
        json["runtime"]["source"], "next to the Stemflow binary",
        "{json}"
    );
    let library = json["runtime"]["library"].as_str().expect("a library path");
    assert!(library.ends_with("\\onnxruntime.dll"), "{library}");
    assert!(
        !library.starts_with("\\\\?\\"),
        "a verbatim path: {library}"
    );
    assert_eq!(json["runtime"]["version"], "1.31.0", "{json}");
    let devices = json["devices"].as_array().expect("devices");
    assert!(
        devices
            .iter()
            .any(|d| d["id"] == "cpu" && d["status"]["state"] == "usable"),
        "{json}"
    );
    assert_eq!(json["auto"], "cpu", "{json}");
}

#[test]
fn wine_user_folders_are_under_appdata() {
    let output = run(
        "stemflow.exe models",
        &mut wine("stemflow.exe", &["models"]),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let folder = stdout
        .lines()
        .find_map(|l| l.strip_prefix("Models folders: "))
        .unwrap_or_else(|| panic!("no models folder in:\n{stdout}"));
    // %APPDATA% is C:\users\<user>\AppData\Roaming in a Wine prefix.
    assert!(
        folder.starts_with("C:\\users\\")
            && folder.ends_with("\\AppData\\Roaming\\Stemflow\\models"),
        "{folder}"
    );
}

/// Among the Linux plugin-host tests that `plugin_host.exe` runs (all of them) against the
/// Windows `Stemflow.clap`: offline rendering, state, latency and the CLI against the plugin.
const HOSTED_TESTS: [&str; 8] = [
    "bundle_exposes_stemflow",
    "default_port_config_has_named_stereo_ports",
    "impulse_peak_lands_at_reported_latency",
    "offline_render_is_bit_identical_across_block_sizes",
    "stems_sum_to_the_delayed_input",
    "state_round_trips_into_a_new_instance",
    "garbage_state_leaves_a_working_plugin",
    "cli_stems_are_the_plugins_offline_stems",
];

/// `tests/tests/plugin_host.rs`, built for Windows, with the same assertions as on Linux (its
/// 24 tests took 4 s under Wine here).
#[test]
fn wine_test_host_loads_the_clap_dll() {
    let dir = windows_dir();
    let output = run(
        "plugin_host.exe (Wine)",
        wine("plugin_host.exe", &["--test-threads=2"])
            .env("STEMFLOW_TEST_CLAP", wine_path(&dir.join("Stemflow.clap")))
            .env("STEMFLOW_TEST_CLI", wine_path(&dir.join("stemflow.exe"))),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let num_passed = stdout.lines().filter(|l| l.ends_with(" ... ok")).count();
    let expected = format!("test result: ok. {num_passed} passed; 0 failed; 0 ignored");
    assert!(
        stdout.contains(&expected),
        "expected `{expected}` in:\n{stdout}"
    );
    for test in HOSTED_TESTS {
        assert!(
            stdout.contains(&format!("test {test} ... ok")),
            "{test}:\n{stdout}"
        );
    }
    println!("plugin_host.exe under Wine: {num_passed} tests passed");
}
