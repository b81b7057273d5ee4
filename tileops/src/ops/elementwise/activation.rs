//! The elementwise activations `relu`, `gelu` (erf and tanh forms), `silu`, `sigmoid`, `neg` and
//! `abs`: one input of any shape, one output of the same shape and dtype. What they share (the API, the two
//! backends, the bench hooks) is written once in `pointwise_op!`; each op only names its kernel
//! and its f64 reference.

use cudarc::driver::LaunchConfig;

use super::reference;
use crate::device::CudaDevice;
use crate::kernels::{self, ACTIVATION};
use crate::ops::backend::{self, Backends, cpu_f64, unary_bench_op, workload_param};
use crate::ops::launch::{self, launch};
use crate::ops::{check_extents, check_float_dtype, check_input};
use crate::registry::{FromWorkload, ManifestOp, RoofKey, StaticValue, WorkloadCase};
use crate::{Device, Error, Tensor, TensorSpec};

/// Threads per block of the activation kernels (their `__launch_bounds__`).
const THREADS: u32 = 256;
/// 16-byte vectors each thread loads per loop iteration (the kernels' `kUnroll`).
const UNROLL: usize = 4;

/// Validates the input of an activation: a float dtype, no empty dimension.
fn plan(op: &'static str, x: &TensorSpec) -> Result<(), Error> {
    check_float_dtype(op, "x", x)?;
    check_extents(op, "x", x)
}

/// The kernel of an activation: `<base>_<dtype>` in `activation.cu`, and the f64 function it
/// computes (the CPU backend).
#[derive(Clone, Copy)]
struct Kernel {
    base: &'static str,
    f: fn(f64) -> f64,
}

/// The CPU backend of every activation: `f` over a host copy of `x`.
fn cpu_pointwise(
    kernel: Kernel,
    x: crate::TensorRef<'_>,
    y: &mut crate::TensorMut<'_>,
) -> Result<(), Error> {
    cpu_f64([x], y, |[x]| x.into_iter().map(kernel.f).collect())
}

