//! `sum`, `mean`, `amax` and `logsumexp` over any set of dims, sharing one plan ([`ReducePlan`]
//! inside each op) and one kernel file (`reduce.cu`).
//!
//! The plan merges adjacent dims of the same kind (kept or reduced) and drops dims of size 1,
//! then picks a layout: the reduced dims trailing (`rows`, the fast path: one warp or block per
//! row, 16-byte loads), one block of reduced dims between kept ones (`cols`: coalesced along the
//! kept inner dims), several blocks of reduced dims with a long reduced innermost one (`runs`:
//! each contiguous run a row of 16-byte loads, its partial state combined per output by
//! `reduce_finish`), or anything else (`strided`: one block per output, addressed through
//! (size, stride) pairs).

use cudarc::driver::{CudaSlice, DeviceRepr, LaunchConfig};

use super::reference::{self, ReduceKind};
use crate::device::CudaDevice;
use crate::kernels::{self, REDUCE};
use crate::ops::backend::{self, Backends, cpu_f64, unary_bench_op, workload_param};
use crate::ops::launch::{self, launch};
use crate::ops::{check_extents, check_float_dtype, check_has_dims, check_input, pow2_clamped};
use crate::registry::{FromWorkload, ManifestOp, RoofKey, StaticValue, WorkloadCase};
use crate::roofline::Value;
use crate::{DType, Device, Error, Tensor, TensorSpec};

/// The `dim` param of a reduction: one dim or a list of them, Python-style (negative counts from
/// the end). It binds to the manifest's formulas as an int or a list, as in TileOPs.
///
/// ```
/// use tileops::ops::ReduceDim;
/// assert_eq!(ReduceDim::from(-1), ReduceDim::One(-1));
/// assert_eq!(ReduceDim::from([0, 2]), ReduceDim::Many(vec![0, 2]));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ReduceDim {
    /// `dim=-1`.
    One(i64),
    /// `dim=[0, 2]` (at least one dim, no two naming the same axis).
    Many(Vec<i64>),
}

impl ReduceDim {
    /// The dims as a list.
    pub fn dims(&self) -> Vec<i64> {
        match self {
            ReduceDim::One(d) => vec![*d],
            ReduceDim::Many(dims) => dims.clone(),
        }
    }
}

impl std::fmt::Display for ReduceDim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReduceDim::One(d) => write!(f, "{d}"),
            ReduceDim::Many(dims) => write!(f, "{dims:?}"),
        }
    }
}

impl From<i64> for ReduceDim {
    fn from(d: i64) -> Self {
        ReduceDim::One(d)
    }
}

impl From<i32> for ReduceDim {
    fn from(d: i32) -> Self {
        ReduceDim::One(d.into())
    }
}

impl From<Vec<i64>> for ReduceDim {
    fn from(dims: Vec<i64>) -> Self {
        ReduceDim::Many(dims)
    }
}

impl From<&[i64]> for ReduceDim {
    fn from(dims: &[i64]) -> Self {
        ReduceDim::Many(dims.to_vec())
    }
}

impl<const N: usize> From<[i64; N]> for ReduceDim {
    fn from(dims: [i64; N]) -> Self {
        ReduceDim::Many(dims.to_vec())
    }
}

impl From<ReduceDim> for Value {
    /// An int for one dim, a list for several: what `isinstance(dim, int)` tells apart.
    fn from(dim: ReduceDim) -> Value {
        match dim {
            ReduceDim::One(d) => Value::from(d),
            ReduceDim::Many(dims) => Value::from(dims),
        }
    }
}

/// At most this many merged blocks of kept dims, and of reduced dims (the kernel's `kMaxDims`).
const MAX_BLOCKS: usize = 8;

/// The kernel's `ReduceGeom`: the same layout as the C struct (`long long[8]` x 4, `int` x 2).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ReduceGeom {
    kept_size: [i64; MAX_BLOCKS],
    kept_stride: [i64; MAX_BLOCKS],
    red_size: [i64; MAX_BLOCKS],
    red_stride: [i64; MAX_BLOCKS],
    kept_rank: i32,
    red_rank: i32,
}

// SAFETY: plain old data with the C layout of `ReduceGeom` in reduce.cu, passed by value.
unsafe impl DeviceRepr for ReduceGeom {}

/// How the kernels see the reduction.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Layout {
    /// `rows` contiguous rows of `n`, each reduced to one value.
    Rows { rows: usize, n: usize },
    /// `[outer, n, inner]` reduced over `n`.
    Cols {
        outer: usize,
        n: usize,
        inner: usize,
    },
    /// Several blocks of reduced dims, the innermost one reduced: each output reduces `per_out`
    /// contiguous runs of `run` elements (`n = per_out * run`). `geom` holds the kept dims and the
    /// reduced dims outside the run, in elements.
    Runs {
        geom: Box<ReduceGeom>,
        outputs: usize,
        per_out: usize,
        run: usize,
    },
    /// Anything else.
    Strided {
        geom: Box<ReduceGeom>,
        outputs: usize,
        n: usize,
    },
}

/// Merges adjacent dims of the same kind and drops dims of size 1; returns (reduced?, size,
/// stride) blocks, outermost first.
fn merged_blocks(shape: &[usize], axes: &[usize]) -> Vec<(bool, usize, usize)> {
    let mut blocks: Vec<(bool, usize, usize)> = Vec::new();
    let mut stride = 1;
    for d in (0..shape.len()).rev() {
        let size = shape[d];
        let reduced = axes.contains(&d);
        if size != 1 {
            match blocks.last_mut() {
                Some(last) if last.0 == reduced => last.1 *= size,
                _ => blocks.push((reduced, size, stride)),
            }
        }
        stride *= size;
    }
    blocks.reverse();
    blocks
}

