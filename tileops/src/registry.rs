//! The ops that registered themselves through `#[roofline_op]`, for the bench harness and tests.
//!
//! Each op struct annotated with `#[roofline_op("name")]` (and not `register = false`) submits one
//! [`OpRegistration`] to an [`inventory`] collection: its manifest name, family, workloads (static
//! data copied from the manifest at compile time) and a constructor hook that plans the op for one
//! workload case. Nothing here evaluates a formula: FLOPs and bytes come from the op's own
//! `eval_roofline`.
//!
//! ```
//! for op in tileops::registry::all() {
//!     println!("{} ({}): {} workloads", op.name, op.family, op.workloads.len());
//! }
//! ```

use crate::roofline::Value;
use crate::{DType, Device, Error, Roofline, RooflineError, Tensor, TensorSpec};

/// A param value from a manifest workload row, stored as static data.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StaticValue {
    /// YAML `null`.
    None,
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i128),
    /// A float (`.inf` included).
    Float(f64),
    /// A string.
    Str(&'static str),
    /// A sequence.
    List(&'static [StaticValue]),
}

impl StaticValue {
    /// The formula value this param binds to (a sequence becomes a list, as in Python).
    pub fn to_value(&self) -> Value {
        match *self {
            StaticValue::None => Value::None,
            StaticValue::Bool(b) => Value::Bool(b),
            StaticValue::Int(i) => Value::Int(i),
            StaticValue::Float(f) => Value::Float(f),
            StaticValue::Str(s) => Value::Str(s.to_owned()),
            StaticValue::List(items) => {
                Value::List(items.iter().map(StaticValue::to_value).collect())
            }
        }
    }

    /// The value as an integer, when it is one.
    pub fn as_int(&self) -> Option<i128> {
        match *self {
            StaticValue::Int(i) => Some(i),
            _ => None,
        }
    }

    /// The value as a float (integers convert), when it is a number.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            StaticValue::Int(i) => Some(i as f64),
            StaticValue::Float(f) => Some(f),
            _ => None,
        }
    }

    /// The value as a list of integers, when it is one.
    pub fn as_int_list(&self) -> Option<Vec<i128>> {
        match *self {
            StaticValue::List(items) => items.iter().map(StaticValue::as_int).collect(),
            _ => None,
        }
    }
}

/// One tensor of an op's manifest signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TensorDecl {
    /// Its name in the signature.
    pub name: &'static str,
    /// The manifest's dtype expression (`"float16 | bfloat16"`, `"same_as(x)"`).
    pub dtype: &'static str,
    /// Fixed-rank shape declaration (`"[M, K]"`), if any.
    pub shape: Option<&'static str>,
    /// Whether the input may be absent.
    pub optional: bool,
}

impl TensorDecl {
    /// For the code `#[roofline_op]` generates; not part of the public API (the struct may gain
    /// fields).
    #[doc(hidden)]
    pub const fn __new(
        name: &'static str,
        dtype: &'static str,
        shape: Option<&'static str>,
        optional: bool,
    ) -> TensorDecl {
        TensorDecl {
            name,
            dtype,
            shape,
            optional,
        }
    }
}

/// One param of an op's manifest signature, with its declared default.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct ParamDecl {
    /// Its name in the signature (`eps`).
    pub name: &'static str,
    /// `default:`, when the manifest declares one.
    pub default: Option<StaticValue>,
}

impl ParamDecl {
    /// For the code `#[roofline_op]` generates; not part of the public API.
    #[doc(hidden)]
    pub const fn __new(name: &'static str, default: Option<StaticValue>) -> ParamDecl {
        ParamDecl { name, default }
    }
}