/// The CUDA backend of every activation: one grid-stride launch over the `numel` elements of
/// `spec`. The grid is at most one full wave: the blocks the driver's occupancy API says each
/// SM holds (set by the kernel's registers, 4 to 8 at 256 threads), times the SMs; the
/// grid-stride loop covers the rest. A fixed 8 per SM left a partial second wave where fewer fit.
fn cuda_pointwise(
    dev: &CudaDevice,
    kernel: Kernel,
    spec: &TensorSpec,
    xs: &cudarc::driver::CudaView<'_, u8>,
    ys: &mut cudarc::driver::CudaViewMut<'_, u8>,
) -> Result<(), Error> {
    let entry = kernels::entry(&ACTIVATION, kernel.base, spec.dtype)?;
    let n = spec.numel()?;
    let vectors = n / (16 / spec.dtype.size_in_bytes());
    let resident = kernels::resident_blocks(dev, &ACTIVATION, entry, THREADS, 0)?;
    let wave = dev.sm_count.max(1) as usize * resident as usize;
    let blocks = vectors.div_ceil(THREADS as usize * UNROLL).clamp(1, wave);
    let cfg = LaunchConfig {
        grid_dim: (launch::grid_dim(entry, blocks)?, 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let n = n as i64;
    // SAFETY: <act>_<dtype>(const T*, T*, long long n); x and y hold n elements each and are
    // 16-byte aligned; the block is within the launch bounds (256), and the tail (< 8 elements)
    // is covered by block 0's first threads.
    unsafe { launch!(dev, &ACTIVATION, entry, cfg; xs, ys, &n) }
}

/// What every activation `$name` (with fields `x`, `device` and a `fn kernel(&self) -> Kernel`)
/// shares: its accessors, forward, both backends and the bench hooks.
macro_rules! pointwise_op {
    ($name:ident) => {
        impl $name {
            /// The input spec the op is planned for.
            pub fn x(&self) -> &TensorSpec {
                &self.x
            }

            /// The device the op runs on.
            pub fn device(&self) -> &Device {
                &self.device
            }

            /// The activation of `x` (which must match the plan), into a new tensor.
            pub fn forward<'t>(&self, x: impl Into<crate::TensorRef<'t>>) -> Result<Tensor, Error> {
                let x = x.into();
                check_input(Self::NAME, "x", &x, &self.x, &self.device)?;
                let mut y = Tensor::empty(&self.x, &self.device)?;
                self.forward_into(x, &mut y)?;
                Ok(y)
            }

            /// The activation of `x`, written into `y` (same spec and device). Asynchronous
            /// on a GPU.
            pub fn forward_into<'t>(
                &self,
                x: impl Into<crate::TensorRef<'t>>,
                y: impl Into<crate::TensorMut<'t>>,
            ) -> Result<(), Error> {
                let x = x.into();
                let y = y.into();
                check_input(Self::NAME, "x", &x, &self.x, &self.device)?;
                check_input(Self::NAME, "y", &y, &self.x, &self.device)?;
                backend::forward(self, [x], [y])
            }
        }

        impl Backends<1, 1> for $name {
            fn device(&self) -> &Device {
                &self.device
            }

            fn cpu(
                &self,
                [x]: [crate::TensorRef<'_>; 1],
                [mut y]: [crate::TensorMut<'_>; 1],
            ) -> Result<(), Error> {
                cpu_pointwise(self.kernel(), x, &mut y)
            }

            fn cuda(
                &self,
                dev: &CudaDevice,
                [ref xs]: [cudarc::driver::CudaView<'_, u8>; 1],
                [ref mut ys]: [cudarc::driver::CudaViewMut<'_, u8>; 1],
            ) -> Result<(), Error> {
                cuda_pointwise(dev, self.kernel(), &self.x, xs, ys)
            }
        }

        unary_bench_op!($name, |op| op.x);
    };
}

/// One activation without params: the struct, its plan and workload hooks, and
/// `pointwise_op!`. Its kernel in `activation.cu` is named after the op; `$f` is its f64
/// reference.
macro_rules! activation {
    ($(#[$doc:meta])* $name:ident, $op:literal, $f:path) => {
        $(#[$doc])*
        #[crate::roofline_op($op)]
        #[derive(Debug, Clone)]
        pub struct $name {
            /// The input the op is planned for (the output has the same spec).
            x: TensorSpec,
            device: Device,
        }

        impl $name {
            /// The roof an optimal implementation is priced against: memory-bound work on CUDA
            /// cores.
            pub const ROOF: RoofKey = RoofKey::CUDA_CORE_FP32;

            /// Plans the activation for inputs like `x`: any shape (rank 0 included) without an
            /// empty dimension, in float32, float16 or bfloat16.
            pub fn new(x: TensorSpec, device: &Device) -> Result<$name, Error> {
                plan(Self::NAME, &x)?;
                Ok($name {
                    x,
                    device: device.clone(),
                })
            }

            fn kernel(&self) -> Kernel {
                Kernel {
                    base: Self::NAME,
                    f: $f,
                }
            }
        }

        impl FromWorkload for $name {
            /// `x_shape` and the case dtype.
            fn from_workload(device: &Device, case: &WorkloadCase) -> Result<Self, Error> {
                $name::new(case.require_input(Self::NAME, "x")?, device)
            }
        }

        pointwise_op!($name);
    };
}

activation!(
    /// `relu(x) = max(x, 0)`, NaN kept (as `torch.nn.functional.relu`).
    ///
    /// ```
    /// use tileops::ops::Relu;
    /// use tileops::{DType, Device, Tensor, TensorSpec};
    ///
    /// let device = Device::cpu();
    /// let relu = Relu::new(TensorSpec::new([3], DType::Float32), &device)?;
    /// let x = Tensor::from_f32_slice(&[-1.0, 0.5, f32::NAN], [3], &device)?;
    /// let y = relu.forward(&x)?.to_vec_f32()?;
    /// assert_eq!(&y[..2], &[0.0, 0.5]);
    /// assert!(y[2].is_nan());
    /// # Ok::<(), tileops::Error>(())
    /// ```
    Relu,
    "relu",
    reference::relu
);

activation!(
    /// `neg(x) = -x` (as `torch.neg`): a sign flip, exact in every dtype.
    ///
    /// ```
    /// use tileops::ops::Neg;
    /// use tileops::{DType, Device, Tensor, TensorSpec};
    ///
    /// let device = Device::cpu();
    /// let neg = Neg::new(TensorSpec::new([3], DType::Float32), &device)?;
    /// let x = Tensor::from_f32_slice(&[-1.0, 0.5, f32::INFINITY], [3], &device)?;
    /// assert_eq!(neg.forward(&x)?.to_vec_f32()?, vec![1.0, -0.5, f32::NEG_INFINITY]);
    /// # Ok::<(), tileops::Error>(())
    /// ```
    Neg,
    "neg",
    reference::neg
);

activation!(
    /// `abs(x) = |x|` (as `torch.abs`): the sign cleared, exact in every dtype; NaN stays NaN and
    /// `-0` becomes `+0`.
    ///
    /// ```
    /// use tileops::ops::Abs;
    /// use tileops::{DType, Device, Tensor, TensorSpec};
    ///
    /// let device = Device::cpu();
    /// let abs = Abs::new(TensorSpec::new([3], DType::Float32), &device)?;
    /// let x = Tensor::from_f32_slice(&[-1.0, 0.5, f32::NEG_INFINITY], [3], &device)?;
    /// assert_eq!(abs.forward(&x)?.to_vec_f32()?, vec![1.0, 0.5, f32::INFINITY]);
    /// # Ok::<(), tileops::Error>(())
    /// ```
    Abs,
    "abs",
    reference::abs
);

activation!(
    /// `silu(x) = x * sigmoid(x)` (as `torch.nn.functional.silu`).
    ///
    /// ```
    /// use tileops::ops::Silu;
    /// use tileops::{DType, Device, Tensor, TensorSpec};
    ///
    /// let device = Device::cpu();
    /// let silu = Silu::new(TensorSpec::new([2], DType::Float32), &device)?;
    /// let x = Tensor::from_f32_slice(&[0.0, 20.0], [2], &device)?;
    /// assert_eq!(silu.forward(&x)?.to_vec_f32()?, vec![0.0, 20.0]);
    /// # Ok::<(), tileops::Error>(())
    /// ```
    Silu,
    "silu",
    reference::silu
);

activation!(
    /// `sigmoid(x) = 1 / (1 + exp(-x))` (as `torch.sigmoid`).
    ///
    /// ```
    /// use tileops::ops::Sigmoid;
    /// use tileops::{DType, Device, Tensor, TensorSpec};
    ///
    /// let device = Device::cpu();
    /// let spec = TensorSpec::new([2], DType::BFloat16);
    /// let sigmoid = Sigmoid::new(spec.clone(), &device)?;
    /// let x = Tensor::from_f64_rounded(&[0.0, f64::NEG_INFINITY], &spec, &device)?;
    /// assert_eq!(sigmoid.forward(&x)?.to_vec_f32()?, vec![0.5, 0.0]);
    /// # Ok::<(), tileops::Error>(())
    /// ```
    Sigmoid,
    "sigmoid",
    reference::sigmoid
);

/// Which GELU `Gelu` computes: PyTorch's `approximate` argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GeluApproximate {
    /// `x * Phi(x)` with the exact normal CDF (`approximate='none'`).
    #[default]
    None,
    /// `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))` (`approximate='tanh'`).
    Tanh,
}

impl GeluApproximate {
    /// The manifest/PyTorch name: `"none"` or `"tanh"`.
    pub fn name(self) -> &'static str {
        match self {
            GeluApproximate::None => "none",
            GeluApproximate::Tanh => "tanh",
        }
    }
}

impl std::str::FromStr for GeluApproximate {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "none" => Ok(GeluApproximate::None),
            "tanh" => Ok(GeluApproximate::Tanh),
            other => Err(Error::InvalidParam {
                op: Gelu::NAME,
                field: "approximate",
                value: format!("{other:?}"),
                reason: "must be \"none\" or \"tanh\"".to_owned(),
            }),
        }
    }
}

/// GELU, exact (`approximate='none'`) or the tanh approximation, as
/// `torch.nn.functional.gelu(x, approximate=...)`.
///
/// ```
/// use tileops::ops::{Gelu, GeluApproximate};
/// use tileops::{DType, Device, Tensor, TensorSpec};
///
/// let device = Device::cpu();
/// let spec = TensorSpec::new([2], DType::Float32);
/// let gelu = Gelu::new(spec.clone(), GeluApproximate::None, &device)?;
/// let x = Tensor::from_f32_slice(&[0.0, 1.0], [2], &device)?;
/// let y = gelu.forward(&x)?.to_vec_f32()?;
/// assert_eq!(y[0], 0.0);
/// assert!((y[1] - 0.841_344_7).abs() < 1e-6);
/// assert_eq!(gelu.eval_roofline().unwrap().flops, 10);
/// let tanh = Gelu::new(spec, "tanh".parse()?, &device)?;
/// assert_eq!(tanh.eval_roofline().unwrap().flops, 18);
/// # Ok::<(), tileops::Error>(())
/// ```
#[crate::roofline_op("gelu")]
#[derive(Debug, Clone)]
pub struct Gelu {
    /// The input the op is planned for (the output has the same spec).
    x: TensorSpec,
    /// `"none"` or `"tanh"`, as the manifest's formula reads it.
    approximate: &'static str,
    device: Device,
}

impl Gelu {
    /// The roof an optimal GELU is priced against: memory-bound work on CUDA cores.
    pub const ROOF: RoofKey = RoofKey::CUDA_CORE_FP32;

    /// Plans a GELU of inputs like `x` (any shape without an empty dimension, in float32,
    /// float16 or bfloat16).
    pub fn new(
        x: TensorSpec,
        approximate: GeluApproximate,
        device: &Device,
    ) -> Result<Gelu, Error> {
        plan(Self::NAME, &x)?;
        Ok(Gelu {
            x,
            approximate: approximate.name(),
            device: device.clone(),
        })
    }

    /// The form of GELU planned.
    pub fn approximate(&self) -> GeluApproximate {
        if self.approximate == "tanh" {
            GeluApproximate::Tanh
        } else {
            GeluApproximate::None
        }
    }

    fn kernel(&self) -> Kernel {
        match self.approximate() {
            GeluApproximate::None => Kernel {
                base: "gelu_erf",
                f: reference::gelu_erf,
            },
            GeluApproximate::Tanh => Kernel {
                base: "gelu_tanh",
                f: reference::gelu_tanh,
            },
        }
    }
}

impl FromWorkload for Gelu {
    /// `x_shape` and the case dtype; `approximate` from the row, else the manifest's default.
    fn from_workload(device: &Device, case: &WorkloadCase) -> Result<Self, Error> {
        let x = case.require_input(Self::NAME, "x")?;
        let approximate = match workload_param::<Self>(case, "approximate")? {
            StaticValue::Str(s) => s.parse()?,
            other => {
                return Err(Error::InvalidParam {
                    op: Self::NAME,
                    field: "approximate",
                    value: format!("{other:?}"),
                    reason: "must be the string \"none\" or \"tanh\"".to_owned(),
                });
            }
        };
        Gelu::new(x, approximate, device)
    }
}

pointwise_op!(Gelu);

/// GELU of `x` (exact or the tanh approximation) in one call: plans a [`Gelu`] for `x`'s spec on
/// its device and runs it.
///
/// ```
/// use tileops::ops::GeluApproximate;
/// use tileops::{Device, Tensor};
///
/// let device = Device::cpu();
/// let x = Tensor::from_f32_slice(&[0.0, 1.0], [2], &device)?;
/// let y = tileops::ops::gelu(&x, GeluApproximate::None)?.to_vec_f32()?;
/// assert_eq!(y[0], 0.0);
/// assert!((y[1] - 0.841_344_7).abs() < 1e-6);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn gelu(x: &Tensor, approximate: GeluApproximate) -> Result<Tensor, Error> {
    Gelu::new(x.spec().clone(), approximate, x.device())?.forward(x)
}

/// `max(x, 0)` in one call: plans a [`Relu`] for `x`'s spec on its device and runs it.
///
/// ```
/// use tileops::{Device, Tensor};
///
/// let device = Device::cpu();
/// let x = Tensor::from_f32_slice(&[-1.0, 0.5], [2], &device)?;
/// assert_eq!(tileops::ops::relu(&x)?.to_vec_f32()?, vec![0.0, 0.5]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn relu(x: &Tensor) -> Result<Tensor, Error> {
    Relu::new(x.spec().clone(), x.device())?.forward(x)
}

