//! The op skeleton, written once: how a planned op runs on its device.
//!
//! Every op has two backends, as candle's `CustomOp` has `cpu_fwd` and `cuda_fwd`: the CPU one
//! runs the op's f64 reference on host copies, the CUDA one launches its kernel on device
//! buffers. [`forward`] picks the backend from the op's device, and on a GPU hands the CUDA
//! backend the buffers of its tensors, checked to exist and to be aligned for the kernels'
//! 16-byte accesses, with errors named after the manifest's fields. [`exact_inputs`] checks the
//! bench harness's input list against the manifest's signature.

use cudarc::driver::{CudaView, CudaViewMut};

use super::launch::check_aligned;
use crate::device::CudaDevice;
use crate::registry::{ManifestOp, StaticValue, WorkloadCase};
use crate::{Device, Error, Tensor, TensorMut, TensorRef, TensorSpec};

/// The two backends of an op with `I` inputs and `O` outputs (in and out of `forward_into`).
///
/// Both see the tensors as borrows ([`TensorRef`], [`TensorMut`]): the op's own tensors and the
/// caller's memory alike, which the backends read and write in place.
pub(crate) trait Backends<const I: usize, const O: usize>: ManifestOp {
    /// The device the op is planned for.
    fn device(&self) -> &Device;

    /// The CPU backend: the op on host tensors (usually [`cpu_f64`] over the reference).
    fn cpu(&self, inputs: [TensorRef<'_>; I], outputs: [TensorMut<'_>; O]) -> Result<(), Error>;

    /// The CUDA backend: the kernel launch on the tensors' device bytes, asynchronous on the
    /// device's stream.
    fn cuda(
        &self,
        dev: &CudaDevice,
        inputs: [CudaView<'_, u8>; I],
        outputs: [CudaViewMut<'_, u8>; O],
    ) -> Result<(), Error>;
}

/// Runs `op` on its device: the CPU backend, or the CUDA backend on the tensors' bytes.
///
/// The caller has checked that each tensor matches the plan (spec and device).
pub(crate) fn forward<Op, const I: usize, const O: usize>(
    op: &Op,
    inputs: [TensorRef<'_>; I],
    mut outputs: [TensorMut<'_>; O],
) -> Result<(), Error>
where
    Op: Backends<I, O>,
{
    let Some(dev) = op.device().cuda_device() else {
        return op.cpu(inputs, outputs);
    };
    let ins = input_buffers::<Op, I>(&inputs)?;
    let outs = output_buffers::<Op, O>(&mut outputs)?;
    let all: Vec<CudaView<'_, u8>> = ins
        .iter()
        .map(|v| v.slice(..))
        .chain(outs.iter().map(CudaViewMut::as_view))
        .collect();
    check_aligned(Op::NAME, &dev.stream, &all)?;
    drop(all);
    op.cuda(dev, ins, outs)
}

/// The manifest's name for input `index` of `Op` (the position when the signature has fewer).
fn input_name<Op: ManifestOp>(index: usize) -> &'static str {
    Op::INPUTS.get(index).map_or("an input", |decl| decl.name)
}

/// The manifest's name for output `index` of `Op`.
fn output_name<Op: ManifestOp>(index: usize) -> &'static str {
    Op::OUTPUTS.get(index).map_or("an output", |decl| decl.name)
}

/// The device bytes of a GPU tensor: [`Error::MissingBuffer`] when it has none.
pub(crate) fn buffer<'a>(
    op: &'static str,
    field: &'static str,
    tensor: &'a TensorRef<'_>,
) -> Result<CudaView<'a, u8>, Error> {
    tensor.cuda_view().ok_or(Error::MissingBuffer { op, field })
}

/// The device bytes of a GPU tensor, to write: [`Error::MissingBuffer`] when it has none.
pub(crate) fn buffer_mut<'a>(
    op: &'static str,
    field: &'static str,
    tensor: &'a mut TensorMut<'_>,
) -> Result<CudaViewMut<'a, u8>, Error> {
    tensor
        .cuda_view_mut()
        .ok_or(Error::MissingBuffer { op, field })
}

/// The bytes of `inputs`, in order, named after `Op`'s manifest inputs in errors.
fn input_buffers<'a, Op: ManifestOp, const I: usize>(
    inputs: &'a [TensorRef<'_>; I],
) -> Result<[CudaView<'a, u8>; I], Error> {
    let mut buffers = Vec::with_capacity(I);
    for (index, tensor) in inputs.iter().enumerate() {
        buffers.push(buffer(Op::NAME, input_name::<Op>(index), tensor)?);
    }
    buffers
        .try_into()
        .map_err(|_| Error::internal("one buffer per input"))
}

/// The bytes of `outputs`, in order, named after `Op`'s manifest outputs in errors.
fn output_buffers<'a, Op: ManifestOp, const O: usize>(
    outputs: &'a mut [TensorMut<'_>; O],
) -> Result<[CudaViewMut<'a, u8>; O], Error> {
    let mut buffers = Vec::with_capacity(O);
    for (index, tensor) in outputs.iter_mut().enumerate() {
        buffers.push(buffer_mut(Op::NAME, output_name::<Op>(index), tensor)?);
    }
    buffers
        .try_into()
        .map_err(|_| Error::internal("one buffer per output"))
}