fn layout(op: &'static str, x: &TensorSpec, axes: &[usize]) -> Result<Layout, Error> {
    let blocks = merged_blocks(&x.shape, axes);
    let numel = x.numel()?;
    let reduced: Vec<_> = blocks.iter().filter(|b| b.0).collect();
    let n: usize = reduced.iter().map(|b| b.1).product();
    let trailing = blocks.last().is_some_and(|b| b.0);
    if reduced.is_empty() || (reduced.len() == 1 && trailing && i32::try_from(n).is_ok()) {
        return Ok(Layout::Rows { rows: numel / n, n });
    }
    if reduced.len() == 1 {
        let at = blocks.iter().position(|b| b.0).unwrap_or(0);
        let inner: usize = blocks[at + 1..].iter().map(|b| b.1).product();
        let outer = numel / (n * inner);
        // The cols kernel indexes its tiles of 32 columns in 32 bits.
        let tiles_fit = outer
            .checked_mul(inner.div_ceil(32))
            .is_some_and(|tiles| tiles <= i32::MAX as usize);
        if !trailing && tiles_fit {
            return Ok(Layout::Cols { outer, n, inner });
        }
    }
    let kept: Vec<_> = blocks.iter().filter(|b| !b.0).collect();
    let run = blocks.last().map_or(1, |b| b.1);
    // Runs: the innermost block reduced and long enough that a run fills a row of 16-byte loads
    // (shorter runs leave most lanes of a warp idle); the kernel counts a run's elements and
    // indexes the runs in 32 bits.
    let runs_fit = trailing
        && run >= MIN_RUN_BYTES / x.dtype.size_in_bytes()
        && i32::try_from(run).is_ok()
        && i32::try_from(numel / run).is_ok();
    if kept.len() > MAX_BLOCKS || reduced.len() > MAX_BLOCKS + usize::from(runs_fit) {
        return Err(Error::InvalidShape {
            op,
            field: "x",
            shape: x.shape.clone(),
            reason: format!(
                "the dims split into more than {MAX_BLOCKS} separate blocks of kept or reduced \
                 dims; reduce in two steps"
            ),
        });
    }
    // The runs layout addresses whole runs: the run's own block is left out of the geometry.
    let outer_reduced = &reduced[..reduced.len() - usize::from(runs_fit)];
    let geom = Box::new(reduce_geom(&kept, outer_reduced));
    let outputs = numel / n;
    Ok(if runs_fit {
        Layout::Runs {
            geom,
            outputs,
            per_out: n / run,
            run,
        }
    } else {
        Layout::Strided { geom, outputs, n }
    })
}

/// The shortest run, in bytes, of the runs layout: 8 vectors of 16 bytes.
const MIN_RUN_BYTES: usize = 128;

/// The kernels' geometry for these kept and reduced (reduced?, size, stride) blocks, at most
/// `MAX_BLOCKS` of each.
fn reduce_geom(kept: &[&(bool, usize, usize)], reduced: &[&(bool, usize, usize)]) -> ReduceGeom {
    let mut geom = ReduceGeom {
        kept_size: [1; MAX_BLOCKS],
        kept_stride: [0; MAX_BLOCKS],
        red_size: [1; MAX_BLOCKS],
        red_stride: [0; MAX_BLOCKS],
        kept_rank: kept.len() as i32,
        red_rank: reduced.len() as i32,
    };
    // Extents and strides fit i64: check_extents bounded the byte size by isize::MAX.
    for (i, b) in kept.iter().enumerate() {
        geom.kept_size[i] = b.1 as i64;
        geom.kept_stride[i] = b.2 as i64;
    }
    for (i, b) in reduced.iter().enumerate() {
        geom.red_size[i] = b.1 as i64;
        geom.red_stride[i] = b.2 as i64;
    }
    geom
}

/// Chunks per row for the split rows kernel, when one block per row would leave most of the
/// GPU idle (fewer than 2 rows per SM) and rows are long enough to cut into chunks of at least
/// 512 vectors (256 threads x 2).
fn row_chunks(rows: usize, vectors: usize, sms: usize) -> Option<usize> {
    const MIN_CHUNK: usize = 512;
    if rows >= 2 * sms {
        return None;
    }
    let chunks = (4 * sms).div_ceil(rows).min(vectors / MIN_CHUNK);
    (chunks >= 2).then_some(chunks)
}

/// `reduce_rows_lse_*` holds a row in registers: `LSE_VECTORS` 16-byte vectors per thread (the
/// kernel's `kLseVectors`), at most `LSE_THREADS` threads (its launch bound).
const LSE_VECTORS: usize = 8;
const LSE_THREADS: usize = 512;

/// Chunks per row for logsumexp rows too long for `reduce_rows_lse_*`'s registers (more than
/// `LSE_VECTORS * LSE_THREADS` vectors) when `row_chunks` keeps them whole (many rows): the
/// split kernel, in chunks of at most that many vectors.
fn lse_row_chunks(vectors: usize) -> Option<usize> {
    const MAX: usize = LSE_VECTORS * LSE_THREADS;
    (vectors > MAX).then(|| vectors.div_ceil(MAX))
}

/// Slices of n for the split cols kernels, when the column tiles alone give fewer than 2 blocks
/// per SM and n has at least 32 rows per slice to share.
fn col_splits(tiles: usize, n: usize, sms: usize) -> Option<usize> {
    if tiles >= 2 * sms {
        return None;
    }
    let splits = (4 * sms).div_ceil(tiles.max(1)).min(n / 32).min(65_535);
    (splits >= 2).then_some(splits)
}

/// Scratch for `pairs` partial states (f32 pairs).
fn alloc_pairs(dev: &CudaDevice, op: &str, pairs: usize) -> Result<CudaSlice<u8>, Error> {
    // SAFETY: every pair is written by the split kernel before reduce_finish reads it (same
    // stream).
    unsafe { dev.stream.alloc::<u8>(pairs * 8) }
        .map_err(|e| Error::driver(format!("allocating {op} scratch"), e))
}