/// `-x` in one call: plans a [`Neg`] for `x`'s spec on its device and runs it.
///
/// ```
/// use tileops::{Device, Tensor};
///
/// let device = Device::cpu();
/// let x = Tensor::from_f32_slice(&[-1.0, 0.5], [2], &device)?;
/// assert_eq!(tileops::ops::neg(&x)?.to_vec_f32()?, vec![1.0, -0.5]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn neg(x: &Tensor) -> Result<Tensor, Error> {
    Neg::new(x.spec().clone(), x.device())?.forward(x)
}

/// `|x|` in one call: plans an [`Abs`] for `x`'s spec on its device and runs it.
///
/// ```
/// use tileops::{Device, Tensor};
///
/// let device = Device::cpu();
/// let x = Tensor::from_f32_slice(&[-1.0, 0.5], [2], &device)?;
/// assert_eq!(tileops::ops::abs(&x)?.to_vec_f32()?, vec![1.0, 0.5]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn abs(x: &Tensor) -> Result<Tensor, Error> {
    Abs::new(x.spec().clone(), x.device())?.forward(x)
}

/// `1 / (1 + exp(-x))` in one call: plans a [`Sigmoid`] for `x`'s spec on its device and runs it.
///
/// ```
/// use tileops::{Device, Tensor};
///
/// let device = Device::cpu();
/// let x = Tensor::from_f32_slice(&[0.0, f32::NEG_INFINITY], [2], &device)?;
/// assert_eq!(tileops::ops::sigmoid(&x)?.to_vec_f32()?, vec![0.5, 0.0]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn sigmoid(x: &Tensor) -> Result<Tensor, Error> {
    Sigmoid::new(x.spec().clone(), x.device())?.forward(x)
}

