//! [`RouteRun`]: a route's stages over a whole file, each with its own whole-file edges: the
//! first separates the file, each later one what the earlier ones left (their input minus the
//! stems they serve), and a frame is final once the last stage handed it out.

use crate::hybrid::combined_file_info;
use crate::runtime::devices::ActiveDevice;
use crate::separator::{stem_channel, SeparatorError, SeparatorInfo};
use crate::stem::{Stem, NUM_SEPARATED_STEMS};

use super::file_run::{FileRun, FrameQueue, MIX_PLANE, NUM_PLANES};

/// One stage and what it handed out that the route has not yet.
struct Stage {
    run: Box<dyn FileRun>,
    /// Which separated stems come from it.
    serves: [bool; NUM_SEPARATED_STEMS],
    /// Its served stems (others silent) and, for the first stage, the route's input.
    held: FrameQueue,
}

/// A route over a whole file.
pub struct RouteRun {
    info: SeparatorInfo,
    stages: Vec<Stage>,
    output: FrameQueue,
}

impl RouteRun {
    /// Chains `stages` (the run and the stems it serves) under `name`. Every stage must run at
    /// the same rate. Not realtime-safe: allocates.
    pub fn new(name: &str, stages: Vec<(Box<dyn FileRun>, Vec<Stem>)>) -> Result<Self, String> {
        let stages: Vec<Stage> = stages
            .into_iter()
            .map(|(run, stems)| {
                let mut serves = [false; NUM_SEPARATED_STEMS];
                for stem in stems
                    .into_iter()
                    .filter(|s| s.index() < NUM_SEPARATED_STEMS)
                {
                    serves[stem.index()] = true;
                }
                Stage {
                    run,
                    serves,
                    held: FrameQueue::new(),
                }
            })
            .collect();
        let delivered: Vec<Stem> = Stem::ALL
            .into_iter()
            .filter(|&stem| {
                stem != Stem::Other
                    && stages.iter().any(|stage| {
                        stage.serves[stem.index()] && stage.run.info().delivers_stem(stem)
                    })
            })
            .collect();
        let info = combined_file_info(
            name.to_owned(),
            stages.iter().map(|s| s.run.info()),
            delivered,
        )?;
        Ok(Self {
            info,
            stages,
            output: FrameQueue::new(),
        })
    }

    /// Passes what each stage handed out on to the next (finishing each after the one before
    /// when `is_finishing`), then hands out the frames every stage is done with.
    fn cascade(&mut self, is_finishing: bool) -> Result<(), SeparatorError> {
        for index in 0..self.stages.len() {
            let (done, later) = self.stages.split_at_mut(index + 1);
            let stage = &mut done[index];
            let out = stage.run.output();
            let frames = out.len();
            if frames > 0 {
                if let Some(next) = later.first_mut() {
                    let carried = carried_input(out, &stage.serves);
                    next.run.push(&carried[0], &carried[1])?;
                }
                for plane in 0..NUM_PLANES {
                    let is_kept = plane >= MIX_PLANE && index == 0
                        || plane < MIX_PLANE - 2 && stage.serves[plane / 2];
                    let held = stage.held.plane_mut(plane);
                    if is_kept {
                        held.extend_from_slice(out.plane(plane));
                    } else {
                        held.resize(held.len() + frames, 0.0);
                    }
                }
                out.consume(frames);
            }
            if is_finishing {
                if let Some(next) = later.first_mut() {
                    next.run.finish()?;
                }
            }
        }
        let ready = self.stages.iter().map(|s| s.held.len()).min().unwrap_or(0);
        if ready == 0 {
            return Ok(());
        }
        for plane in 0..NUM_PLANES {
            let source = if plane >= MIX_PLANE {
                Some(0)
            } else if plane < MIX_PLANE - 2 {
                self.stages.iter().position(|s| s.serves[plane / 2])
            } else {
                None
            };
            let out = self.output.plane_mut(plane);
            match source {
                Some(stage) => {
                    out.extend_from_slice(&self.stages[stage].held.plane(plane)[..ready])
                }
                None => out.resize(out.len() + ready, 0.0),
            }
        }
        for stage in &mut self.stages {
            stage.held.consume(ready);
        }
        Ok(())
    }
}

/// The next stage's input: the frames' input minus the stems this stage serves.
fn carried_input(out: &FrameQueue, serves: &[bool; NUM_SEPARATED_STEMS]) -> [Vec<f32>; 2] {
    std::array::from_fn(|channel| {
        let mut carried = out.plane(MIX_PLANE + channel).to_vec();
        for (stem, _) in serves.iter().enumerate().filter(|(_, &serves)| serves) {
            for (c, &s) in carried
                .iter_mut()
                .zip(out.plane(stem_channel(stem, channel)))
            {
                *c -= s;
            }
        }
        carried
    })
}

impl FileRun for RouteRun {
    fn info(&self) -> &SeparatorInfo {
        &self.info
    }

    fn device(&self) -> Option<ActiveDevice> {
        self.stages.iter().find_map(|stage| stage.run.device())
    }

    fn model_runs(&self) -> u64 {
        self.stages.iter().map(|stage| stage.run.model_runs()).sum()
    }

    fn has_model_other(&self) -> bool {
        false
    }

    fn start(&mut self) {
        for stage in &mut self.stages {
            stage.run.start();
            stage.held.clear();
        }
        self.output.clear();
    }

    fn push(&mut self, left: &[f32], right: &[f32]) -> Result<(), SeparatorError> {
        self.stages[0].run.push(left, right)?;
        self.cascade(false)
    }

    fn finish(&mut self) -> Result<(), SeparatorError> {
        self.stages[0].run.finish()?;
        self.cascade(true)
    }

    fn output(&mut self) -> &mut FrameQueue {
        &mut self.output
    }
}