/// The facts of an op's manifest entry, which `#[roofline_op]` implements for the op struct, so
/// that the op's code states none of them again: its name (for errors), its signature (for
/// arity checks) and its params' defaults (for constructors and workloads).
///
/// ```
/// use tileops::ops::RmsNorm;
/// use tileops::registry::{ManifestOp, StaticValue};
///
/// assert_eq!(RmsNorm::NAME, "rms_norm");
/// assert_eq!(RmsNorm::FAMILY, "normalization");
/// let inputs: Vec<_> = RmsNorm::INPUTS.iter().map(|t| t.name).collect();
/// assert_eq!(inputs, ["x", "weight"]);
/// assert_eq!(RmsNorm::default_param("eps"), Some(StaticValue::Float(1e-6)));
/// ```
pub trait ManifestOp {
    /// The manifest entry's name (`"rms_norm"`).
    const NAME: &'static str;
    /// The entry's `family`.
    const FAMILY: &'static str;
    /// The signature's inputs, in declaration order.
    const INPUTS: &'static [TensorDecl];
    /// The signature's outputs, in declaration order.
    const OUTPUTS: &'static [TensorDecl];
    /// The signature's params, in declaration order.
    const PARAMS: &'static [ParamDecl];

    /// The declared default of param `name`, when the manifest gives one.
    fn default_param(name: &str) -> Option<StaticValue> {
        Self::PARAMS
            .iter()
            .find(|p| p.name == name)
            .and_then(|p| p.default)
    }
}

/// One workload row of the manifest: a label, the dtypes to run, input shapes and params.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Workload {
    /// The row's `label`.
    pub label: &'static str,
    /// The row's `dtypes`; each gives one case.
    pub dtypes: &'static [DType],
    /// `<input>_shape` keys, by input name.
    pub shapes: &'static [(&'static str, &'static [usize])],
    /// Every other key: param values by name.
    pub params: &'static [(&'static str, StaticValue)],
    /// `bench_skip_reason`, when the row is not to be timed.
    pub bench_skip_reason: Option<&'static str>,
}

impl Workload {
    /// For the code `#[roofline_op]` generates; not part of the public API (the struct may gain
    /// fields).
    #[doc(hidden)]
    pub const fn __new(
        label: &'static str,
        dtypes: &'static [DType],
        shapes: &'static [(&'static str, &'static [usize])],
        params: &'static [(&'static str, StaticValue)],
        bench_skip_reason: Option<&'static str>,
    ) -> Workload {
        Workload {
            label,
            dtypes,
            shapes,
            params,
            bench_skip_reason,
        }
    }

    /// The declared shape of input `name`, if the row gives one.
    pub fn shape(&self, name: &str) -> Option<&'static [usize]> {
        self.shapes
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, s)| *s)
    }

    /// The row's value for param `name`, if it gives one.
    pub fn param(&self, name: &str) -> Option<&'static StaticValue> {
        self.params.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// The cases of this row: one per dtype.
    pub fn cases(&'static self) -> impl Iterator<Item = WorkloadCase> {
        self.dtypes.iter().map(move |&dtype| WorkloadCase {
            workload: self,
            dtype,
        })
    }
}

/// One (workload row, dtype) pair: what the bench harness times.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WorkloadCase {
    /// The manifest row.
    pub workload: &'static Workload,
    /// The dtype of this case.
    pub dtype: DType,
}

impl WorkloadCase {
    /// `label-dtype`, as TileOPs names a case.
    pub fn name(&self) -> String {
        format!("{}-{}", self.workload.label, self.dtype)
    }

    /// The spec of input `name` in this case: its row shape and the case dtype.
    pub fn input_spec(&self, name: &str) -> Option<TensorSpec> {
        self.workload
            .shape(name)
            .map(|shape| TensorSpec::new(shape, self.dtype))
    }

    /// Input `name` of `op` in `dtype` (an input whose dtype is fixed, like int64 positions), or
    /// an error naming the `<name>_shape` key the row lacks.
    pub fn require_input_as(
        &self,
        op: &'static str,
        name: &'static str,
        dtype: DType,
    ) -> Result<TensorSpec, Error> {
        let shape = self
            .workload
            .shape(name)
            .ok_or_else(|| Error::InvalidParam {
                op,
                field: name,
                value: "missing".to_owned(),
                reason: format!("workload `{}` gives no `{name}_shape`", self.workload.label),
            })?;
        Ok(TensorSpec::new(shape, dtype))
    }

