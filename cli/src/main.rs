//! `stemflow`: the command-line tool over Stemflow's engine. One file per subcommand:
//! `separate/` (with its arguments, the per-file run and the model kept across files),
//! `models.rs`, `devices.rs`, `bench/` (speed, memory, instances, the look-ahead curve),
//! `quantize.rs` and `demo.rs`; `stemflow-audio`'s `decode` and `encode` read and write audio
//! files; `progress.rs` and `memory.rs` report; `engine_log.rs` prints the engine's warnings.
//!
//! Exit codes: 0 success, 1 a failure (an input that could not be separated, an unknown model or
//! device, an unwritable folder), 2 a usage error.

mod bench;
mod demo;
mod devices;
mod engine_log;
mod error;
mod eval;
mod interrupt;
mod memory;
mod model_folders;
mod model_spec;
mod models;
mod models_available;
mod models_ensemble;
mod models_get;
mod models_import;
mod models_inspect;
mod output;
mod plot;
mod progress;
mod quantize;
mod separate;
mod values;

use std::process::ExitCode;

// The audio files' modules, at the paths the subcommands name them by (`crate::decode::…`).
use stemflow_audio::{decode, disk_space, encode};

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser, Subcommand};

use error::CliError;
use stemflow_engine::runtime::{intra_threads, set_thread_budget, ThreadBudget};

#[derive(Parser)]
#[command(
    name = "stemflow",
    version,
    about = "Split audio into vocals, drums, bass and other",
    after_help = "Run `stemflow <COMMAND> --help` for examples."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Separate audio files into DIR/<name>/<stem>.<ext>, one after the other.
    #[command(after_help = separate::args::SEPARATE_EXAMPLES)]
    Separate(separate::args::SeparateArgs),
    /// Generate the synthetic demo song, separate it and report each stem's SDR.
    #[command(after_help = demo::DEMO_EXAMPLES)]
    Demo(demo::DemoArgs),
    /// List the devices ONNX Runtime can use, and which one Auto picks.
    #[command(after_help = devices::DEVICES_EXAMPLES)]
    Devices(devices::DevicesArgs),
    /// List the models in the models folders: family, stems, sample rate, hash, whether they validated.
    #[command(after_help = models::MODELS_EXAMPLES)]
    Models(models::ModelsArgs),
    /// Measure separation quality (SDR as museval computes it, uSDR) on MUSDB18-HQ or any folder of mixtures and stems.
    Eval(eval::EvalArgs),
    /// Measure speed and memory of models on devices.
    #[command(after_help = bench::BENCH_EXAMPLES)]
    Bench(bench::BenchArgs),
    /// Write an int8 version of a model (dynamic quantization) for faster CPU inference, or a float16 one for GPUs (--fp16).
    #[command(after_help = quantize::QUANTIZE_EXAMPLES)]
    Quantize(quantize::QuantizeArgs),
}

fn main() -> ExitCode {
    quiet_panics();
    interrupt::install();
    let cli = Cli::parse();
    if let Some(note) = engine_log::install() {
        crate::output::say_err!("stemflow: warning: {note}");
    }
    // A command-line run owns the machine: inference may use every core (a plugin leaves one
    // to the DAW).
    set_thread_budget(ThreadBudget::AllCores);
    if let Some(note) = intra_threads().note {
        crate::output::say_err!("stemflow: warning: {note}");
    }
    // Whether the command's product is what it prints (a listing, a table): then a failure to
    // print is a failure of the command.
    let is_output_the_product = !matches!(cli.command, Command::Separate(_) | Command::Demo(_));
    let result = match cli.command {
        Command::Separate(args) => separate::run(args),
        Command::Devices(args) => devices::run(&args),
        Command::Models(args) => models::run(&args),
        Command::Demo(args) => demo::run(&args),
        Command::Eval(args) => eval::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Quantize(args) => quantize::run(&args),
    };
    let mut code = match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError::Usage(message)) => Cli::command()
            .error(ErrorKind::ArgumentConflict, message)
            .exit(),
        Err(CliError::Failed(message)) => {
            crate::output::say_err!("stemflow: error: {message}");
            ExitCode::FAILURE
        }
        Err(CliError::Reported) => ExitCode::FAILURE,
        Err(CliError::Interrupted(signal)) => {
            crate::output::say_err!(
                "stemflow: {}; unfinished stems were removed",
                interrupt::name(signal)
            );
            return ExitCode::from(interrupt::exit_status(signal));
        }
        Err(CliError::InterruptedWith { signal, note }) => {
            crate::output::say_err!("stemflow: {}; {note}", interrupt::name(signal));
            return ExitCode::from(interrupt::exit_status(signal));
        }
    };
    if let Some(error) = output::stdout_error() {
        if is_output_the_product {
            crate::output::say_err!("stemflow: error: cannot write to standard output: {error}");
            code = ExitCode::FAILURE;
        } else {
            crate::output::say_err!("stemflow: warning: cannot write to standard output: {error}");
        }
    }
    code
}

/// A panic is a bug, but the user gets one line, not a trace: the default hook only runs when
/// `RUST_BACKTRACE` asks for details (set, and not `0`). The engine's worker and the decoding
/// thread catch their own panics and report them as errors (the engine's, or the input's), so
/// nothing is printed for them.
fn quiet_panics() {
    let is_detailed = std::env::var_os("RUST_BACKTRACE").is_some_and(|v| v != "0");
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if is_detailed {
            return default_hook(info);
        }
        let thread = std::thread::current();
        if matches!(thread.name(), Some("stemflow-worker"))
            || thread.name() == Some(separate::DECODE_THREAD_NAME)
        {
            return;
        }
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown".into());
        crate::output::say_err!("stemflow: error: internal error ({message}); please report it");
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn look_ahead_flags_take_the_hyphenated_name_and_the_old_one() {
        for flag in ["--look-ahead", "--lookahead"] {
            let cli = Cli::try_parse_from(["stemflow", "separate", flag, "500ms", "song.wav"])
                .unwrap_or_else(|e| panic!("{flag}: {e}"));
            let Command::Separate(args) = cli.command else {
                panic!("not separate");
            };
            assert_eq!(args.look_ahead.label(), "500 ms", "{flag}");
        }
        for flag in ["--look-ahead-curve", "--lookahead-curve"] {
            let cli = Cli::try_parse_from(["stemflow", "bench", flag]).unwrap();
            let Command::Bench(args) = cli.command else {
                panic!("not bench");
            };
            assert!(args.look_ahead_curve, "{flag}");
        }
        assert!(
            Cli::try_parse_from(["stemflow", "separate", "--look-ahead", "soon", "a.wav"]).is_err()
        );
    }
}
