//! [`BoundIo`]: a GPU session's inputs and outputs in buffers allocated and bound once (ONNX
//! Runtime's I/O binding), in one of two places ([`Placement`]):
//!
//! - **Host**: pinned host buffers (page-locked, on CUDA) bound to the session directly. Each run
//!   writes the inputs into them, and ONNX Runtime copies them to the device and the outputs
//!   back on its own stream. What a bound run is unless graph capture is on.
//! - **Device**: buffers on the device, which graph capture needs (a captured graph replays
//!   the device addresses it saw). Each run copies the inputs in from host buffers and the
//!   outputs out with `ort`'s `Tensor::copy_into`, a run of a one-node session per copy. On an
//!   H200 (ONNX Runtime 1.31.0) every run this way failed ("dst_data != src_data": a copy onto
//!   itself, see docs/models.md), which is why host placement exists.
//!
//! On CUDA the host buffers are pinned; elsewhere they are ordinary memory. The same code runs
//! with the CPU as the "device" (tests use that: no GPU here), where every copy is a `memcpy`.

use ort::memory::{AllocationDevice, Allocator, AllocatorType, MemoryInfo, MemoryType};
use ort::session::{IoBinding, Session};
use ort::value::{Tensor, ValueType};

use super::device_id::{DeviceId, Provider};
use super::graph_io::GraphIo;

/// Where the bound buffers live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Pinned host buffers, bound directly: ONNX Runtime copies them in and out.
    Host,
    /// Buffers on the device with host twins (graph capture).
    Device,
}

/// The bound buffers: the host buffers the runs write and read, and (placed on the device)
/// the device buffers bound to the session.
pub(crate) struct BoundIo {
    binding: IoBinding,
    host_inputs: Vec<Tensor<f32>>,
    device_inputs: Vec<Tensor<f32>>,
    device_outputs: Vec<Tensor<f32>>,
    host_outputs: Vec<Tensor<f32>>,
}

/// Where `device`'s tensors live, ONNX Runtime's name for it.
fn device_memory(device: DeviceId) -> Result<MemoryInfo<'static>, String> {
    let place = match device.provider {
        Provider::Cuda => AllocationDevice::CUDA,
        Provider::DirectMl => AllocationDevice::DIRECTML,
        Provider::Cpu => AllocationDevice::CPU,
        other => return Err(format!("no I/O binding on {}", other.prefix())),
    };
    MemoryInfo::new(
        place,
        device.index as i32,
        AllocatorType::Device,
        MemoryType::Default,
    )
    .map_err(|e| e.to_string())
}

/// The allocator for `device`'s tensors, and the one for their host twins.
fn allocators(session: &Session, device: DeviceId) -> Result<(Allocator, Allocator), String> {
    let device_allocator = match device.provider {
        Provider::Cpu => Allocator::default(),
        _ => Allocator::new(session, device_memory(device)?).map_err(|e| e.to_string())?,
    };
    let host_allocator = match device.provider {
        Provider::Cuda => {
            let pinned = MemoryInfo::new(
                AllocationDevice::CUDA_PINNED,
                device.index as i32,
                AllocatorType::Device,
                MemoryType::CPUInput,
            )
            .map_err(|e| e.to_string())?;
            Allocator::new(session, pinned).map_err(|e| e.to_string())?
        }
        _ => Allocator::default(),
    };
    Ok((device_allocator, host_allocator))
}

