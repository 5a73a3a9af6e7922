//! `stemflow separate`: decode, separate and write each input in turn, streaming all the way.
//!
//! - `args.rs`: the arguments and how they become [`SeparateOptions`] (`options.rs`);
//! - `slot.rs`: the separator, built once per run and handed from input to input;
//! - `file.rs`: one input, from decoder to finished stem files.

pub mod args;
mod file;
mod options;
mod slot;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::decode::io_reason;
use crate::error::CliError;
use args::SeparateArgs;
use file::separate_file;
pub use options::{Failure, SeparateOptions};
use slot::SeparatorSlot;

/// Runs `stemflow separate`.
pub fn run(args: SeparateArgs) -> Result<(), CliError> {
    let (inputs, output, options) = args.into_options()?;
    match separate_all(&inputs, &output, &options)? {
        0 => Ok(()),
        _ => Err(CliError::Reported),
    }
}

/// Separates every input into `output/<input name>/`. Prints one error line per failed input
/// and goes on with the next. Returns the number of failed inputs, or a fatal error.
pub fn separate_all(
    inputs: &[PathBuf],
    output: &Path,
    options: &SeparateOptions,
) -> Result<usize, String> {
    std::fs::create_dir_all(output).map_err(|e| {
        format!(
            "cannot create the output folder {}: {}",
            output.display(),
            io_reason(&e)
        )
    })?;
    let mut separator = SeparatorSlot::new(options);
    // Output folders already used by an earlier input of this run.
    let mut folders: HashMap<PathBuf, PathBuf> = HashMap::new();
    let mut num_failed = 0;
    for input in inputs {
        let folder = output.join(input_name(input));
        if let Some(earlier) = folders.get(&folder) {
            eprintln!(
                "stemflow: error: {}: its stems would overwrite those of {} in {}; rename one of them or separate them in separate runs",
                input.display(),
                earlier.display(),
                folder.display()
            );
            num_failed += 1;
            continue;
        }
        folders.insert(folder.clone(), input.clone());
        match separate_file(input, &folder, options, &mut separator) {
            Ok(separated) => {
                if !options.is_quiet() {
                    println!("  → {}", separated.folder.display());
                    for file in &separated.files {
                        println!(
                            "    {}",
                            file.file_name().unwrap_or_default().to_string_lossy()
                        );
                    }
                }
            }
            Err(Failure::Input(reason)) => {
                eprintln!("stemflow: error: {}: {reason}", input.display());
                num_failed += 1;
            }
            Err(Failure::Fatal(reason)) => return Err(reason),
        }
    }
    if inputs.len() > 1 && !options.is_quiet() {
        println!(
            "{} of {} files separated{}",
            inputs.len() - num_failed,
            inputs.len(),
            if num_failed > 0 {
                format!(", {num_failed} failed")
            } else {
                String::new()
            }
        );
    }
    Ok(num_failed)
}

/// The folder name for an input: its file name without the extension.
fn input_name(input: &Path) -> String {
    input
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "input".into())
}
