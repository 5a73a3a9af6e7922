//! The plugin fuzzer for about a minute (`src/fuzz/`, `src/bin/fuzz.rs`) on the test build of
//! the CLAP and the VST3, with fresh seeds each run: a failing seed is printed with the command
//! that replays it. The long run is `cargo xtask fuzz --minutes N`.

use std::process::Command;

use stemflow_host_tests::run_ok;

/// How long the run in `cargo xtask test` lasts.
const DEFAULT_MINUTES: &str = "1";

#[test]
fn a_minute_of_fuzzing_neither_crashes_nor_fails_the_plugin() {
    let minutes =
        std::env::var("STEMFLOW_TEST_FUZZ_MINUTES").unwrap_or_else(|_| DEFAULT_MINUTES.into());
    let output = run_ok(
        "the fuzzer",
        Command::new(env!("CARGO_BIN_EXE_fuzz")).args(["--minutes", &minutes]),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}");
    let summary = stdout
        .lines()
        .find(|l| l.contains(" seeds (") && l.contains(" failed"))
        .expect("the fuzzer prints a summary");
    let seeds: u64 = summary
        .trim_start_matches("fuzz: ")
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("the summary starts with the seed count");
    assert!(
        seeds >= 10,
        "only {seeds} seeds ran in {minutes} min: {summary}"
    );
}
