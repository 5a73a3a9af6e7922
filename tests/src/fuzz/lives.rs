//! [`run_lives`]: a seed's instances, on one thread or several at once.

use std::sync::Mutex;

use super::rng::Rng;
use super::target::SeedReport;

/// Runs a seed's instance lives: one thread most of the time, two to four at once for one seed
/// in four (instances created and destroyed concurrently), each thread running `life` for one
/// to three instances in turn, each with its own generator drawn from `rng`. The first error
/// (with its thread and instance) fails the seed.
pub fn run_lives(
    rng: &mut Rng,
    life: impl Fn(Rng, &Mutex<SeedReport>) -> Result<(), String> + Sync,
) -> Result<SeedReport, String> {
    let num_threads = if rng.chance(0.25) {
        rng.range_usize(2, 4)
    } else {
        1
    };
    let lives: Vec<(Rng, usize)> = (0..num_threads)
        .map(|_| {
            let life_rng = rng.fork();
            (life_rng, rng.range_usize(1, 3))
        })
        .collect();
    let report = Mutex::new(SeedReport::default());
    let errors = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for (thread_index, (mut life_rng, num_instances)) in lives.into_iter().enumerate() {
            let (life, report, errors) = (&life, &report, &errors);
            std::thread::Builder::new()
                .name(format!("fuzz-main-{thread_index}"))
                .spawn_scoped(scope, move || {
                    for instance_index in 0..num_instances {
                        if let Err(error) = life(life_rng.fork(), report) {
                            errors
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .push(format!(
                                    "thread {thread_index}, instance {instance_index}: {error}"
                                ));
                            return;
                        }
                    }
                })
                .unwrap_or_else(|e| panic!("cannot start a fuzzer thread: {e}"));
        }
    });
    let errors = errors.into_inner().unwrap_or_else(|e| e.into_inner());
    match errors.into_iter().next() {
        Some(error) => Err(error),
        None => Ok(report.into_inner().unwrap_or_else(|e| e.into_inner())),
    }
}