/// Combines `splits` partial states per output into y (reduce_finish_*).
#[allow(clippy::too_many_arguments)]
fn finish(
    dev: &CudaDevice,
    kind: &str,
    dtype: DType,
    part: &CudaSlice<u8>,
    ys: &mut cudarc::driver::CudaViewMut<'_, u8>,
    outputs: usize,
    splits: usize,
    n: usize,
) -> Result<(), Error> {
    let entry = kernels::entry(&REDUCE, &format!("reduce_finish_{kind}"), dtype)?;
    let blocks = outputs.div_ceil(256).min(dev.sm_count as usize * 16).max(1);
    let cfg = LaunchConfig {
        grid_dim: (launch::grid_dim(entry, blocks)?, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    let (outputs, splits, n) = (outputs as i64, splits as i32, n as i64);
    // SAFETY: reduce_finish_*(const float2*, T*, long long, int, long long); part holds
    // outputs * splits pairs, y outputs elements.
    unsafe { launch!(dev, &REDUCE, entry, cfg; part, ys, &outputs, &splits, &n) }
}

/// The plan every reduction shares: validated dims, the output spec and the kernel layout.
#[derive(Debug, Clone)]
struct ReducePlan {
    /// The op's manifest name, for errors.
    op: &'static str,
    kind: ReduceKind,
    x: TensorSpec,
    y: TensorSpec,
    axes: Vec<usize>,
    layout: Layout,
}

impl ReducePlan {
    fn new(
        op: &'static str,
        kind: ReduceKind,
        x: &TensorSpec,
        dim: &ReduceDim,
        keepdim: bool,
    ) -> Result<ReducePlan, Error> {
        check_float_dtype(op, "x", x)?;
        check_has_dims(op, "x", x, "")?;
        let rank = x.rank();
        let dims = dim.dims();
        if dims.is_empty() {
            return Err(Error::InvalidParam {
                op,
                field: "dim",
                value: dim.to_string(),
                reason: "name at least one dim".to_owned(),
            });
        }
        let rank_i = rank as i64;
        let mut axes: Vec<usize> = Vec::with_capacity(dims.len());
        for &d in &dims {
            if !(-rank_i..rank_i).contains(&d) {
                return Err(Error::InvalidParam {
                    op,
                    field: "dim",
                    value: dim.to_string(),
                    reason: format!(
                        "{d} is out of range: each dim must be in [-{rank}, {rank}) for a \
                         rank-{rank} input {x}"
                    ),
                });
            }
            let axis = d.rem_euclid(rank_i) as usize;
            if axes.contains(&axis) {
                return Err(Error::InvalidParam {
                    op,
                    field: "dim",
                    value: dim.to_string(),
                    reason: format!("dim {axis} appears more than once"),
                });
            }
            axes.push(axis);
        }
        axes.sort_unstable();
        check_extents(op, "x", x)?;
        let y_shape: Vec<usize> = (0..rank)
            .filter_map(|d| match (axes.contains(&d), keepdim) {
                (false, _) => Some(x.shape[d]),
                (true, true) => Some(1),
                (true, false) => None,
            })
            .collect();
        Ok(ReducePlan {
            op,
            kind,
            x: x.clone(),
            y: TensorSpec::new(y_shape, x.dtype),
            layout: layout(op, x, &axes)?,
            axes,
        })
    }

    /// The CPU backend: the reference on a host copy.
    fn cpu(&self, x: crate::TensorRef<'_>, y: &mut crate::TensorMut<'_>) -> Result<(), Error> {
        cpu_f64([x], y, |[x]| {
            reference::reduce(&x, &self.x.shape, &self.axes, self.kind)
        })
    }

    /// The CUDA backend: the kernels for the layout, on `x`'s and `y`'s buffers.
    fn cuda(
        &self,
        dev: &CudaDevice,
        xs: &cudarc::driver::CudaView<'_, u8>,
        ys: &mut cudarc::driver::CudaViewMut<'_, u8>,
    ) -> Result<(), Error> {
        let op = self.op;
        let dtype = self.x.dtype;
        let kind = match self.kind {
            ReduceKind::Sum => "sum",
            ReduceKind::Mean => "mean",
            ReduceKind::Amax => "amax",
            ReduceKind::Logsumexp => "lse",
        };
        let per_vector = 16 / dtype.size_in_bytes();
        match &self.layout {
            &Layout::Rows { rows, n } => {
                let sms = dev.sm_count as usize;
                let lse = self.kind == ReduceKind::Logsumexp;
                if let Some(chunks) = row_chunks(rows, n / per_vector, sms)
                    .or_else(|| lse.then(|| lse_row_chunks(n / per_vector)).flatten())
                {
                    // Few long rows: chunks of each row on separate blocks, then a combine.
                    let entry =
                        kernels::entry(&REDUCE, &format!("reduce_rows_split_{kind}"), dtype)?;
                    let chunk = (n / per_vector).div_ceil(chunks);
                    let cfg = LaunchConfig {
                        grid_dim: (launch::grid_dim(entry, chunks)?, rows.min(65_535) as u32, 1),
                        block_dim: (256, 1, 1),
                        shared_mem_bytes: 0,
                    };
                    let mut part = alloc_pairs(dev, op, rows * chunks)?;
                    let (rows_i, n_i, chunk_i) = (rows as i64, n as i32, chunk as i32);
                    // SAFETY: reduce_rows_split_*(const T*, float2*, long long, int, int); x
                    // holds rows * n elements, part rows * chunks pairs (gridDim.x = chunks);
                    // chunks * chunk covers every vector of a row.
                    unsafe {
                        launch!(dev, &REDUCE, entry, cfg; xs, &mut part, &rows_i, &n_i, &chunk_i)
                    }?;
                    return finish(dev, kind, dtype, &part, ys, rows, chunks, n);
                }
                let entry = kernels::entry(&REDUCE, &format!("reduce_rows_{kind}"), dtype)?;
                // Four 16-byte vectors per thread per pass (logsumexp: the row in registers,
                // LSE_VECTORS per thread); small rows share a block.
                let threads_per_row = if lse {
                    pow2_clamped((n / per_vector).div_ceil(LSE_VECTORS), 32, LSE_THREADS)
                } else {
                    pow2_clamped((n / per_vector).div_ceil(4), 32, 1024)
                };
                let rows_per_block = (128 / threads_per_row).max(1);
                let cfg = LaunchConfig {
                    grid_dim: (
                        launch::grid_dim(entry, rows.div_ceil(rows_per_block))?,
                        1,
                        1,
                    ),
                    block_dim: (threads_per_row as u32, rows_per_block as u32, 1),
                    shared_mem_bytes: 0,
                };
                let (rows, n) = (rows as i64, n as i32);
                // SAFETY: reduce_rows_*(const T*, T*, long long, int); x holds rows * n elements,
                // y rows; blockDim.x is a multiple of 32, <= 1024, and blockDim.y <= 32.
                unsafe { launch!(dev, &REDUCE, entry, cfg; xs, ys, &rows, &n) }
            }
            &Layout::Cols { outer, n, inner } => {
                let vectorized = inner.is_multiple_of(per_vector);
                let base = if vectorized {
                    format!("reduce_cols_vec_{kind}")
                } else {
                    format!("reduce_cols_{kind}")
                };
                let entry = kernels::entry(&REDUCE, &base, dtype)?;
                let groups = inner / if vectorized { per_vector } else { 1 };
                let tiles = outer * groups.div_ceil(32);
                let sms = dev.sm_count as usize;
                if let Some(splits) = col_splits(tiles, n, sms) {
                    // Few columns: slices of n on separate blocks, then a combine.
                    let base = if vectorized {
                        format!("reduce_cols_vec_split_{kind}")
                    } else {
                        format!("reduce_cols_split_{kind}")
                    };
                    let entry = kernels::entry(&REDUCE, &base, dtype)?;
                    let cfg = LaunchConfig {
                        grid_dim: (launch::grid_dim(entry, tiles)?, splits as u32, 1),
                        block_dim: (32, 8, 1),
                        shared_mem_bytes: 0,
                    };
                    let outputs = outer * inner;
                    let mut part = alloc_pairs(dev, op, outputs * splits)?;
                    let (outer_i, n_i, inner_i) = (outer as i64, n as i64, inner as i64);
                    let slice = n.div_ceil(splits) as i64;
                    // SAFETY: reduce_cols*_split_*(const T*, float2*, long long, long long,
                    // long long, long long); part holds outer * inner * splits pairs (gridDim.y =
                    // splits slices of `slice` cover n), and gridDim.x = tiles covers every
                    // column once.
                    unsafe {
                        launch!(dev, &REDUCE, entry, cfg;
                            xs, &mut part, &outer_i, &n_i, &inner_i, &slice)
                    }?;
                    return finish(dev, kind, dtype, &part, ys, outputs, splits, n);
                }
                let blocks = tiles.min(dev.sm_count as usize * 16).max(1);
                let cfg = LaunchConfig {
                    grid_dim: (launch::grid_dim(entry, blocks)?, 1, 1),
                    // The kernel's kColsX x kColsY.
                    block_dim: (32, 8, 1),
                    shared_mem_bytes: 0,
                };
                let (outer, n, inner) = (outer as i64, n as i64, inner as i64);
                // SAFETY: reduce_cols*(const T*, T*, long long, long long, long long); x holds
                // outer * n * inner elements, y outer * inner; the block is (32, 8).
                unsafe { launch!(dev, &REDUCE, entry, cfg; xs, ys, &outer, &n, &inner) }
            }
            Layout::Runs {
                geom,
                outputs,
                per_out,
                run,
            } => {
                let (geom, outputs, per_out, run): (&ReduceGeom, usize, usize, usize) =
                    (geom, *outputs, *per_out, *run);
                let entry = kernels::entry(&REDUCE, &format!("reduce_runs_{kind}"), dtype)?;
                let runs = outputs * per_out;
                let vectors = run / per_vector;
                // Few long runs are cut into chunks, as rows are (one block per run would leave
                // most SMs idle); the finish then combines per_out * chunks states per output.
                let chunks = row_chunks(runs, vectors, dev.sm_count as usize)
                    .filter(|&c| i32::try_from(per_out * c).is_ok())
                    .unwrap_or(1);
                let chunk = vectors.div_ceil(chunks).max(1);
                // Four 16-byte vectors per thread, as the rows kernel; short runs share a block.
                let threads_per_row = pow2_clamped(chunk.div_ceil(4), 32, 1024);
                let rows_per_block = (128 / threads_per_row).max(1);
                let cfg = LaunchConfig {
                    grid_dim: (
                        launch::grid_dim(entry, runs.div_ceil(rows_per_block))?,
                        chunks as u32,
                        1,
                    ),
                    block_dim: (threads_per_row as u32, rows_per_block as u32, 1),
                    shared_mem_bytes: 0,
                };
                let mut part = alloc_pairs(dev, op, runs * chunks)?;
                let (runs_i, per_out_i, run_i, chunk_i) =
                    (runs as i64, per_out as i64, run as i32, chunk as i32);
                // SAFETY: reduce_runs_*(const T*, float2*, ReduceGeom, long long, long long, int,
                // int); the geometry and the run address only elements of x (their sizes
                // multiply to its numel), part holds runs * chunks pairs (gridDim.y = chunks of
                // `chunk` vectors cover a run); blockDim.x is a multiple of 32, <= 1024, and
                // blockDim.y <= 32.
                unsafe {
                    launch!(dev, &REDUCE, entry, cfg;
                        xs, &mut part, geom, &runs_i, &per_out_i, &run_i, &chunk_i)
                }?;
                finish(
                    dev,
                    kind,
                    dtype,
                    &part,
                    ys,
                    outputs,
                    per_out * chunks,
                    per_out * run,
                )
            }
            Layout::Strided { geom, outputs, n } => {
                let (geom, outputs, n): (&ReduceGeom, usize, usize) = (geom, *outputs, *n);
                let entry = kernels::entry(&REDUCE, &format!("reduce_strided_{kind}"), dtype)?;
                let blocks = outputs.min(dev.sm_count as usize * 32).max(1);
                let cfg = LaunchConfig {
                    grid_dim: (launch::grid_dim(entry, blocks)?, 1, 1),
                    block_dim: (256, 1, 1),
                    shared_mem_bytes: 0,
                };
                let (outputs, n) = (outputs as i64, n as i64);
                // SAFETY: reduce_strided_*(const T*, T*, ReduceGeom, long long, long long); the
                // geometry addresses only elements of x (sizes multiply to its numel), y holds
                // `outputs` elements.
                unsafe { launch!(dev, &REDUCE, entry, cfg; xs, ys, geom, &outputs, &n) }
            }
        }
    }
}

/// The parts of a reduction's API that do not depend on the op.
macro_rules! reduce_op {
    ($(#[$doc:meta])* $name:ident, $manifest:tt, $kind:expr) => {
        $(#[$doc])*
        #[crate::roofline_op($manifest)]
        #[derive(Debug, Clone)]
        pub struct $name {
            /// The input the op is planned for (the manifest's formulas read its shape).
            x: TensorSpec,
            /// The dims, as given; an int or a list in the formulas.
            dim: ReduceDim,
            /// Whether reduced dims stay, with size 1.
            keepdim: bool,
            device: Device,
            plan: ReducePlan,
        }

        impl $name {
            /// The roof an optimal reduction is priced against: memory-bound work on CUDA cores.
            pub const ROOF: RoofKey = RoofKey::CUDA_CORE_FP32;

            /// Plans the reduction of inputs like `x` over `dim` (one dim or a list, Python-style:
            /// `-1` is the last), keeping the reduced dims with size 1 when `keepdim`.
            ///
            /// Errors when `x` has rank 0, no elements, or a dtype other than float32, float16 or
            /// bfloat16; when a dim is outside `[-rank, rank)`, the list is empty, or two dims
            /// name the same axis.
            pub fn new(
                x: TensorSpec,
                dim: impl Into<ReduceDim>,
                keepdim: bool,
                device: &Device,
            ) -> Result<Self, Error> {
                let dim = dim.into();
                let plan = ReducePlan::new(Self::NAME, $kind, &x, &dim, keepdim)?;
                Ok($name {
                    x,
                    dim,
                    keepdim,
                    device: device.clone(),
                    plan,
                })
            }

            /// The input spec the op is planned for.
            pub fn x(&self) -> &TensorSpec {
                &self.x
            }

            /// The output spec: `x`'s shape without the reduced dims (size 1 with `keepdim`).
            pub fn y(&self) -> &TensorSpec {
                &self.plan.y
            }

            /// The dims, as given to `new`.
            pub fn dim(&self) -> &ReduceDim {
                &self.dim
            }

            /// The reduced axes, normalized (non-negative) and sorted.
            pub fn axes(&self) -> &[usize] {
                &self.plan.axes
            }

            /// Whether the reduced dims stay in the output, with size 1.
            pub fn keepdim(&self) -> bool {
                self.keepdim
            }

            /// The device the op runs on.
            pub fn device(&self) -> &Device {
                &self.device
            }

            /// The reduction of `x`, into a new tensor of spec [`Self::y`]. `x` must match the
            /// plan (spec and device).
            pub fn forward<'t>(&self, x: impl Into<crate::TensorRef<'t>>) -> Result<Tensor, Error> {
                let x = x.into();
                check_input(Self::NAME, "x", &x, &self.x, &self.device)?;
                let mut y = Tensor::empty(&self.plan.y, &self.device)?;
                self.forward_into(x, &mut y)?;
                Ok(y)
            }

            /// The reduction of `x`, written into `y` (spec [`Self::y`], same device). On a GPU
            /// the call is asynchronous: copies and [`Device::synchronize`] wait for it.
            pub fn forward_into<'t>(&self, x: impl Into<crate::TensorRef<'t>>, y: impl Into<crate::TensorMut<'t>>) -> Result<(), Error> {
                let x = x.into();
                let y = y.into();
                check_input(Self::NAME, "x", &x, &self.x, &self.device)?;
                check_input(Self::NAME, "y", &y, &self.plan.y, &self.device)?;
                backend::forward(self, [x], [y])
            }
        }

        impl Backends<1, 1> for $name {
            fn device(&self) -> &Device {
                &self.device
            }

            fn cpu(&self, [x]: [crate::TensorRef<'_>; 1], [mut y]: [crate::TensorMut<'_>; 1]) -> Result<(), Error> {
                self.plan.cpu(x, &mut y)
            }

            fn cuda(
                &self,
                dev: &CudaDevice,
                [ref xs]: [cudarc::driver::CudaView<'_, u8>; 1],
                [ref mut ys]: [cudarc::driver::CudaViewMut<'_, u8>; 1],
            ) -> Result<(), Error> {
                self.plan.cuda(dev, xs, ys)
            }
        }

        impl FromWorkload for $name {
            /// `x_shape` and the case dtype; `dim` (an int or a list) and `keepdim` from the
            /// row, else the manifest's defaults (it declares none for `dim`).
            fn from_workload(device: &Device, case: &WorkloadCase) -> Result<Self, Error> {
                let (x, dim, keepdim) = workload_params::<$name>(case)?;
                $name::new(x, dim, keepdim, device)
            }
        }

        unary_bench_op!($name, |op| op.plan.y);
    };
}

/// `x_shape`, `dim` and `keepdim` of a workload case for `Op`.
fn workload_params<Op: ManifestOp>(
    case: &WorkloadCase,
) -> Result<(TensorSpec, ReduceDim, bool), Error> {
    let bad = |field: &'static str, value: &StaticValue, reason: &str| Error::InvalidParam {
        op: Op::NAME,
        field,
        value: format!("{value:?}"),
        reason: reason.to_owned(),
    };
    let x = case.require_input(Op::NAME, "x")?;
    let dim = match workload_param::<Op>(case, "dim")? {
        StaticValue::Int(d) => i64::try_from(d)
            .map(ReduceDim::One)
            .map_err(|_| bad("dim", &StaticValue::Int(d), "must fit in i64"))?,
        value @ StaticValue::List(_) => value
            .as_int_list()
            .and_then(|dims| {
                dims.into_iter()
                    .map(|d| i64::try_from(d).ok())
                    .collect::<Option<Vec<_>>>()
            })
            .map(ReduceDim::Many)
            .ok_or_else(|| bad("dim", &value, "must be a list of integers"))?,
        value => {
            return Err(bad(
                "dim",
                &value,
                "must be an integer or a list of integers",
            ));
        }
    };
    let keepdim = match workload_param::<Op>(case, "keepdim")? {
        StaticValue::Bool(b) => b,
        value => return Err(bad("keepdim", &value, "must be a bool")),
    };
    Ok((x, dim, keepdim))
}

reduce_op!(
    /// `torch.sum(x, dim, keepdim)` in float32, float16 or bfloat16, accumulating in f32 on the
    /// GPU (f64 on the CPU) and rounding once.
    ///
    /// ```
    /// use tileops::ops::Sum;
    /// use tileops::{DType, Device, Tensor, TensorSpec};
    ///
    /// let device = Device::cpu();
    /// let sum = Sum::new(TensorSpec::new([2, 3], DType::Float32), -1, false, &device)?;
    /// let x = Tensor::from_f32_slice(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3], &device)?;
    /// assert_eq!(sum.forward(&x)?.to_vec_f32()?, vec![6.0, 15.0]);
    /// // Several dims, kept with size 1:
    /// let all = Sum::new(TensorSpec::new([2, 3], DType::Float32), [0, 1], true, &device)?;
    /// assert_eq!(all.y().shape, vec![1, 1]);
    /// // Bad dims are errors, not panics.
    /// let x = TensorSpec::new([2, 3], DType::Float32);
    /// assert!(Sum::new(x, [1, -1], false, &device).is_err());
    /// # Ok::<(), tileops::Error>(())
    /// ```
    Sum,
    "sum",
    ReduceKind::Sum
);

reduce_op!(
    /// `torch.mean(x, dim, keepdim)` in float32, float16 or bfloat16: the sum accumulated in f32
    /// on the GPU (f64 on the CPU), divided by the count, rounded once.
    ///
    /// ```
    /// use tileops::ops::Mean;
    /// use tileops::{DType, Device, Tensor, TensorSpec};
    ///
    /// let device = Device::cpu();
    /// let mean = Mean::new(TensorSpec::new([2, 2], DType::Float32), 0, true, &device)?;
    /// let x = Tensor::from_f32_slice(&[1.0, 2.0, 3.0, 5.0], [2, 2], &device)?;
    /// let y = mean.forward(&x)?;
    /// assert_eq!(y.shape(), &[1, 2]);
    /// assert_eq!(y.to_vec_f32()?, vec![2.0, 3.5]);
    /// # Ok::<(), tileops::Error>(())
    /// ```
    Mean,
    "mean",
    ReduceKind::Mean
);

reduce_op!(
    /// `torch.amax(x, dim, keepdim)` in float32, float16 or bfloat16; NaN propagates, as in
    /// PyTorch.
    ///
    /// ```
    /// use tileops::ops::Amax;
    /// use tileops::{DType, Device, Tensor, TensorSpec};
    ///
    /// let device = Device::cpu();
    /// let amax = Amax::new(TensorSpec::new([2, 2], DType::Float32), 1, false, &device)?;
    /// let x = Tensor::from_f32_slice(&[1.0, -2.0, f32::NAN, 5.0], [2, 2], &device)?;
    /// let y = amax.forward(&x)?.to_vec_f32()?;
    /// assert_eq!(y[0], 1.0);
    /// assert!(y[1].is_nan());
    /// # Ok::<(), tileops::Error>(())
    /// ```
    Amax,
    "amax",
    ReduceKind::Amax
);

reduce_op!(
    /// `torch.logsumexp(x, dim, keepdim)` in float32, float16 or bfloat16: `log(sum(exp(x - m)))
    /// + m` with `m` the max (0 when infinite), so a row of only `-inf` gives `-inf`.
    ///
    /// ```
    /// use tileops::ops::Logsumexp;
    /// use tileops::{DType, Device, Tensor, TensorSpec};
    ///
    /// let device = Device::cpu();
    /// let lse = Logsumexp::new(TensorSpec::new([2, 2], DType::Float32), -1, false, &device)?;
    /// let x = Tensor::from_f32_slice(&[0.0, 0.0, f32::NEG_INFINITY, f32::NEG_INFINITY], [2, 2], &device)?;
    /// let y = lse.forward(&x)?.to_vec_f32()?;
    /// assert!((y[0] - 2f32.ln()).abs() < 1e-7);
    /// assert_eq!(y[1], f32::NEG_INFINITY);
    /// # Ok::<(), tileops::Error>(())
    /// ```
    Logsumexp,
    "logsumexp",
    ReduceKind::Logsumexp
);

/// `torch.sum(x, dim, keepdim)` in one call: plans a [`Sum`] for `x`'s spec on its device and
/// runs it. `dim` is one dim or a list of them.
///
/// ```
/// use tileops::{Device, Tensor};
///
/// let device = Device::cpu();
/// let x = Tensor::from_f32_slice(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3], &device)?;
/// assert_eq!(tileops::ops::sum(&x, -1, false)?.to_vec_f32()?, vec![6.0, 15.0]);
/// assert_eq!(tileops::ops::sum(&x, [0, 1], true)?.shape(), &[1, 1]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn sum(x: &Tensor, dim: impl Into<ReduceDim>, keepdim: bool) -> Result<Tensor, Error> {
    Sum::new(x.spec().clone(), dim, keepdim, x.device())?.forward(x)
}

/// `torch.mean(x, dim, keepdim)` in one call: plans a [`Mean`] for `x`'s spec on its device and
/// runs it.
///
/// ```
/// use tileops::{Device, Tensor};
///
/// let device = Device::cpu();
/// let x = Tensor::from_f32_slice(&[1.0, 2.0, 3.0, 5.0], [2, 2], &device)?;
/// assert_eq!(tileops::ops::mean(&x, 0, false)?.to_vec_f32()?, vec![2.0, 3.5]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn mean(x: &Tensor, dim: impl Into<ReduceDim>, keepdim: bool) -> Result<Tensor, Error> {
    Mean::new(x.spec().clone(), dim, keepdim, x.device())?.forward(x)
}

/// `torch.amax(x, dim, keepdim)` in one call: plans an [`Amax`] for `x`'s spec on its device and
/// runs it.
///
/// ```
/// use tileops::{Device, Tensor};
///
/// let device = Device::cpu();
/// let x = Tensor::from_f32_slice(&[1.0, -2.0, 0.5, 5.0], [2, 2], &device)?;
/// assert_eq!(tileops::ops::amax(&x, 1, false)?.to_vec_f32()?, vec![1.0, 5.0]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn amax(x: &Tensor, dim: impl Into<ReduceDim>, keepdim: bool) -> Result<Tensor, Error> {
    Amax::new(x.spec().clone(), dim, keepdim, x.device())?.forward(x)
}

