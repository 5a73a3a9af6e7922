//! `cargo xtask fuzz-parsers [--seconds N] [TARGET…]`: coverage-guided fuzzing of the parsers
//! (`fuzz/`, issue 45) with libFuzzer, through `libfuzzer-sys` (no other tool: the
//! instrumentation flags are stable rustc flags, and libFuzzer's C++ is compiled by its build
//! script). `cargo xtask test` runs every target for [`SHORT_RUN_SECONDS`] after the tests.
//!
//! The instrumented build has its own target folder (`target/fuzz-parsers/`), so it never
//! invalidates the ordinary one. Each target keeps its corpus in
//! `target/fuzz-parsers/corpus/<target>/`, which grows from run to run; its seeds (fixtures and
//! generated files) are written to `…/seeds/<target>/` at each start. An input that crashes a
//! target is saved as `…/artifacts/<target>/crash-…` and fails the run: minimise it, copy it to
//! `fuzz/regressions/<target>/` named after the bug, and fix the parser (the regression test
//! replays it in every test run).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use nice_plug_xtask::Result;

use crate::setup::{cargo, run};

/// Seconds each target runs in `cargo xtask test`.
pub(crate) const SHORT_RUN_SECONDS: u64 = 5;
/// Where the instrumented build and the corpora live.
const FUZZ_DIR: &str = "target/fuzz-parsers";
/// The fuzz crate's targets, as `stemflow_fuzz::Target::name` spells them, with libFuzzer's
/// `-max_len` for each (`Target::max_len_bytes`; repeated here so that xtask does not build the
/// fuzz crate's dependencies).
const TARGETS: [(&str, usize); 8] = [
    ("torch", 64 << 10),
    ("numpy-dict", 32 << 10),
    ("zip", 64 << 10),
    ("onnx", 32 << 10),
    ("msst-yaml", 8 << 10),
    ("audio", 64 << 10),
    ("manifest", 8 << 10),
    ("plugin-state", 8 << 10),
];
/// rustc flags for libFuzzer's coverage feedback (what cargo-fuzz passes, less the sanitizer:
/// the parsers are safe Rust, and AddressSanitizer needs a nightly compiler).
const INSTRUMENTATION_FLAGS: &str = "-Cpasses=sancov-module \
     -Cllvm-args=-sanitizer-coverage-level=4 \
     -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
     -Cllvm-args=-sanitizer-coverage-pc-table \
     -Cllvm-args=-sanitizer-coverage-trace-compares \
     --cfg fuzzing";

/// What one target's run did.
struct Outcome {
    target: &'static str,
    executions: u64,
    corpus_inputs: u64,
    crash: Option<PathBuf>,
}

/// `cargo xtask fuzz-parsers [--seconds N] [TARGET…]`: every target (or those named) for `N`
/// seconds each (default 60), one after another.
pub(crate) fn fuzz_parsers(args: &[String]) -> Result<()> {
    let mut seconds = 60;
    let mut chosen = Vec::new();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--seconds" => {
                seconds = args
                    .next()
                    .and_then(|value| value.parse().ok())
                    .ok_or_else(|| anyhow::anyhow!("--seconds takes a number"))?;
            }
            name => match TARGETS.iter().find(|(target, _)| *target == name) {
                Some(&target) => chosen.push(target),
                None => anyhow::bail!(
                    "unknown fuzz target `{name}`; the targets are {}",
                    TARGETS.map(|(name, _)| name).join(", ")
                ),
            },
        }
    }
    if chosen.is_empty() {
        chosen = TARGETS.to_vec();
    }
    run_targets(&chosen, seconds)
}

/// Every target for [`SHORT_RUN_SECONDS`] (`cargo xtask test`).
pub(crate) fn short_run() -> Result<()> {
    run_targets(&TARGETS, SHORT_RUN_SECONDS)
}

