//! The engine's shared test double: [`Scripted`], a separator built around another that sleeps,
//! panics, fails or changes its stems on the hops a test chooses.

use crate::planar::PlanarBlock;
use crate::separator::{Separator, SeparatorError, SeparatorInfo};

/// Runs before a hop, given the hop's index (counted from 0 since creation, resets included):
/// an error fails the hop.
type BeforeHop = Box<dyn FnMut(usize) -> Result<(), SeparatorError> + Send>;
/// Changes the stems a hop delivered.
type AfterHop = Box<dyn FnMut(&mut PlanarBlock) + Send>;

/// A separator for tests: `inner`'s hops, with [`Scripted::before_hop`] run before each and
/// [`Scripted::after_hop`] after, under `inner`'s facts or another name. Resets reset `inner`;
/// the hop count survives them.
pub(crate) struct Scripted<S> {
    inner: S,
    /// What the separator says it is (a test may change it).
    pub info: SeparatorInfo,
    hop_index: usize,
    before_hop: BeforeHop,
    after_hop: AfterHop,
}

impl<S: Separator> Scripted<S> {
    /// `inner` as it is.
    pub fn around(inner: S) -> Self {
        Self {
            info: inner.info().clone(),
            inner,
            hop_index: 0,
            before_hop: Box::new(|_| Ok(())),
            after_hop: Box::new(|_| {}),
        }
    }

    /// Named `name` (a model file, say), with `inner`'s other facts.
    pub fn named(mut self, name: &str) -> Self {
        self.info = self.info.with_name(name);
        self
    }

    /// Runs `before_hop(hop_index)` before each hop: it may sleep, panic or fail the hop.
    pub fn before_hop(
        mut self,
        before_hop: impl FnMut(usize) -> Result<(), SeparatorError> + Send + 'static,
    ) -> Self {
        self.before_hop = Box::new(before_hop);
        self
    }

    /// Runs `after_hop(stems)` on what each hop delivered.
    pub fn after_hop(mut self, after_hop: impl FnMut(&mut PlanarBlock) + Send + 'static) -> Self {
        self.after_hop = Box::new(after_hop);
        self
    }
}

impl<S: Separator> Separator for Scripted<S> {
    fn info(&self) -> &SeparatorInfo {
        &self.info
    }

    fn reset(&mut self) {
        self.inner.reset();
    }

    fn process_hop(
        &mut self,
        input: &PlanarBlock,
        stems: &mut PlanarBlock,
    ) -> Result<(), SeparatorError> {
        let index = self.hop_index;
        self.hop_index += 1;
        (self.before_hop)(index)?;
        self.inner.process_hop(input, stems)?;
        (self.after_hop)(stems);
        Ok(())
    }
}