    /// Input `name` of `op` in the case dtype, or an error naming the missing `<name>_shape` key.
    pub fn require_input(&self, op: &'static str, name: &'static str) -> Result<TensorSpec, Error> {
        self.require_input_as(op, name, self.dtype)
    }
}

/// What the macro implements for every registered op: its manifest name and its roofline.
pub trait RooflineModel {
    /// The manifest entry's name.
    fn op_name(&self) -> &'static str;
    /// FLOPs and bytes of one call, as the manifest's formulas give them (the generated
    /// `eval_roofline`).
    fn roofline(&self) -> Result<Roofline, RooflineError>;
}

/// Plans an op for one manifest workload case: the constructor hook of the registry.
///
/// Implemented by hand for each registered op: it maps the case's input shapes, params and dtype
/// onto the op's own constructor, so the constructor's validation applies.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is registered for the benchmark but does not implement `FromWorkload`",
    label = "`#[roofline_op]` registers this op, so it must plan itself from a manifest workload",
    note = "implement `tileops::registry::FromWorkload` and `tileops::registry::BenchOp` for \
            `{Self}` (see the ops in tileops::ops), or leave it out of the registry: \
            `#[roofline_op(\"name\", register = false)]`"
)]
pub trait FromWorkload: Sized {
    /// Plan the op on `device` for `case`.
    fn from_workload(device: &Device, case: &WorkloadCase) -> Result<Self, Error>;
}

/// An op planned for one case, as the bench harness drives it.
///
/// Implemented by hand for each registered op; [`RooflineModel`] comes from the macro.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is registered for the benchmark but does not implement `BenchOp`",
    label = "`#[roofline_op]` registers this op, so the harness must be able to run it",
    note = "implement `tileops::registry::BenchOp` (and `FromWorkload`) for `{Self}`, or leave \
            it out of the registry: `#[roofline_op(\"name\", register = false)]`"
)]
pub trait BenchOp: RooflineModel {
    /// The roof the op is priced against: the unit an optimal implementation would use
    /// (`cuda_core.fp32` for elementwise work, `tensor_core.<dtype>` for matrix products).
    fn roof(&self) -> RoofKey;
    /// Fresh inputs for one call, filled deterministically from `seed`, on the op's device.
    fn random_inputs(&self, seed: u64) -> Result<Vec<Tensor>, Error>;
    /// Inputs of the planned specs whose values do not matter, for a call whose kernels are
    /// launched but not run (the bench's dry launches on the emulated device, which record launch
    /// shapes): left uninitialised where the op can, which costs a fraction of drawing random
    /// values; index inputs (block tables, lengths, positions) still hold valid values. Never
    /// run a kernel on them. Defaults to [`BenchOp::random_inputs`].
    fn placeholder_inputs(&self) -> Result<Vec<Tensor>, Error> {
        self.random_inputs(0)
    }
    /// One call of the op on `inputs` (asynchronous on a GPU: the harness synchronises).
    fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, Error>;
    /// The distinct tensors one call reads and writes, as planned (no data), when the op declares
    /// them. The bytes oracle (`tests/bytes_oracle.rs`) recomputes the minimum traffic from these
    /// and holds `eval_roofline`'s bytes to it, independently of the manifest's formula.
    fn traffic(&self) -> Option<Traffic> {
        None
    }
    /// The bytes one call's kernels stream through their main loops, when that is more than the
    /// roofline's once-each count: a tiled attention reads each K/V tile once per query tile and
    /// head that sees it. The kernel ledger amortises a loop's instructions over these (as the
    /// loop's elements per iteration count them). `None` (the default): what the roofline counts,
    /// each input read once.
    fn streamed_bytes(&self) -> Option<u64> {
        None
    }
    /// The dtype of each input the plan took in another dtype than the manifest row's case
    /// dtype says (an fp8 KV cache beside 16-bit queries), by its manifest name: what the bench
    /// records for it. Empty (the default): every input is the case's dtype or the one its
    /// declaration fixes.
    fn input_dtypes(&self) -> Vec<(&'static str, crate::DType)> {
        Vec::new()
    }
}

/// The tensors one call of an op reads and writes: each distinct input once, each output once.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Traffic {
    /// Tensors read (each distinct input once).
    pub reads: Vec<TensorSpec>,
    /// Tensors written (each output once; an updated input counts as written too).
    pub writes: Vec<TensorSpec>,
}