/// `torch.logsumexp(x, dim, keepdim)` in one call: plans a [`Logsumexp`] for `x`'s spec on its
/// device and runs it.
///
/// ```
/// use tileops::{Device, Tensor};
///
/// let device = Device::cpu();
/// let x = Tensor::from_f32_slice(&[0.0, 0.0], [2], &device)?;
/// let y = tileops::ops::logsumexp(&x, 0, false)?.to_vec_f32()?;
/// assert!((y[0] - 2f32.ln()).abs() < 1e-7);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn logsumexp(x: &Tensor, dim: impl Into<ReduceDim>, keepdim: bool) -> Result<Tensor, Error> {
    Logsumexp::new(x.spec().clone(), dim, keepdim, x.device())?.forward(x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;
    use crate::ops::backend::assert_rounds_to;

    fn spec(shape: &[usize], dtype: DType) -> TensorSpec {
        TensorSpec::new(shape, dtype)
    }

    #[test]
    fn layouts_pick_the_fast_path_when_they_can() {
        let s = spec(&[2048, 4096], DType::BFloat16);
        assert_eq!(
            layout("sum", &s, &[1]).unwrap(),
            Layout::Rows {
                rows: 2048,
                n: 4096
            }
        );
        assert_eq!(
            layout("sum", &s, &[0]).unwrap(),
            Layout::Cols {
                outer: 1,
                n: 2048,
                inner: 4096
            }
        );
        assert_eq!(
            layout("sum", &s, &[0, 1]).unwrap(),
            Layout::Rows {
                rows: 1,
                n: 2048 * 4096
            }
        );
        // Size-1 dims do not split blocks: [4, 1, 8] over dims 0 and 2 is one row of 32.
        assert_eq!(
            layout("sum", &spec(&[4, 1, 8], DType::Float32), &[0, 2]).unwrap(),
            Layout::Rows { rows: 1, n: 32 }
        );
        // Reducing only size-1 dims: every element is its own row.
        assert_eq!(
            layout("sum", &spec(&[4, 1, 8], DType::Float32), &[1]).unwrap(),
            Layout::Rows { rows: 32, n: 1 }
        );
        assert_eq!(
            layout("sum", &spec(&[2, 3, 4, 5], DType::Float32), &[1, 2]).unwrap(),
            Layout::Cols {
                outer: 2,
                n: 12,
                inner: 5
            }
        );
        // The manifest's [4, 128, 4096] over [0, 2]: 4 runs of 4096 per output.
        let Layout::Runs {
            geom,
            outputs,
            per_out,
            run,
        } = layout("sum", &spec(&[4, 128, 4096], DType::Float16), &[0, 2]).unwrap()
        else {
            panic!("expected a runs layout");
        };
        assert_eq!((outputs, per_out, run), (128, 4, 4096));
        assert_eq!((geom.kept_rank, geom.red_rank), (1, 1));
        assert_eq!((geom.kept_size[0], geom.kept_stride[0]), (128, 4096));
        assert_eq!((geom.red_size[0], geom.red_stride[0]), (4, 128 * 4096));
        // Runs shorter than 128 bytes (32 float32, 64 float16) stay strided.
        assert!(matches!(
            layout("sum", &spec(&[4, 12, 32], DType::Float32), &[0, 2]).unwrap(),
            Layout::Runs { run: 32, .. }
        ));
        let Layout::Strided { geom, outputs, n } =
            layout("sum", &spec(&[4, 12, 32], DType::Float16), &[0, 2]).unwrap()
        else {
            panic!("expected a strided layout");
        };
        assert_eq!((outputs, n), (12, 4 * 32));
        assert_eq!((geom.kept_rank, geom.red_rank), (1, 2));
        assert_eq!((geom.kept_size[0], geom.kept_stride[0]), (12, 32));
        assert_eq!(&geom.red_size[..2], &[4, 32]);
        assert_eq!(&geom.red_stride[..2], &[12 * 32, 1]);
        // A kept innermost dim stays strided, however long.
        assert!(matches!(
            layout("sum", &spec(&[4, 12, 5, 4096], DType::Float32), &[0, 2]).unwrap(),
            Layout::Strided { .. }
        ));
    }

    #[test]
    fn roofline_binds_int_and_list_dims_as_the_manifest_expects() {
        let cpu = Device::cpu();
        // sum hidden-state-reduce: [2048, 4096], dim=-1, float32.
        let op = Sum::new(spec(&[2048, 4096], DType::Float32), -1, false, &cpu).unwrap();
        let r = op.eval_roofline().unwrap();
        assert_eq!((r.flops, r.bytes), (2048 * 4096, (2048 * 4096 + 2048) * 4));
        // sum 3d-multidim-reduce: [4, 128, 4096], dim=[0, 2], float16: M = 128, N = 16384.
        let op = Sum::new(spec(&[4, 128, 4096], DType::Float16), [0, 2], false, &cpu).unwrap();
        let r = op.eval_roofline().unwrap();
        assert_eq!((r.flops, r.bytes), (128 * 16384, (128 * 16384 + 128) * 2));
        // mean dim0-keepdim: M = 4096, N = 2048, flops M * (N + 1).
        let op = Mean::new(spec(&[2048, 4096], DType::BFloat16), 0, true, &cpu).unwrap();
        let r = op.eval_roofline().unwrap();
        assert_eq!((r.flops, r.bytes), (4096 * 2049, (4096 * 2048 + 4096) * 2));
        // logsumexp 3d-multidim-reduce with a list dim and negative entries: 4 M N.
        let op =
            Logsumexp::new(spec(&[4, 128, 4096], DType::Float16), [-3, -1], true, &cpu).unwrap();
        let r = op.eval_roofline().unwrap();
        assert_eq!(
            (r.flops, r.bytes),
            (4 * 128 * 16384, (128 * 16384 + 128) * 2)
        );
        let op = Amax::new(spec(&[64, 32768], DType::BFloat16), -1, false, &cpu).unwrap();
        let r = op.eval_roofline().unwrap();
        assert_eq!((r.flops, r.bytes), (64 * 32768, (64 * 32768 + 64) * 2));
    }

    #[test]
    fn reduce_geom_has_the_kernels_layout() {
        // struct ReduceGeom { long long[8] x 4; int x 2; } in reduce.cu: 264 bytes, 8-aligned.
        assert_eq!(std::mem::size_of::<ReduceGeom>(), 264);
        assert_eq!(std::mem::align_of::<ReduceGeom>(), 8);
    }

    #[test]
    fn few_long_rows_and_few_columns_split_across_blocks() {
        // 132 SMs (H200). long-seq-reduce bf16: 64 rows of 4096 vectors -> 4096 / 512 = 8 chunks.
        assert_eq!(row_chunks(64, 4096, 132), Some(8));
        // lm-head logsumexp f32: 4 rows of 25600 vectors -> 50 chunks of 512 (200 blocks).
        assert_eq!(row_chunks(4, 25600, 132), Some(50));
        // Many rows, or short rows: one block per row.
        assert_eq!(row_chunks(2048, 512, 132), None);
        // logsumexp rows past the register kernel's 4096 vectors are split even when many.
        assert_eq!(row_chunks(1024, 8192, 132), None);
        assert_eq!(lse_row_chunks(8192), Some(2));
        assert_eq!(lse_row_chunks(8193), Some(3));
        assert_eq!(lse_row_chunks(4096), None);
        assert_eq!(row_chunks(4, 1000, 132), None);
        // dim0 bf16: 16 tiles of 32 x 8 columns over n = 2048 -> 33 slices.
        assert_eq!(col_splits(16, 2048, 132), Some(33));
        assert_eq!(col_splits(16, 40, 132), None);
        assert_eq!(col_splits(1000, 4096, 132), None);
    }

    #[test]
    fn output_shapes_follow_keepdim() {
        let cpu = Device::cpu();
        let s = spec(&[4, 128, 4096], DType::Float16);
        let op = Sum::new(s.clone(), [2, 0], false, &cpu).unwrap();
        assert_eq!(op.y().shape, vec![128]);
        assert_eq!(op.axes(), &[0, 2]);
        assert_eq!(op.dim(), &ReduceDim::Many(vec![2, 0]));
        let op = Sum::new(s.clone(), [2, 0], true, &cpu).unwrap();
        assert_eq!(op.y().shape, vec![1, 128, 1]);
        let op = Amax::new(s.clone(), [0, 1, 2], false, &cpu).unwrap();
        assert_eq!(op.y().shape, Vec::<usize>::new());
        assert_eq!(op.y().numel().unwrap(), 1);
    }

    fn check_cpu(kind: ReduceKind, shape: &[usize], dim: ReduceDim, keepdim: bool, dtype: DType) {
        let cpu = Device::cpu();
        let s = spec(shape, dtype);
        let (y, axes) = match kind {
            ReduceKind::Sum => {
                let op = Sum::new(s.clone(), dim, keepdim, &cpu).unwrap();
                let x = Tensor::random(&s, 3, &cpu).unwrap();
                (
                    (op.forward(&x).unwrap(), x),
                    (op.axes().to_vec(), op.y().clone()),
                )
            }
            ReduceKind::Mean => {
                let op = Mean::new(s.clone(), dim, keepdim, &cpu).unwrap();
                let x = Tensor::random(&s, 3, &cpu).unwrap();
                (
                    (op.forward(&x).unwrap(), x),
                    (op.axes().to_vec(), op.y().clone()),
                )
            }
            ReduceKind::Amax => {
                let op = Amax::new(s.clone(), dim, keepdim, &cpu).unwrap();
                let x = Tensor::random(&s, 3, &cpu).unwrap();
                (
                    (op.forward(&x).unwrap(), x),
                    (op.axes().to_vec(), op.y().clone()),
                )
            }
            ReduceKind::Logsumexp => {
                let op = Logsumexp::new(s.clone(), dim, keepdim, &cpu).unwrap();
                let x = Tensor::random(&s, 3, &cpu).unwrap();
                (
                    (op.forward(&x).unwrap(), x),
                    (op.axes().to_vec(), op.y().clone()),
                )
            }
        };
        let ((y, x), (axes, y_spec)) = (y, axes);
        assert_eq!(y.spec(), &y_spec);
        let want = reference::reduce(&x.to_vec_f64().unwrap(), shape, &axes, kind);
        assert_rounds_to(&y, &want, format_args!("{kind:?} {shape:?}"));
    }

    #[test]
    fn cpu_forward_matches_the_reference_in_every_dtype() {
        for kind in [
            ReduceKind::Sum,
            ReduceKind::Mean,
            ReduceKind::Amax,
            ReduceKind::Logsumexp,
        ] {
            for dtype in [DType::Float32, DType::Float16, DType::BFloat16] {
                check_cpu(kind, &[3, 7], ReduceDim::One(-1), false, dtype);
                check_cpu(kind, &[5], ReduceDim::One(0), true, dtype);
                check_cpu(kind, &[1], ReduceDim::One(0), false, dtype);
                check_cpu(kind, &[2, 3, 4], ReduceDim::Many(vec![0, 2]), true, dtype);
                check_cpu(kind, &[2, 3, 4], ReduceDim::Many(vec![-2]), false, dtype);
            }
        }
    }
}
