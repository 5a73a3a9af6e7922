//! libFuzzer's driver for one [`Target`] of `stemflow-fuzz`, chosen by `STEMFLOW_FUZZ_TARGET`
//! (a target's name). With `STEMFLOW_FUZZ_SEEDS` set to a folder, the target's seeds are written
//! there first (pass the folder to libFuzzer as a corpus). Built and run by `cargo xtask
//! fuzz-parsers`; libFuzzer's own options follow on the command line.

#![no_main]

use std::sync::OnceLock;

use stemflow_fuzz::{seeds, Target};

/// The target, read once.
static TARGET: OnceLock<Target> = OnceLock::new();

fn target() -> Target {
    *TARGET.get_or_init(|| {
        let name = std::env::var("STEMFLOW_FUZZ_TARGET").unwrap_or_default();
        Target::from_name(&name).unwrap_or_else(|| {
            let names: Vec<&str> = Target::ALL.iter().map(|t| t.name()).collect();
            eprintln!(
                "fuzz-parsers: set STEMFLOW_FUZZ_TARGET to one of {}",
                names.join(", ")
            );
            std::process::exit(2)
        })
    })
}

libfuzzer_sys::fuzz_target!(
    init: {
        let target = target();
        if let Some(folder) = std::env::var_os("STEMFLOW_FUZZ_SEEDS") {
            let folder = std::path::PathBuf::from(folder);
            std::fs::create_dir_all(&folder).expect("the seed folder");
            for (name, bytes) in seeds(target) {
                std::fs::write(folder.join(name), bytes).expect("writing a seed");
            }
        }
    },
    |data: &[u8]| target().run(data)
);