impl Traffic {
    /// The minimum bytes of one call: every read and every write once, densely packed;
    /// [`Error::ShapeOverflow`] when a tensor's size, or the sum, overflows.
    ///
    /// ```
    /// use tileops::registry::Traffic;
    /// use tileops::{DType, TensorSpec};
    /// let x = TensorSpec::new([4, 8], DType::BFloat16);
    /// let traffic = Traffic { reads: vec![x.clone()], writes: vec![x] };
    /// assert_eq!(traffic.min_bytes()?, 2 * 4 * 8 * 2);
    ///
    /// let huge = TensorSpec::new([1 << 40, 1 << 40], DType::BFloat16);
    /// assert!(Traffic { reads: vec![huge], writes: vec![] }.min_bytes().is_err());
    /// # Ok::<(), tileops::Error>(())
    /// ```
    pub fn min_bytes(&self) -> Result<u64, Error> {
        let mut total: u64 = 0;
        for t in self.reads.iter().chain(&self.writes) {
            let overflow = || Error::ShapeOverflow {
                shape: t.shape.clone(),
                dtype: t.dtype,
                what: "byte size",
            };
            let bytes = u64::try_from(t.size_in_bytes()?).map_err(|_| overflow())?;
            total = total.checked_add(bytes).ok_or_else(overflow)?;
        }
        Ok(total)
    }
}

/// A roof of a profile: a ceiling a record is priced against (`cuda_core.fp32`,
/// `tensor_core.bf16`, …; `hbm` for memory). [`RoofKey::ALL`] is the whole vocabulary: the keys a
/// profile may define, and the only place a roof's name is spelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RoofKey(pub &'static str);

impl RoofKey {
    /// Memory bandwidth, bytes/s: a GPU's HBM, or on a host profile its DRAM.
    pub const HBM: RoofKey = RoofKey("hbm");
    /// FP32 work on CUDA cores: elementwise ops, reductions, norms.
    pub const CUDA_CORE_FP32: RoofKey = RoofKey("cuda_core.fp32");
    /// Float16 matrix products on tensor cores.
    pub const TENSOR_CORE_FP16: RoofKey = RoofKey("tensor_core.fp16");
    /// BFloat16 matrix products on tensor cores.
    pub const TENSOR_CORE_BF16: RoofKey = RoofKey("tensor_core.bf16");
    /// Float32 matrix products on tensor cores, which run them as TF32.
    pub const TENSOR_CORE_TF32: RoofKey = RoofKey("tensor_core.tf32");
    /// FP8 (either format) matrix products on tensor cores.
    pub const TENSOR_CORE_FP8: RoofKey = RoofKey("tensor_core.fp8");
    /// The host's f64 FMA rate: the compute ceiling of the CPU backend, whose references run in
    /// f64 whatever the dtype.
    pub const CPU_FP64: RoofKey = RoofKey("cpu.fp64");
    /// The host's f32 FMA rate.
    pub const CPU_FP32: RoofKey = RoofKey("cpu.fp32");

    /// Every roof a profile may define: [`RoofKey::HBM`] (bytes/s), then the compute roofs
    /// (FLOP/s): a GPU's, then a host's.
    pub const ALL: &'static [RoofKey] = &[
        RoofKey::HBM,
        RoofKey::CUDA_CORE_FP32,
        RoofKey::TENSOR_CORE_FP16,
        RoofKey::TENSOR_CORE_BF16,
        RoofKey::TENSOR_CORE_TF32,
        RoofKey::TENSOR_CORE_FP8,
        RoofKey::CPU_FP64,
        RoofKey::CPU_FP32,
    ];

    /// The tensor-core roof of a matrix product in `dtype` (float32 runs as TF32), if any.
    pub fn tensor_core(dtype: DType) -> Option<RoofKey> {
        match dtype {
            DType::Float16 => Some(RoofKey::TENSOR_CORE_FP16),
            DType::BFloat16 => Some(RoofKey::TENSOR_CORE_BF16),
            DType::Float32 => Some(RoofKey::TENSOR_CORE_TF32),
            DType::Float8E4M3Fn | DType::Float8E5M2 => Some(RoofKey::TENSOR_CORE_FP8),
            _ => None,
        }
    }

    /// The key as profiles and records spell it (`"tensor_core.bf16"`).
    pub const fn as_str(self) -> &'static str {
        self.0
    }

    /// The roof named `key`, if it is one of [`RoofKey::ALL`].
    ///
    /// ```
    /// use tileops::registry::RoofKey;
    /// assert_eq!(RoofKey::parse("tensor_core.bf16"), Some(RoofKey::TENSOR_CORE_BF16));
    /// assert_eq!(RoofKey::parse("tensor_core.int8"), None);
    /// ```
    pub fn parse(key: &str) -> Option<RoofKey> {
        RoofKey::ALL.iter().copied().find(|roof| roof.0 == key)
    }
}