/// The CPU backend of an op whose f64 reference maps its inputs to one output: host copies in,
/// `reference`, the result rounded to the output's dtype.
pub(crate) fn cpu_f64<const I: usize>(
    inputs: [TensorRef<'_>; I],
    output: &mut TensorMut<'_>,
    reference: impl FnOnce([Vec<f64>; I]) -> Vec<f64>,
) -> Result<(), Error> {
    let mut values = Vec::with_capacity(I);
    for tensor in inputs {
        values.push(tensor.host_f64()?);
    }
    let values = values
        .try_into()
        .map_err(|_| Error::internal("one host copy per input"))?;
    output.set_host_f64(&reference(values))
}

/// `inputs` as the `K` tensors of `Op`'s manifest signature, for `BenchOp::run`:
/// [`Error::Arity`] when the harness passes another count. `K` is checked against the
/// signature the macro emitted, at compile time.
pub(crate) fn exact_inputs<Op: ManifestOp, const K: usize>(
    inputs: &[Tensor],
) -> Result<&[Tensor; K], Error> {
    const {
        assert!(
            K == Op::INPUTS.len(),
            "the op's run takes another number of inputs than its manifest signature declares"
        )
    };
    <&[Tensor; K]>::try_from(inputs).map_err(|_| Error::Arity {
        op: Op::NAME,
        expected: K,
        got: inputs.len(),
    })
}

/// Asserts that `y` holds exactly `want` rounded once to its dtype, byte for byte (NaNs and
/// signed zeros included): the CPU backends' unit tests against their f64 references.
#[cfg(test)]
#[track_caller]
pub(crate) fn assert_rounds_to(y: &Tensor, want: &[f64], case: std::fmt::Arguments<'_>) {
    let want = Tensor::from_f64_rounded(want, y.spec(), &Device::cpu()).expect("want rounds");
    assert_eq!(
        y.to_bytes().expect("y's bytes"),
        want.to_bytes().expect("want's bytes"),
        "{case}"
    );
}

/// A bench's random inputs: one tensor per spec, the i-th drawn from `seed + i`, so that two
/// inputs of one shape are not the same data.
pub(crate) fn random_inputs<const N: usize>(
    specs: [&TensorSpec; N],
    seed: u64,
    device: &Device,
) -> Result<Vec<Tensor>, Error> {
    (0u64..)
        .zip(specs)
        .map(|(i, spec)| Tensor::random(spec, seed.wrapping_add(i), device))
        .collect()
}

/// A bench's placeholder inputs ([`BenchOp::placeholder_inputs`](crate::registry::BenchOp)):
/// one uninitialised tensor per spec (zeros on the CPU), for calls whose kernels do not run.
pub(crate) fn placeholder_inputs<const N: usize>(
    specs: [&TensorSpec; N],
    device: &Device,
) -> Result<Vec<Tensor>, Error> {
    specs
        .into_iter()
        .map(|spec| Tensor::empty(spec, device))
        .collect()
}

/// Param `name` of a workload row for `Op`: the row's value, else the default `Op`'s manifest
/// declares (the workload rows carry the declared defaults already; this covers a row built by
/// hand, or one that gives `null`); [`Error::InvalidParam`] when there is neither.
pub(crate) fn workload_param<Op: ManifestOp>(
    case: &WorkloadCase,
    name: &'static str,
) -> Result<StaticValue, Error> {
    match case.workload.param(name) {
        None | Some(StaticValue::None) => Op::default_param(name),
        Some(value) => Some(*value),
    }
    .ok_or_else(|| Error::InvalidParam {
        op: Op::NAME,
        field: name,
        value: "missing".to_owned(),
        reason: "the workload gives none and the manifest declares no default".to_owned(),
    })
}

/// Numeric param `name` of a workload row for `Op` (the manifest's default when absent), as an
/// `f64`.
pub(crate) fn workload_f64<Op: ManifestOp>(
    case: &WorkloadCase,
    name: &'static str,
) -> Result<f64, Error> {
    let value = workload_param::<Op>(case, name)?;
    value.as_f64().ok_or_else(|| Error::InvalidParam {
        op: Op::NAME,
        field: name,
        value: format!("{value:?}"),
        reason: "must be a number".to_owned(),
    })
}

/// Boolean param `name` of a workload row for `Op` (the manifest's default when absent).
pub(crate) fn workload_bool<Op: ManifestOp>(
    case: &WorkloadCase,
    name: &'static str,
) -> Result<bool, Error> {
    match workload_param::<Op>(case, name)? {
        StaticValue::Bool(b) => Ok(b),
        value => Err(Error::InvalidParam {
            op: Op::NAME,
            field: name,
            value: format!("{value:?}"),
            reason: "must be true or false".to_owned(),
        }),
    }
}

/// `BenchOp` for an op of one input `x` and one output, written once: random `x`,
/// `forward(x)`, and the traffic of `x` read once and the output (`|op| spec`) written once.
/// The op has `ROOF`, `x()`, `device()` and `forward(&Tensor)`.
macro_rules! unary_bench_op {
    ($op:ty, |$this:ident| $y:expr) => {
        impl $crate::registry::BenchOp for $op {
            fn roof(&self) -> $crate::registry::RoofKey {
                <$op>::ROOF
            }

            fn random_inputs(&self, seed: u64) -> Result<Vec<$crate::Tensor>, $crate::Error> {
                $crate::ops::backend::random_inputs([self.x()], seed, self.device())
            }

            fn placeholder_inputs(&self) -> Result<Vec<$crate::Tensor>, $crate::Error> {
                $crate::ops::backend::placeholder_inputs([self.x()], self.device())
            }

            fn run(&self, inputs: &[$crate::Tensor]) -> Result<Vec<$crate::Tensor>, $crate::Error> {
                let [x] = $crate::ops::backend::exact_inputs::<Self, 1>(inputs)?;
                Ok(vec![self.forward(x)?])
            }

            fn traffic(&self) -> Option<$crate::registry::Traffic> {
                let $this = self;
                Some($crate::registry::Traffic {
                    reads: vec![self.x().clone()],
                    writes: vec![$y.clone()],
                })
            }
        }
    };
}
pub(crate) use unary_bench_op;