impl BoundIo {
    /// Allocates and binds `io`'s inputs as `placement` says, runs `session` once on zeros to
    /// learn the outputs' shapes (the warm-up run), then allocates and binds the outputs. Not
    /// realtime-safe: allocates, runs the model.
    pub fn new(
        session: &mut Session,
        io: &GraphIo,
        device: DeviceId,
        placement: Placement,
    ) -> Result<Self, String> {
        let error = |e: ort::Error| e.to_string();
        let (device_allocator, host_allocator) = allocators(session, device)?;
        let mut binding = session.create_binding().map_err(error)?;
        let mut host_inputs = Vec::with_capacity(io.inputs.len());
        let mut device_inputs = Vec::new();
        for (name, shape) in &io.inputs {
            let mut host = Tensor::<f32>::new(&host_allocator, shape.clone()).map_err(error)?;
            host.extract_tensor_mut().1.fill(0.0);
            match placement {
                Placement::Host => binding.bind_input(name.as_str(), &host).map_err(error)?,
                Placement::Device => {
                    let mut on_device =
                        Tensor::<f32>::new(&device_allocator, shape.clone()).map_err(error)?;
                    host.copy_into(&mut on_device).map_err(error)?;
                    binding
                        .bind_input(name.as_str(), &on_device)
                        .map_err(error)?;
                    device_inputs.push(on_device);
                }
            }
            host_inputs.push(host);
        }
        let memory = device_memory(device)?;
        for name in &io.outputs {
            binding
                .bind_output_to_device(name.as_str(), &memory)
                .map_err(error)?;
        }
        let shapes = {
            let outputs = session.run_binding(&binding).map_err(error)?;
            io.outputs
                .iter()
                .map(|name| match outputs.get(name.as_str()).map(|v| v.dtype()) {
                    Some(ValueType::Tensor { shape, .. }) => Ok(shape.to_vec()),
                    _ => Err(format!("the model produced no tensor output `{name}`")),
                })
                .collect::<Result<Vec<Vec<i64>>, String>>()?
        };
        binding.clear_outputs();
        let mut device_outputs = Vec::new();
        let mut host_outputs = Vec::with_capacity(shapes.len());
        for (name, shape) in io.outputs.iter().zip(shapes) {
            let mut host = Tensor::<f32>::new(&host_allocator, shape.clone()).map_err(error)?;
            match placement {
                Placement::Host => binding
                    .bind_output(name.as_str(), &mut host)
                    .map_err(error)?,
                Placement::Device => {
                    let mut on_device =
                        Tensor::<f32>::new(&device_allocator, shape).map_err(error)?;
                    binding
                        .bind_output(name.as_str(), &mut on_device)
                        .map_err(error)?;
                    device_outputs.push(on_device);
                }
            }
            host_outputs.push(host);
        }
        Ok(BoundIo {
            binding,
            host_inputs,
            device_inputs,
            device_outputs,
            host_outputs,
        })
    }

    /// One run: `fill` writes the inputs (in [`GraphIo`] order, zeroed first) into the host
    /// buffers, the session runs on the bound buffers (placed on the device: with the copies in
    /// and out around it), and `read` gets the outputs from the host buffers. The outer error
    /// is the inference's, the inner one `fill`'s or `read`'s. Not realtime-safe: runs the
    /// model.
    pub fn run(
        &mut self,
        session: &mut Session,
        fill: impl FnOnce(&mut [&mut [f32]]) -> Result<(), String>,
        read: impl FnOnce(&[&[f32]]) -> Result<(), String>,
    ) -> Result<Result<(), String>, String> {
        let error = |e: ort::Error| e.to_string();
        let mut inputs: Vec<&mut [f32]> = self
            .host_inputs
            .iter_mut()
            .map(|t| {
                let values = t.extract_tensor_mut().1;
                values.fill(0.0);
                values
            })
            .collect();
        if let Err(reason) = fill(&mut inputs) {
            return Ok(Err(reason));
        }
        drop(inputs);
        for (host, on_device) in self.host_inputs.iter().zip(&mut self.device_inputs) {
            host.copy_into(on_device).map_err(error)?;
        }
        session.run_binding(&self.binding).map_err(error)?;
        for (on_device, host) in self.device_outputs.iter().zip(&mut self.host_outputs) {
            on_device.copy_into(host).map_err(error)?;
        }
        let outputs: Vec<&[f32]> = self
            .host_outputs
            .iter()
            .map(|t| t.extract_tensor().1)
            .collect();
        Ok(read(&outputs))
    }
}