impl std::fmt::Display for RoofKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// The static description of a registered op, submitted by `#[roofline_op]`.
#[derive(Debug)]
#[non_exhaustive]
pub struct OpRegistration {
    /// Manifest entry name (`"softmax"`).
    pub name: &'static str,
    /// Manifest `family`.
    pub family: &'static str,
    /// The manifest file the entry came from, relative to the crate that declared the op.
    pub manifest_file: &'static str,
    /// The signature's inputs, in declaration order.
    pub inputs: &'static [TensorDecl],
    /// The signature's outputs, in declaration order.
    pub outputs: &'static [TensorDecl],
    /// The signature's params, in declaration order, with their declared defaults.
    pub params: &'static [ParamDecl],
    /// The manifest's workload rows.
    pub workloads: &'static [Workload],
    /// Plans the op for one workload case, for the bench harness.
    pub build: BuildHook,
}

impl OpRegistration {
    /// For the code `#[roofline_op]` generates; not part of the public API (the struct may gain
    /// fields). The name, family and signature are `Op`'s [`ManifestOp`] constants, which the
    /// same expansion emits: stated once.
    #[doc(hidden)]
    pub const fn __new<Op: ManifestOp>(
        manifest_file: &'static str,
        workloads: &'static [Workload],
        build: BuildHook,
    ) -> OpRegistration {
        OpRegistration {
            name: Op::NAME,
            family: Op::FAMILY,
            manifest_file,
            inputs: Op::INPUTS,
            outputs: Op::OUTPUTS,
            params: Op::PARAMS,
            workloads,
            build,
        }
    }
}

/// The constructor hook of a registered op: `FromWorkload` then boxing.
pub type BuildHook = fn(&Device, &WorkloadCase) -> Result<Box<dyn BenchOp>, Error>;

inventory::collect!(OpRegistration);

/// Every registered op, sorted by name.
pub fn all() -> Vec<&'static OpRegistration> {
    let mut ops: Vec<_> = inventory::iter::<OpRegistration>.into_iter().collect();
    ops.sort_by_key(|op| op.name);
    ops
}

/// The registered op of that manifest name.
pub fn find(name: &str) -> Option<&'static OpRegistration> {
    inventory::iter::<OpRegistration>
        .into_iter()
        .find(|op| op.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    static ROW: Workload = Workload {
        label: "small",
        dtypes: &[DType::BFloat16],
        shapes: &[("x", &[4, 8]), ("positions", &[4])],
        params: &[],
        bench_skip_reason: None,
    };

    #[test]
    fn required_inputs_take_the_case_dtype_or_a_fixed_one() {
        let case = WorkloadCase {
            workload: &ROW,
            dtype: DType::BFloat16,
        };
        assert_eq!(
            case.require_input("op", "x").unwrap(),
            TensorSpec::new([4, 8], DType::BFloat16)
        );
        assert_eq!(
            case.require_input_as("op", "positions", DType::Int64)
                .unwrap(),
            TensorSpec::new([4], DType::Int64)
        );
        let err = case.require_input("op", "weight").unwrap_err().to_string();
        assert!(
            err.contains("workload `small` gives no `weight_shape`"),
            "{err}"
        );
    }
}
