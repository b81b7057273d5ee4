//! The elementwise activations `relu`, `gelu` (erf and tanh forms), `silu` and `sigmoid`: one
//! input of any shape, one output of the same shape and dtype.

use cudarc::driver::{LaunchConfig, PushKernelArg};

use crate::device::CudaDevice;
use crate::kernels::{self, ACTIVATION};
use crate::ops::reference_norm_act as reference;
use crate::ops::{check_extents, check_float_dtype, check_input, launch};
use crate::registry::{BenchOp, FromWorkload, RoofKey, StaticValue, Traffic, WorkloadCase};
use crate::{Device, Error, Tensor, TensorSpec};

/// Threads per block of the activation kernels (their `__launch_bounds__`).
const THREADS: u32 = 256;
/// 16-byte vectors each thread loads per loop iteration (the kernels' `kUnroll`).
const UNROLL: usize = 4;
/// Resident blocks per SM at 256 threads (2048 threads per SM on sm_80 and sm_90): the grid is
/// at most one full wave, and the kernels' grid-stride loop covers the rest.
const BLOCKS_PER_SM: usize = 8;

/// Validates the input of an activation: a float dtype, no empty dimension.
fn plan(op: &'static str, x: &TensorSpec) -> Result<(), Error> {
    check_float_dtype(op, "x", x)?;
    check_extents(op, "x", x)
}

/// Runs `f` (on the CPU) or the kernel `<base>_<dtype>` (on a GPU) over every element of `x`.
fn run(
    op: &'static str,
    base: &str,
    f: fn(f64) -> f64,
    spec: &TensorSpec,
    device: &Device,
    x: &Tensor,
    y: &mut Tensor,
) -> Result<(), Error> {
    check_input(op, "x", x, spec, device)?;
    check_input(op, "y", y, spec, device)?;
    let Some(dev) = device.cuda_device() else {
        let values: Vec<f64> = x.host_f64()?.into_iter().map(f).collect();
        return y.set_host_f64(&values);
    };
    launch_unary(dev, op, base, spec, x, y)
}

