//! The plugin fuzzer's command line (see `stemflow_host_tests::fuzz` for what a seed does).
//!
//! - `fuzz --minutes M [--jobs J] [--first-seed S]`: runs seeds `S, S+1, …` (S from the clock
//!   unless given) in worker processes, J at a time, until M minutes have passed; a seed that
//!   fails, crashes its worker or hangs is printed with the command that replays it. Exit
//!   status 1 if any seed failed.
//! - `fuzz --seed S [--seed S2 …]`: replays seeds in this process, printing what each did.
//! - `fuzz --worker S…`: what the supervisor runs; one line per seed on stdout.
//!
//! The plugin is `$STEMFLOW_TEST_CLAP` (and `$STEMFLOW_TEST_VST3`); `cargo xtask fuzz` sets them.
//! To find which main-thread move a failing seed needs, replay it with some of them only:
//! `STEMFLOW_FUZZ_MOVES=save,load-corrupt cargo xtask fuzz --seed S` (names in `clap_seed.rs`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use stemflow_host_tests::fuzz::{run_seed, SeedReport, Target};

/// Seeds per worker process (a crash loses the worker, so batches stay small).
const SEEDS_PER_WORKER: usize = 6;
/// A seed running longer than this is a hang.
const SEED_TIMEOUT: Duration = Duration::from_secs(180);
/// Failures after which the run stops early.
const MAX_FAILURES: usize = 10;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("--worker") => worker(&args[1..]),
        Some("--seed") => replay(&args),
        _ => supervise(&args),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("fuzz: {error}");
            ExitCode::from(2)
        }
    }
}

fn target() -> Result<Target, String> {
    let scratch = std::env::temp_dir().join(format!("stemflow-fuzz-{}", std::process::id()));
    Target::from_env(&scratch)
}

fn parse_seed(text: &str) -> Result<u64, String> {
    text.parse().map_err(|e| format!("seed `{text}`: {e}"))
}

fn summary(report: &SeedReport) -> String {
    format!(
        "instances={} activations={} process_calls={} frames={} state_loads={}",
        report.instances,
        report.activations,
        report.process_calls,
        report.frames,
        report.state_loads
    )
}