/// `x * sigmoid(x)` in one call: plans a [`Silu`] for `x`'s spec on its device and runs it.
///
/// ```
/// use tileops::{Device, Tensor};
///
/// let device = Device::cpu();
/// let x = Tensor::from_f32_slice(&[0.0, 20.0], [2], &device)?;
/// assert_eq!(tileops::ops::silu(&x)?.to_vec_f32()?, vec![0.0, 20.0]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn silu(x: &Tensor) -> Result<Tensor, Error> {
    Silu::new(x.spec().clone(), x.device())?.forward(x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;
    use crate::ops::backend::assert_rounds_to;

    const DTYPES: [DType; 3] = [DType::Float32, DType::Float16, DType::BFloat16];

    /// Every element of the CPU forward equals the f64 formula rounded once to the dtype.
    fn check(op: &str, forward: impl Fn(&Tensor) -> Tensor, f: fn(f64) -> f64, spec: &TensorSpec) {
        let cpu = Device::cpu();
        let mut values = Tensor::random(spec, 9, &cpu).unwrap().to_vec_f64().unwrap();
        let specials = [
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.0,
            -0.0,
            -30.0,
            12.0,
        ];
        for (v, s) in values.iter_mut().zip(specials) {
            *v = s;
        }
        let x = Tensor::from_f64_rounded(&values, spec, &cpu).unwrap();
        let y = forward(&x);
        let want: Vec<f64> = x.to_vec_f64().unwrap().into_iter().map(f).collect();
        assert_rounds_to(&y, &want, format_args!("{op} {spec}"));
    }

    #[test]
    fn cpu_forward_matches_the_reference_in_every_dtype() {
        let cpu = Device::cpu();
        for dtype in DTYPES {
            for shape in [vec![1], vec![7], vec![3, 33], vec![2, 2, 64], vec![]] {
                let spec = TensorSpec::new(shape, dtype);
                let relu = Relu::new(spec.clone(), &cpu).unwrap();
                check("relu", |x| relu.forward(x).unwrap(), reference::relu, &spec);
                let neg = Neg::new(spec.clone(), &cpu).unwrap();
                check("neg", |x| neg.forward(x).unwrap(), reference::neg, &spec);
                let abs = Abs::new(spec.clone(), &cpu).unwrap();
                check("abs", |x| abs.forward(x).unwrap(), reference::abs, &spec);
                let silu = Silu::new(spec.clone(), &cpu).unwrap();
                check("silu", |x| silu.forward(x).unwrap(), reference::silu, &spec);
                let sigmoid = Sigmoid::new(spec.clone(), &cpu).unwrap();
                check(
                    "sigmoid",
                    |x| sigmoid.forward(x).unwrap(),
                    reference::sigmoid,
                    &spec,
                );
                let gelu = Gelu::new(spec.clone(), GeluApproximate::None, &cpu).unwrap();
                check(
                    "gelu",
                    |x| gelu.forward(x).unwrap(),
                    reference::gelu_erf,
                    &spec,
                );
                let gelu = Gelu::new(spec.clone(), GeluApproximate::Tanh, &cpu).unwrap();
                check(
                    "gelu tanh",
                    |x| gelu.forward(x).unwrap(),
                    reference::gelu_tanh,
                    &spec,
                );
            }
        }
    }

    #[test]
    fn nan_and_infinities_follow_the_formulas() {
        let cpu = Device::cpu();
        let spec = TensorSpec::new([3], DType::Float32);
        let x = Tensor::from_f32_slice(&[f32::NAN, f32::INFINITY, f32::NEG_INFINITY], [3], &cpu)
            .unwrap();
        let y = Relu::new(spec.clone(), &cpu)
            .unwrap()
            .forward(&x)
            .unwrap()
            .to_vec_f32()
            .unwrap();
        assert!(
            y[0].is_nan() && y[1] == f32::INFINITY && y[2] == 0.0,
            "{y:?}"
        );
        let y = Sigmoid::new(spec.clone(), &cpu)
            .unwrap()
            .forward(&x)
            .unwrap()
            .to_vec_f32()
            .unwrap();
        assert!(y[0].is_nan() && y[1] == 1.0 && y[2] == 0.0, "{y:?}");
        let y = Gelu::new(spec, GeluApproximate::Tanh, &cpu)
            .unwrap()
            .forward(&x)
            .unwrap()
            .to_vec_f32()
            .unwrap();
        assert!(
            y[0].is_nan() && y[1] == f32::INFINITY && y[2].is_nan(),
            "{y:?}"
        );
    }

    #[test]
    fn gelu_approximate_parses_and_rejects() {
        assert_eq!(
            "tanh".parse::<GeluApproximate>().unwrap(),
            GeluApproximate::Tanh
        );
        assert_eq!(
            "none".parse::<GeluApproximate>().unwrap(),
            GeluApproximate::None
        );
        assert!(matches!(
            "erf".parse::<GeluApproximate>(),
            Err(Error::InvalidParam {
                field: "approximate",
                ..
            })
        ));
    }

    #[test]
    fn roofline_follows_the_manifest() {
        let cpu = Device::cpu();
        let spec = TensorSpec::new([2048, 4096], DType::BFloat16);
        let n = 2048 * 4096u64;
        let relu = Relu::new(spec.clone(), &cpu)
            .unwrap()
            .eval_roofline()
            .unwrap();
        assert_eq!((relu.flops, relu.bytes), (n, 4 * n));
        let silu = Silu::new(spec.clone(), &cpu)
            .unwrap()
            .eval_roofline()
            .unwrap();
        assert_eq!((silu.flops, silu.bytes), (5 * n, 4 * n));
        let sig = Sigmoid::new(spec.clone(), &cpu)
            .unwrap()
            .eval_roofline()
            .unwrap();
        assert_eq!((sig.flops, sig.bytes), (4 * n, 4 * n));
        let gelu = Gelu::new(spec.clone(), GeluApproximate::Tanh, &cpu)
            .unwrap()
            .eval_roofline()
            .unwrap();
        assert_eq!((gelu.flops, gelu.bytes), (9 * n, 4 * n));
    }
}
