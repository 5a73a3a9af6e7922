//! [`BoundIo`]: a GPU session's inputs and outputs in buffers on the device, allocated and bound
//! once (ONNX Runtime's I/O binding). Each run writes the inputs into host buffers, copies each
//! in once, runs, and copies each output out once into host buffers kept for the next run; the
//! device addresses never change, which CUDA and DirectML graph capture need.
//!
//! On CUDA the host buffers are pinned (page-locked: the copies are DMA transfers); elsewhere they
//! are ordinary memory. The same code runs with the CPU as the "device" (tests use that: no GPU
//! here), where every copy is a `memcpy`.

use ort::memory::{AllocationDevice, Allocator, AllocatorType, MemoryInfo, MemoryType};
use ort::session::{IoBinding, Session};
use ort::value::{Tensor, ValueType};

use super::device_id::{DeviceId, Provider};
use super::graph_io::GraphIo;

/// Bound device buffers and their host twins.
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
    /// Allocates and binds `io`'s inputs on `device`, runs `session` once on zeros to learn the
    /// outputs' shapes (the warm-up run), then allocates and binds the outputs. Not
    /// realtime-safe: allocates, runs the model.
    pub fn new(session: &mut Session, io: &GraphIo, device: DeviceId) -> Result<Self, String> {
        let error = |e: ort::Error| e.to_string();
        let (device_allocator, host_allocator) = allocators(session, device)?;
        let mut binding = session.create_binding().map_err(error)?;
        let mut host_inputs = Vec::with_capacity(io.inputs.len());
        let mut device_inputs = Vec::with_capacity(io.inputs.len());
        for (name, shape) in &io.inputs {
            let mut host = Tensor::<f32>::new(&host_allocator, shape.clone()).map_err(error)?;
            host.extract_tensor_mut().1.fill(0.0);
            let mut on_device =
                Tensor::<f32>::new(&device_allocator, shape.clone()).map_err(error)?;
            host.copy_into(&mut on_device).map_err(error)?;
            binding
                .bind_input(name.as_str(), &on_device)
                .map_err(error)?;
            host_inputs.push(host);
            device_inputs.push(on_device);
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
        let mut device_outputs = Vec::with_capacity(shapes.len());
        let mut host_outputs = Vec::with_capacity(shapes.len());
        for (name, shape) in io.outputs.iter().zip(shapes) {
            let mut on_device =
                Tensor::<f32>::new(&device_allocator, shape.clone()).map_err(error)?;
            binding
                .bind_output(name.as_str(), &mut on_device)
                .map_err(error)?;
            device_outputs.push(on_device);
            host_outputs.push(Tensor::<f32>::new(&host_allocator, shape).map_err(error)?);
        }
        Ok(BoundIo {
            binding,
            host_inputs,
            device_inputs,
            device_outputs,
            host_outputs,
        })
    }

    /// One run: `fill` writes the inputs (in [`GraphIo`] order, zeroed first), they are copied
    /// to the device, the session runs on the bound buffers, the outputs are copied back and
    /// handed to `read`. The outer error is the inference's, the inner one `fill`'s or
    /// `read`'s. Not realtime-safe: runs the model.
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