/// Runs the given seeds here, one line each on stdout; a watchdog ends the process when a seed
/// hangs.
fn worker(seeds: &[String]) -> Result<bool, String> {
    let target = target()?;
    let (started_tx, started_rx) = mpsc::channel::<Option<u64>>();
    std::thread::spawn(move || {
        let mut current: Option<(u64, Instant)> = None;
        loop {
            match started_rx.recv_timeout(Duration::from_secs(1)) {
                Ok(Some(seed)) => current = Some((seed, Instant::now())),
                Ok(None) => current = None,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
            if let Some((seed, since)) = current {
                if since.elapsed() > SEED_TIMEOUT {
                    println!("hang {seed}");
                    let _ = std::io::stdout().flush();
                    std::process::exit(3);
                }
            }
        }
    });
    let mut all_ok = true;
    for seed in seeds {
        let seed = parse_seed(seed)?;
        println!("start {seed}");
        let _ = std::io::stdout().flush();
        let _ = started_tx.send(Some(seed));
        match run_seed(&target, seed) {
            Ok((format, report)) => println!("ok {seed} {format:?} {}", summary(&report)),
            Err((format, error)) => {
                all_ok = false;
                println!("fail {seed} {format:?} {}", error.replace('\n', " | "));
            }
        }
        let _ = std::io::stdout().flush();
        let _ = started_tx.send(None);
    }
    Ok(all_ok)
}

/// Replays seeds in this process.
fn replay(args: &[String]) -> Result<bool, String> {
    let target = target()?;
    let mut all_ok = true;
    let mut pairs = args.iter();
    while let Some(flag) = pairs.next() {
        if flag != "--seed" {
            return Err(format!("unexpected argument `{flag}`"));
        }
        let seed = parse_seed(pairs.next().ok_or("--seed needs a number")?)?;
        let started = Instant::now();
        match run_seed(&target, seed) {
            Ok((format, report)) => println!(
                "seed {seed} ({format:?}): ok in {:.1} s, {}",
                started.elapsed().as_secs_f64(),
                summary(&report)
            ),
            Err((format, error)) => {
                all_ok = false;
                println!("seed {seed} ({format:?}): FAILED: {error}");
            }
        }
    }
    Ok(all_ok)
}

/// One worker process's outcome.
struct WorkerEnd {
    /// `(seed, outcome line)` for every seed it finished.
    lines: Vec<String>,
    /// The seed it was running when it died, if it died.
    died_in: Option<u64>,
    /// Its exit status, as text.
    status: String,
    /// The end of its standard error.
    stderr_tail: String,
}

fn run_worker(seeds: &[u64]) -> Result<WorkerEnd, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut child = Command::new(exe)
        .arg("--worker")
        .args(seeds.iter().map(u64::to_string))
        // A crash report is the panic message, not pages of backtrace (replaying shows more).
        .env("RUST_BACKTRACE", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start a fuzz worker: {e}"))?;
    let mut stderr = child.stderr.take().ok_or("no worker stderr")?;
    let stderr_thread = std::thread::spawn(move || {
        // Only the end is kept: the plugin logs every state it refuses.
        let mut tail: Vec<u8> = Vec::new();
        let mut chunk = [0u8; 8192];
        while let Ok(n) = stderr.read(&mut chunk) {
            if n == 0 {
                break;
            }
            tail.extend_from_slice(&chunk[..n]);
            if tail.len() > 16_384 {
                tail.drain(..tail.len() - 8_192);
            }
        }
        String::from_utf8_lossy(&tail).into_owned()
    });
    let stdout = child.stdout.take().ok_or("no worker stdout")?;
    let mut lines = Vec::new();
    let mut running = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.map_err(|e| e.to_string())?;
        if let Some(seed) = line.strip_prefix("start ") {
            running = seed.trim().parse().ok();
        } else if line.starts_with("ok ") || line.starts_with("fail ") || line.starts_with("hang ")
        {
            if !line.starts_with("hang ") {
                running = None;
            }
            lines.push(line);
        }
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    let stderr_tail = stderr_thread.join().unwrap_or_default();
    let died_in = if status.code() == Some(0) || status.code() == Some(1) {
        None
    } else {
        running
    };
    Ok(WorkerEnd {
        lines,
        died_in,
        status: status.to_string(),
        stderr_tail,
    })
}

fn flag_value(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// Runs seeds in worker processes until the time is up.
fn supervise(args: &[String]) -> Result<bool, String> {
    let minutes: f64 = flag_value(args, "--minutes")
        .map(|m| m.parse().map_err(|e| format!("--minutes: {e}")))
        .transpose()?
        .unwrap_or(1.0);
    let jobs: usize = flag_value(args, "--jobs")
        .map(|j| j.parse().map_err(|e| format!("--jobs: {e}")))
        .transpose()?
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
        .max(1);
    let first_seed = match flag_value(args, "--first-seed") {
        Some(seed) => parse_seed(&seed)?,
        None => {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
                % 1_000_000_000_000
        }
    };
    // Fails early, with a clear message, when the artefacts are missing.
    let target = target()?;
    println!(
        "fuzz: {minutes} min, {jobs} workers, seeds from {first_seed}; CLAP {}{}",
        target.clap.display(),
        target
            .vst3
            .as_ref()
            .map_or(String::new(), |v| format!(", VST3 {}", v.display()))
    );
    let deadline = Instant::now() + Duration::from_secs_f64(minutes * 60.0);
    let started = Instant::now();
    let mut next_seed = first_seed;
    let mut total = SeedReport::default();
    let mut by_format: BTreeMap<String, u64> = BTreeMap::new();
    let mut seeds_done = 0u64;
    let mut failures: Vec<String> = Vec::new();
    let (done_tx, done_rx) = mpsc::channel::<(Vec<u64>, Result<WorkerEnd, String>)>();
    let mut active = 0usize;
    loop {
        while active < jobs && Instant::now() < deadline && failures.len() < MAX_FAILURES {
            let seeds: Vec<u64> = (0..SEEDS_PER_WORKER as u64)
                .map(|i| next_seed + i)
                .collect();
            next_seed += SEEDS_PER_WORKER as u64;
            let tx = done_tx.clone();
            std::thread::spawn(move || {
                let end = run_worker(&seeds);
                let _ = tx.send((seeds, end));
            });
            active += 1;
        }
        if active == 0 {
            break;
        }
        let (seeds, end) = done_rx.recv().map_err(|e| e.to_string())?;
        active -= 1;
        let end = end?;
        for line in &end.lines {
            let mut words = line.splitn(4, ' ');
            let (kind, seed, format, rest) = (
                words.next().unwrap_or(""),
                words.next().unwrap_or(""),
                words.next().unwrap_or(""),
                words.next().unwrap_or(""),
            );
            seeds_done += 1;
            *by_format.entry(format.to_string()).or_default() += 1;
            match kind {
                "ok" => {
                    for pair in rest.split(' ') {
                        let (key, value) = pair.split_once('=').unwrap_or(("", "0"));
                        let value: u64 = value.parse().unwrap_or(0);
                        match key {
                            "instances" => total.instances += value,
                            "activations" => total.activations += value,
                            "process_calls" => total.process_calls += value,
                            "frames" => total.frames += value,
                            "state_loads" => total.state_loads += value,
                            _ => {}
                        }
                    }
                }
                "fail" => {
                    let message = format!("seed {seed} ({format}) FAILED: {rest}");
                    println!("fuzz: {message}\n      replay: cargo xtask fuzz --seed {seed}");
                    failures.push(message);
                }
                _ => {
                    let message = format!(
                        "seed {seed} HUNG (no end after {} s)",
                        SEED_TIMEOUT.as_secs()
                    );
                    println!("fuzz: {message}\n      replay: cargo xtask fuzz --seed {seed}");
                    failures.push(message);
                }
            }
        }
        if let Some(seed) = end.died_in {
            seeds_done += 1;
            let tail: String = end
                .stderr_tail
                .lines()
                .rev()
                .take(25)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n        ");
            let message = format!("seed {seed} CRASHED the host process ({})", end.status);
            println!(
                "fuzz: {message}\n      replay: cargo xtask fuzz --seed {seed}\n      its stderr ended with:\n        {tail}"
            );
            failures.push(message);
        }
        let _ = seeds;
        if seeds_done % 60 < SEEDS_PER_WORKER as u64 {
            println!(
                "fuzz: {seeds_done} seeds in {:.1} min, {} failures",
                started.elapsed().as_secs_f64() / 60.0,
                failures.len()
            );
        }
    }
    let elapsed_min = started.elapsed().as_secs_f64() / 60.0;
    println!(
        "fuzz: {seeds_done} seeds ({}) from {first_seed} to {} in {elapsed_min:.1} min: {} instances, {} activations, {} process calls, {} frames, {} state loads; {} failed",
        by_format
            .iter()
            .map(|(f, n)| format!("{n} {f}"))
            .collect::<Vec<_>>()
            .join(", "),
        next_seed - 1,
        total.instances,
        total.activations,
        total.process_calls,
        total.frames,
        total.state_loads,
        failures.len()
    );
    for failure in &failures {
        println!("  {failure}");
    }
    Ok(failures.is_empty())
}
