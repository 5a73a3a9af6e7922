//! Stemflow's demo and measurement kit, kept out of the model core (`stemflow-engine`):
//!
//! - [`bsseval`]: SDR as museval computes it for MUSDB18, and the MDX challenge's uSDR;
//! - [`demo_song`]: the deterministic synthetic demo song with known stems;
//! - [`metrics`]: separation quality measures (SDR, differences) over whole buffers;
//! - [`npy`]: numpy's `.npy` files, the reference outputs tests compare with;
//! - [`wav`]: reading and writing WAV files as planar stereo `f32`;
//! - [`testing`]: what the workspace's tests share (fixtures, scratch folders, seeded noise, a
//!   loopback HTTP server).
//!
//! The CLI, the tests and the benchmarks use it; the plugin does not (only its tests do).

pub mod bsseval;
pub mod demo_song;
pub mod metrics;
pub mod npy;
pub mod testing;
pub mod wav;
