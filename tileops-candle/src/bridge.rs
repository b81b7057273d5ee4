//! The one path every bridged op takes: candle storages and layouts in, a tileops op run on them,
//! candle storages out. The ops (`crate::kernels`) say only which tileops op they plan and run; the
//! device dispatch, the contiguity rule, the dtype mapping and the error mapping live here once.

use candle_core::op::BackpropOp;
use candle_core::{CpuStorage, CustomOp1, CustomOp2, CustomOp3, Layout, Shape, Storage, Tensor};

use crate::convert;

/// One tileops op as the bridge runs it: planned for the inputs' specs on a tileops device, then
/// run on tileops tensors, giving its outputs in order.
///
/// Planning per call is what tileops's one-shot helpers (`tileops::ops::rms_norm`, ...) do too:
/// a plan is a few shape checks, except a GPU gemm's, which asks cuBLASLt for an algorithm.
pub(crate) trait Kernel: Send + Sync + 'static {
    /// The tileops op's name (the manifest's), which candle shows in its errors.
    fn name(&self) -> &'static str;

    /// Plans the op for `inputs`' specs on `device` and runs it on them (borrowed in place),
    /// giving its outputs as new tensors on `device`.
    fn run(
        &self,
        device: &tileops::Device,
        inputs: &[tileops::TensorRef<'_>],
    ) -> Result<Vec<tileops::Tensor>, tileops::Error>;
}

/// A tileops error as a candle error, its message kept whole.
pub(crate) fn candle_error(e: tileops::Error) -> candle_core::Error {
    candle_core::Error::wrap(e)
}

/// Runs `kernel` on the CPU: the inputs are borrowed in place from candle's storages (only the
/// elements the layouts cover), the outputs copied once into new candle storages (a tileops
/// tensor holds bytes, a candle storage typed elements).
pub(crate) fn cpu_run<K: Kernel + ?Sized>(
    kernel: &K,
    inputs: &[(&CpuStorage, &Layout)],
) -> candle_core::Result<Vec<(CpuStorage, Shape)>> {
    let device = tileops::Device::cpu();
    let refs = inputs
        .iter()
        .enumerate()
        .map(|(i, (storage, layout))| convert::host_ref(kernel.name(), i, storage, layout))
        .collect::<candle_core::Result<Vec<_>>>()?;
    let outputs = kernel.run(&device, &refs).map_err(candle_error)?;
    outputs
        .iter()
        .map(|t| Ok((convert::cpu_storage(t)?, Shape::from(t.shape()))))
        .collect()
}

/// Runs `kernel` on candle tensors that all live on one device, giving every output as a new
/// candle tensor: the path of the ops that return more than one tensor or take more than three,
/// which candle's `CustomOp1/2/3` (three inputs, one output at most) cannot express.
pub(crate) fn apply<K: Kernel>(kernel: &K, inputs: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
    let Some(first) = inputs.first() else {
        candle_core::bail!("{}: no inputs", kernel.name());
    };
    for (i, t) in inputs.iter().enumerate().skip(1) {
        if !t.device().same_device(first.device()) {
            candle_core::bail!(
                "{}: input {i} is on {:?} but input 0 is on {:?}; every input must be on one device",
                kernel.name(),
                t.device().location(),
                first.device().location()
            );
        }
    }
    // Read locks on the inputs' storages, held while the op runs (as candle holds them for its
    // own ops); the outputs are new storages, so nothing here takes a write lock.
    let guards: Vec<_> = inputs.iter().map(|t| t.storage_and_layout()).collect();
    let outputs: Vec<(Storage, Shape)> = match &*guards[0].0 {
        Storage::Cpu(_) => {
            let cpu = guards
                .iter()
                .map(|(storage, layout)| match &**storage {
                    Storage::Cpu(s) => Ok((s, *layout)),
                    _ => candle_core::bail!("{}: inputs on different backends", kernel.name()),
                })
                .collect::<candle_core::Result<Vec<_>>>()?;
            cpu_run(kernel, &cpu)?
                .into_iter()
                .map(|(s, shape)| (Storage::Cpu(s), shape))
                .collect()
        }
        #[cfg(feature = "cuda")]
        Storage::Cuda(_) => {
            let cuda = guards
                .iter()
                .map(|(storage, layout)| match &**storage {
                    Storage::Cuda(s) => Ok((s, *layout)),
                    _ => candle_core::bail!("{}: inputs on different backends", kernel.name()),
                })
                .collect::<candle_core::Result<Vec<_>>>()?;
            crate::cuda::cuda_run(kernel, &cuda)?
                .into_iter()
                .map(|(s, shape)| (Storage::Cuda(s), shape))
                .collect()
        }
        _ => candle_core::bail!(
            "{}: tileops-candle runs on candle's CPU device{}",
            kernel.name(),
            if cfg!(feature = "cuda") {
                " and CUDA devices"
            } else {
                " (build it with the `cuda` feature for CUDA devices)"
            }
        ),
    };
    drop(guards);
    Ok(outputs
        .into_iter()
        .map(|(storage, shape)| Tensor::from_storage(storage, shape, BackpropOp::none(), false))
        .collect())
}

/// A single-output [`Kernel`] as a candle `CustomOp1`, `CustomOp2` or `CustomOp3`, by its number
/// of inputs.
pub(crate) struct Op<K>(pub(crate) K);

impl<K: Kernel> Op<K> {
    fn one<S>(&self, mut outputs: Vec<(S, Shape)>) -> candle_core::Result<(S, Shape)> {
        match outputs.len() {
            1 => Ok(outputs.remove(0)),
            n => candle_core::bail!("{}: {n} outputs where one was expected", self.0.name()),
        }
    }
}

impl<K: Kernel> CustomOp1 for Op<K> {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        self.one(cpu_run(&self.0, &[(s, l)])?)
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s: &candle_core::CudaStorage,
        l: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        self.one(crate::cuda::cuda_run(&self.0, &[(s, l)])?)
    }
}

impl<K: Kernel> CustomOp2 for Op<K> {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        self.one(cpu_run(&self.0, &[(s1, l1), (s2, l2)])?)
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &candle_core::CudaStorage,
        l1: &Layout,
        s2: &candle_core::CudaStorage,
        l2: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        self.one(crate::cuda::cuda_run(&self.0, &[(s1, l1), (s2, l2)])?)
    }
}

impl<K: Kernel> CustomOp3 for Op<K> {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        self.one(cpu_run(&self.0, &[(s1, l1), (s2, l2), (s3, l3)])?)
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &candle_core::CudaStorage,
        l1: &Layout,
        s2: &candle_core::CudaStorage,
        l2: &Layout,
        s3: &candle_core::CudaStorage,
        l3: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        self.one(crate::cuda::cuda_run(
            &self.0,
            &[(s1, l1), (s2, l2), (s3, l3)],
        )?)
    }
}