fn run_targets(targets: &[(&'static str, usize)], seconds: u64) -> Result<()> {
    let binary = build()?;
    let mut outcomes = Vec::new();
    for &(target, max_len) in targets {
        outcomes.push(run_target(&binary, target, max_len, seconds)?);
    }
    eprintln!("xtask: fuzz-parsers, {seconds} s a target:");
    for outcome in &outcomes {
        eprintln!(
            "xtask:   {:<13} {:>10} executions, corpus {:>5} inputs{}",
            outcome.target,
            outcome.executions,
            outcome.corpus_inputs,
            match &outcome.crash {
                Some(path) => format!(", CRASHED: {}", path.display()),
                None => String::new(),
            }
        );
    }
    let crashed: Vec<&str> = outcomes
        .iter()
        .filter(|outcome| outcome.crash.is_some())
        .map(|outcome| outcome.target)
        .collect();
    if !crashed.is_empty() {
        anyhow::bail!(
            "fuzzing found inputs that crash {}: see the artefacts above, and fuzz/regressions/README.md \
             for turning them into regression tests",
            crashed.join(", ")
        );
    }
    Ok(())
}

/// Builds the instrumented `fuzz-parsers` binary; returns its path.
fn build() -> Result<PathBuf> {
    let host = host_triple()?;
    run(cargo()
        .args([
            "build",
            "--release",
            "-p",
            "stemflow-fuzz",
            "--features",
            "libfuzzer",
            "--bin",
            "fuzz-parsers",
            "--target",
            &host,
        ])
        // `--target` keeps the flags off build scripts and proc-macros.
        .env("RUSTFLAGS", INSTRUMENTATION_FLAGS)
        .env("CARGO_TARGET_DIR", FUZZ_DIR)
        // Checks the parsers would have in a debug build, on optimised code; no LTO, which
        // only lengthens the link.
        .env("CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS", "true")
        .env("CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS", "true")
        .env("CARGO_PROFILE_RELEASE_LTO", "false")
        .env("CARGO_PROFILE_RELEASE_DEBUG", "line-tables-only"))?;
    Ok(Path::new(FUZZ_DIR)
        .join(host)
        .join("release")
        .join(format!("fuzz-parsers{}", std::env::consts::EXE_SUFFIX)))
}

/// The compiler's host triple (`rustc -vV`).
fn host_triple() -> Result<String> {
    let output = Command::new("rustc").arg("-vV").output()?;
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("host: ").map(str::to_owned))
        .ok_or_else(|| anyhow::anyhow!("rustc -vV names no host"))
}

/// Runs `target` for `seconds`; its output goes to `…/logs/<target>.log`.
fn run_target(
    binary: &Path,
    target: &'static str,
    max_len: usize,
    seconds: u64,
) -> Result<Outcome> {
    let folder = Path::new(FUZZ_DIR);
    let corpus = folder.join("corpus").join(target);
    let seeds = folder.join("seeds").join(target);
    let artifacts = folder.join("artifacts").join(target);
    let logs = folder.join("logs");
    for dir in [&corpus, &artifacts, &logs] {
        std::fs::create_dir_all(dir)?;
    }
    if seeds.exists() {
        std::fs::remove_dir_all(&seeds)?;
    }
    let log_path = logs.join(format!("{target}.log"));
    let log = std::fs::File::create(&log_path)?;
    eprintln!(
        "xtask: fuzzing {target} for {seconds} s (log: {})",
        log_path.display()
    );
    let status = Command::new(binary)
        .env("STEMFLOW_FUZZ_TARGET", target)
        .env("STEMFLOW_FUZZ_SEEDS", &seeds)
        .arg(format!("-max_total_time={seconds}"))
        .arg(format!("-max_len={max_len}"))
        // A parser that takes seconds on a 64 KiB input hangs; one that needs more memory than
        // its budget allows leaks or is unbounded.
        .arg("-timeout=10")
        .arg("-rss_limit_mb=2048")
        .arg("-malloc_limit_mb=512")
        .arg("-print_final_stats=1")
        .arg(format!("-artifact_prefix={}/", artifacts.display()))
        .arg(&corpus)
        .arg(&seeds)
        .stdout(Stdio::null())
        .stderr(log)
        .status()?;
    let text = std::fs::read_to_string(&log_path)?;
    let stat = |name: &str| {
        text.lines()
            .filter_map(|line| line.strip_prefix(name))
            .filter_map(|rest| rest.trim_start_matches(':').trim().parse::<u64>().ok())
            .next_back()
            .unwrap_or(0)
    };
    let crash = text
        .lines()
        .filter_map(|line| line.split("Test unit written to ").nth(1))
        .map(|path| PathBuf::from(path.trim()))
        .next_back();
    if !status.success() && crash.is_none() {
        anyhow::bail!(
            "fuzzing {target} failed ({status}) without saving an input: see {}",
            log_path.display()
        );
    }
    Ok(Outcome {
        target,
        executions: stat("stat::number_of_executed_units"),
        corpus_inputs: std::fs::read_dir(&corpus)?.count() as u64,
        crash,
    })
}