fn launch_unary(
    dev: &CudaDevice,
    op: &'static str,
    base: &str,
    spec: &TensorSpec,
    x: &Tensor,
    y: &mut Tensor,
) -> Result<(), Error> {
    let missing = || Error::MissingBuffer {
        op,
        field: "an input or output",
    };
    let xs = x.cuda_slice().ok_or_else(missing)?;
    let ys = y.cuda_slice_mut().ok_or_else(missing)?;
    launch::check_aligned(op, &dev.stream, &[xs, ys])?;
    let entry = kernels::entry(&ACTIVATION, base, spec.dtype)?;
    let n = spec.numel()?;
    let vectors = n / (16 / spec.dtype.size_in_bytes());
    let wave = dev.sm_count.max(1) as usize * BLOCKS_PER_SM;
    let blocks = vectors.div_ceil(THREADS as usize * UNROLL).clamp(1, wave);
    let cfg = LaunchConfig {
        grid_dim: (launch::grid_dim(entry, blocks)?, 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let n = n as i64;
    let function = kernels::function(dev, &ACTIVATION, entry)?;
    let mut call = dev.stream.launch_builder(&function);
    call.arg(xs).arg(&mut *ys).arg(&n);
    // SAFETY: <act>_<dtype>(const T*, T*, long long n); x and y hold n elements each and are
    // 16-byte aligned; the block is within the launch bounds (256), and the tail (< 8 elements)
    // is covered by block 0's first threads.
    unsafe { call.launch(cfg) }.map_err(|e| Error::launch(entry, e))?;
    Ok(())
}

fn one_input<'a>(op: &'static str, inputs: &'a [Tensor]) -> Result<&'a Tensor, Error> {
    match inputs {
        [x] => Ok(x),
        _ => Err(Error::Arity {
            op,
            expected: 1,
            got: inputs.len(),
        }),
    }
}

/// One activation without params: the struct, its plan, forward and bench hooks.
macro_rules! activation {
    ($(#[$doc:meta])* $name:ident, $op:literal, $base:literal, $f:path) => {
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
            pub fn new(device: &Device, x: TensorSpec) -> Result<$name, Error> {
                plan($op, &x)?;
                Ok($name {
                    x,
                    device: device.clone(),
                })
            }

            /// The input spec the op is planned for.
            pub fn x(&self) -> &TensorSpec {
                &self.x
            }

            /// The device the op runs on.
            pub fn device(&self) -> &Device {
                &self.device
            }

            /// The activation of `x` (which must match the plan), into a new tensor.
            pub fn forward(&self, x: &Tensor) -> Result<Tensor, Error> {
                check_input($op, "x", x, &self.x, &self.device)?;
                let mut y = Tensor::empty(&self.x, &self.device)?;
                self.forward_into(x, &mut y)?;
                Ok(y)
            }

            /// The activation of `x`, written into `y` (same spec and device). Asynchronous
            /// on a GPU.
            pub fn forward_into(&self, x: &Tensor, y: &mut Tensor) -> Result<(), Error> {
                run($op, $base, $f, &self.x, &self.device, x, y)
            }
        }

        impl FromWorkload for $name {
            /// `x_shape` and the case dtype.
            fn from_workload(device: &Device, case: &WorkloadCase) -> Result<Self, Error> {
                $name::new(device, case.require_input($op, "x")?)
            }
        }

        impl BenchOp for $name {
            fn roof(&self) -> RoofKey {
                $name::ROOF
            }

            fn random_inputs(&self, seed: u64) -> Result<Vec<Tensor>, Error> {
                Ok(vec![Tensor::random(&self.x, seed, &self.device)?])
            }

            fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, Error> {
                Ok(vec![self.forward(one_input($op, inputs)?)?])
            }

            fn traffic(&self) -> Option<Traffic> {
                Some(Traffic {
                    reads: vec![self.x.clone()],
                    writes: vec![self.x.clone()],
                })
            }
        }
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
    /// let relu = Relu::new(&device, TensorSpec::new([3], DType::Float32))?;
    /// let x = Tensor::from_f32_slice(&[-1.0, 0.5, f32::NAN], [3], &device)?;
    /// let y = relu.forward(&x)?.to_vec_f32()?;
    /// assert_eq!(&y[..2], &[0.0, 0.5]);
    /// assert!(y[2].is_nan());
    /// # Ok::<(), tileops::Error>(())
    /// ```
    Relu,
    "relu",
    "relu",
    reference::relu
);

activation!(
    /// `silu(x) = x * sigmoid(x)` (as `torch.nn.functional.silu`).
    ///
    /// ```
    /// use tileops::ops::Silu;
    /// use tileops::{DType, Device, Tensor, TensorSpec};
    ///
    /// let device = Device::cpu();
    /// let silu = Silu::new(&device, TensorSpec::new([2], DType::Float32))?;
    /// let x = Tensor::from_f32_slice(&[0.0, 20.0], [2], &device)?;
    /// assert_eq!(silu.forward(&x)?.to_vec_f32()?, vec![0.0, 20.0]);
    /// # Ok::<(), tileops::Error>(())
    /// ```
    Silu,
    "silu",
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
    /// let sigmoid = Sigmoid::new(&device, spec.clone())?;
    /// let x = Tensor::from_f64_rounded(&[0.0, f64::NEG_INFINITY], &spec, &device)?;
    /// assert_eq!(sigmoid.forward(&x)?.to_vec_f32()?, vec![0.5, 0.0]);
    /// # Ok::<(), tileops::Error>(())
    /// ```
    Sigmoid,
    "sigmoid",
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
                op: "gelu",
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
/// let gelu = Gelu::new(&device, spec.clone(), GeluApproximate::None)?;
/// let x = Tensor::from_f32_slice(&[0.0, 1.0], [2], &device)?;
/// let y = gelu.forward(&x)?.to_vec_f32()?;
/// assert_eq!(y[0], 0.0);
/// assert!((y[1] - 0.841_344_7).abs() < 1e-6);
/// assert_eq!(gelu.eval_roofline().unwrap().flops, 10);
/// let tanh = Gelu::new(&device, spec, "tanh".parse()?)?;
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
        device: &Device,
        x: TensorSpec,
        approximate: GeluApproximate,
    ) -> Result<Gelu, Error> {
        plan("gelu", &x)?;
        Ok(Gelu {
            x,
            approximate: approximate.name(),
            device: device.clone(),
        })
    }

    /// The input spec the op is planned for.
    pub fn x(&self) -> &TensorSpec {
        &self.x
    }

    /// The form of GELU planned.
    pub fn approximate(&self) -> GeluApproximate {
        if self.approximate == "tanh" {
            GeluApproximate::Tanh
        } else {
            GeluApproximate::None
        }
    }

    /// The device the op runs on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// GELU of `x` (which must match the plan), into a new tensor.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor, Error> {
        check_input("gelu", "x", x, &self.x, &self.device)?;
        let mut y = Tensor::empty(&self.x, &self.device)?;
        self.forward_into(x, &mut y)?;
        Ok(y)
    }

    /// GELU of `x`, written into `y` (same spec and device). Asynchronous on a GPU.
    pub fn forward_into(&self, x: &Tensor, y: &mut Tensor) -> Result<(), Error> {
        let (base, f): (&str, fn(f64) -> f64) = match self.approximate() {
            GeluApproximate::None => ("gelu_erf", reference::gelu_erf),
            GeluApproximate::Tanh => ("gelu_tanh", reference::gelu_tanh),
        };
        run("gelu", base, f, &self.x, &self.device, x, y)
    }
}

impl FromWorkload for Gelu {
    /// `x_shape` and the case dtype; `approximate` from the row, `"none"` when absent or null.
    fn from_workload(device: &Device, case: &WorkloadCase) -> Result<Self, Error> {
        let x = case.require_input("gelu", "x")?;
        let approximate = match case.workload.param("approximate") {
            None | Some(StaticValue::None) => GeluApproximate::None,
            Some(StaticValue::Str(s)) => s.parse()?,
            Some(other) => {
                return Err(Error::InvalidParam {
                    op: "gelu",
                    field: "approximate",
                    value: format!("{other:?}"),
                    reason: "must be the string \"none\" or \"tanh\"".to_owned(),
                });
            }
        };
        Gelu::new(device, x, approximate)
    }
}

impl BenchOp for Gelu {
    fn roof(&self) -> RoofKey {
        Gelu::ROOF
    }

    fn random_inputs(&self, seed: u64) -> Result<Vec<Tensor>, Error> {
        Ok(vec![Tensor::random(&self.x, seed, &self.device)?])
    }

    fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, Error> {
        Ok(vec![self.forward(one_input("gelu", inputs)?)?])
    }

    fn traffic(&self) -> Option<Traffic> {
        Some(Traffic {
            reads: vec![self.x.clone()],
            writes: vec![self.x.clone()],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

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
        let want = Tensor::from_f64_rounded(&want, spec, &cpu).unwrap();
        assert_eq!(
            y.to_bytes().unwrap(),
            want.to_bytes().unwrap(),
            "{op} {spec}"
        );
    }

    #[test]
    fn cpu_forward_matches_the_reference_in_every_dtype() {
        let cpu = Device::cpu();
        for dtype in DTYPES {
            for shape in [vec![1], vec![7], vec![3, 33], vec![2, 2, 64], vec![]] {
                let spec = TensorSpec::new(shape, dtype);
                let relu = Relu::new(&cpu, spec.clone()).unwrap();
                check("relu", |x| relu.forward(x).unwrap(), reference::relu, &spec);
                let silu = Silu::new(&cpu, spec.clone()).unwrap();
                check("silu", |x| silu.forward(x).unwrap(), reference::silu, &spec);
                let sigmoid = Sigmoid::new(&cpu, spec.clone()).unwrap();
                check(
                    "sigmoid",
                    |x| sigmoid.forward(x).unwrap(),
                    reference::sigmoid,
                    &spec,
                );
                let gelu = Gelu::new(&cpu, spec.clone(), GeluApproximate::None).unwrap();
                check(
                    "gelu",
                    |x| gelu.forward(x).unwrap(),
                    reference::gelu_erf,
                    &spec,
                );
                let gelu = Gelu::new(&cpu, spec.clone(), GeluApproximate::Tanh).unwrap();
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
        let y = Relu::new(&cpu, spec.clone())
            .unwrap()
            .forward(&x)
            .unwrap()
            .to_vec_f32()
            .unwrap();
        assert!(
            y[0].is_nan() && y[1] == f32::INFINITY && y[2] == 0.0,
            "{y:?}"
        );
        let y = Sigmoid::new(&cpu, spec.clone())
            .unwrap()
            .forward(&x)
            .unwrap()
            .to_vec_f32()
            .unwrap();
        assert!(y[0].is_nan() && y[1] == 1.0 && y[2] == 0.0, "{y:?}");
        let y = Gelu::new(&cpu, spec, GeluApproximate::Tanh)
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
        let relu = Relu::new(&cpu, spec.clone())
            .unwrap()
            .eval_roofline()
            .unwrap();
        assert_eq!((relu.flops, relu.bytes), (n, 4 * n));
        let silu = Silu::new(&cpu, spec.clone())
            .unwrap()
            .eval_roofline()
            .unwrap();
        assert_eq!((silu.flops, silu.bytes), (5 * n, 4 * n));
        let sig = Sigmoid::new(&cpu, spec.clone())
            .unwrap()
            .eval_roofline()
            .unwrap();
        assert_eq!((sig.flops, sig.bytes), (4 * n, 4 * n));
        let gelu = Gelu::new(&cpu, spec.clone(), GeluApproximate::Tanh)
            .unwrap()
            .eval_roofline()
            .unwrap();
        assert_eq!((gelu.flops, gelu.bytes), (9 * n, 4 * n));
    }
}
