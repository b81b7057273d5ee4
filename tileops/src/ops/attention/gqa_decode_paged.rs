//! `gqa_decode_paged`: one query token per sequence attending over a paged KV cache (vLLM v1 and
//! FlashInfer's NHD layout), grouped query heads.

use super::decode::{
    AttentionOutputMut, DecodeInputs, DecodeOptions, DecodeOutput, DecodePlan, DecodeSpecs,
    KvScales, decode_accessors, defaults, workload_decode,
};
use crate::registry::{BenchOp, FromWorkload, ManifestOp, RoofKey, Traffic, WorkloadCase};
use crate::{DType, Device, Error, Tensor, TensorRef, TensorSpec};

const OP: &str = GqaDecodePaged::NAME;

/// Attention decode over a paged KV cache: as [`GqaDecode`](crate::ops::GqaDecode), with the keys
/// and values in a pool of pages `k_pages, v_pages [num_pages, page_size, H_kv, D]` (NHD, the
/// layout of vLLM v1 and FlashInfer) and `block_table [B, max_pages]` int32: key `p` of sequence
/// `b` is row `p % page_size` of page `block_table[b][p / page_size]`. Any page size; 16 (vLLM's
/// default), 32, 64, 128 and 256 are tested.
///
/// The plan takes the host copies of the lengths and of the block table, and checks every entry
/// a sequence uses (`ceil(seqlens[b] / page_size)` of row `b`) to be a page of the pool: a bad
/// table is an `Err` before any launch, never an out-of-bounds read; entries past a sequence's
/// last page are not read (vLLM pads them). On the GPU the kernel reads the device copies, and
/// a page index outside the pool there (a device table that disagrees with the plan) is never
/// read through: that sequence's outputs come out NaN.
///
/// ```
/// use tileops::ops::{DecodeOptions, GqaDecodePaged};
/// use tileops::{DType, Device, Tensor, TensorSpec};
///
/// let device = Device::best();
/// // Two sequences of 20 and 5 keys in pages of 16: pages 2, 0 for the first, 1 for the second.
/// let q = TensorSpec::new([2, 4, 128], DType::Float16);
/// let pages = TensorSpec::new([3, 16, 1, 128], DType::Float16);
/// let table = [2, 0, 1, -1];
/// let op = GqaDecodePaged::new(q.clone(), pages.clone(), pages.clone(), &table, 2, &[20, 5],
///     DecodeOptions::default(), &device)?;
/// let out = op.forward(
///     &Tensor::random(&q, 1, &device)?,
///     &Tensor::random(&pages, 2, &device)?,
///     &Tensor::random(&pages, 3, &device)?,
///     &Tensor::from_slice(&table, [2, 2], &device)?,
///     &Tensor::from_slice(&[20i32, 5], [2], &device)?,
///     None,
/// )?;
/// assert_eq!(out.o.shape(), &[2, 4, 128]);
/// // A page index outside the pool, in a slot a sequence uses, is refused.
/// let bad = [2, 3, 1, -1];
/// assert!(GqaDecodePaged::new(q, pages.clone(), pages, &bad, 2, &[20, 5],
///     DecodeOptions::default(), &device).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[crate::roofline_op("gqa_decode_paged")]
#[derive(Debug, Clone)]
pub struct GqaDecodePaged {
    q: TensorSpec,
    k_pages: TensorSpec,
    v_pages: TensorSpec,
    block_table: TensorSpec,
    plan: DecodePlan,
    device: Device,
}

decode_accessors!(GqaDecodePaged);

impl GqaDecodePaged {
    /// Plans a decode of q `[B, H, D]` over the page pools `k_pages`, `v_pages`
    /// `[num_pages, page_size, H_kv, D]`, with the host copies of the block table (`B x max_pages`
    /// entries, row-major) and of the lengths (`B` values).
    ///
    /// Errors as [`GqaDecode::new`](crate::ops::GqaDecode::new), with the capacity of a sequence
    /// `max_pages * page_size`; and when the table does not hold `B x max_pages` entries or an
    /// entry a sequence uses is not a page of the pool.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        q: TensorSpec,
        k_pages: TensorSpec,
        v_pages: TensorSpec,
        block_table: &[i32],
        max_pages: usize,
        seqlens: &[i32],
        options: DecodeOptions,
        device: &Device,
    ) -> Result<GqaDecodePaged, Error> {
        let batch = q.shape.first().copied().unwrap_or(0);
        let table = TensorSpec::new([batch, max_pages], DType::Int32);
        let plan = DecodePlan::new(
            OP,
            &q,
            ("k_pages", &k_pages),
            ("v_pages", &v_pages),
            seqlens,
            Some((&table, block_table)),
            options,
            defaults::<GqaDecodePaged>(),
        )?;
        Ok(GqaDecodePaged {
            q,
            k_pages,
            v_pages,
            block_table: table,
            plan,
            device: device.clone(),
        })
    }

    /// The page pool spec (`k_pages` and `v_pages` alike).
    pub fn k_pages(&self) -> &TensorSpec {
        &self.k_pages
    }

    /// The block table's spec, `[B, max_pages]` int32.
    pub fn block_table(&self) -> &TensorSpec {
        &self.block_table
    }

    /// Runs the decode into new outputs. `block_table` and `seqlens` are the device copies of
    /// the plan's; `scales` are `(k_scale, v_scale)`, `[1]` float32 each, for an fp8 pool and
    /// `None` otherwise.
    pub fn forward<'t>(
        &self,
        q: impl Into<TensorRef<'t>>,
        k_pages: impl Into<TensorRef<'t>>,
        v_pages: impl Into<TensorRef<'t>>,
        block_table: impl Into<TensorRef<'t>>,
        seqlens: impl Into<TensorRef<'t>>,
        scales: impl Into<KvScales<'t>>,
    ) -> Result<DecodeOutput, Error> {
        let (q, k_pages, v_pages, block_table, seqlens, scales) = (
            q.into(),
            k_pages.into(),
            v_pages.into(),
            block_table.into(),
            seqlens.into(),
            scales.into(),
        );
        let mut out = self.plan.empty_output(&self.device)?;
        self.forward_into(q, k_pages, v_pages, block_table, seqlens, scales, &mut out)?;
        Ok(out)
    }

    /// Runs the decode into `out` (tensors of
    /// [`output_specs`](GqaDecodePaged::output_specs) on the op's device). Asynchronous on a GPU.
    #[allow(clippy::too_many_arguments)]
    pub fn forward_into<'t>(
        &self,
        q: impl Into<TensorRef<'t>>,
        k_pages: impl Into<TensorRef<'t>>,
        v_pages: impl Into<TensorRef<'t>>,
        block_table: impl Into<TensorRef<'t>>,
        seqlens: impl Into<TensorRef<'t>>,
        scales: impl Into<KvScales<'t>>,
        out: impl Into<AttentionOutputMut<'t>>,
    ) -> Result<(), Error> {
        self.plan.run(
            &self.device,
            DecodeInputs {
                q: q.into(),
                k: k_pages.into(),
                v: v_pages.into(),
                seqlens: seqlens.into(),
                block_table: Some(block_table.into()),
                scales: scales.into().0,
            },
            &DecodeSpecs {
                q: &self.q,
                k: ("k_pages", &self.k_pages),
                v: ("v_pages", &self.v_pages),
                block_table: Some(&self.block_table),
            },
            out.into(),
        )
    }
}

/// The block table a bench row gets: `max_pages` slots per sequence filled from a pseudo-random
/// permutation of the pool (a deterministic shuffle: pages of a sequence are scattered as a
/// serving engine's allocator leaves them), unused slots -1 (vLLM's padding).
pub(crate) fn shuffled_block_table(
    batch: usize,
    max_pages: usize,
    num_pages: usize,
    lens: &[i32],
    page_size: usize,
) -> Vec<i32> {
    let mut pool: Vec<i32> = (0..num_pages.min(i32::MAX as usize) as i32).collect();
    // Fisher-Yates with SplitMix64 steps (fixed seed: every run plans the same table).
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    for i in (1..pool.len()).rev() {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        pool.swap(i, (z % (i as u64 + 1)) as usize);
    }
    let mut next = pool.into_iter();
    let mut table = vec![-1; batch * max_pages];
    for (b, &len) in lens.iter().enumerate().take(batch) {
        let used = (len.max(0) as usize)
            .div_ceil(page_size.max(1))
            .min(max_pages);
        for slot in &mut table[b * max_pages..][..used] {
            *slot = next.next().unwrap_or(-1);
        }
    }
    table
}

impl FromWorkload for GqaDecodePaged {
    /// q from `q_shape` in the case dtype; the pools from `k_pages_shape`/`v_pages_shape` in
    /// `cache_dtype` (else the case dtype); `max_pages` from `block_table_shape`; the lengths
    /// from `kv_lens` (else every sequence full); a block table that scatters each sequence over
    /// the pool (a fixed pseudo-random shuffle); the options from the row, else the manifest's
    /// defaults.
    fn from_workload(device: &Device, case: &WorkloadCase) -> Result<Self, Error> {
        let w = workload_decode::<GqaDecodePaged>(case)?;
        let q = case.require_input(OP, "q")?;
        let k_pages = case.require_input_as(OP, "k_pages", w.cache_dtype)?;
        let v_pages = case.require_input_as(OP, "v_pages", w.cache_dtype)?;
        let table = case.require_input_as(OP, "block_table", DType::Int32)?;
        let batch = q.shape.first().copied().unwrap_or(0);
        let max_pages = table.shape.get(1).copied().unwrap_or(0);
        let (num_pages, page_size) = (
            k_pages.shape.first().copied().unwrap_or(0),
            k_pages.shape.get(1).copied().unwrap_or(0),
        );
        let lens = match w.lens {
            Some(lens) => lens,
            None => {
                let full = i32::try_from(max_pages * page_size).unwrap_or(i32::MAX);
                vec![full; batch]
            }
        };
        let block_table = shuffled_block_table(batch, max_pages, num_pages, &lens, page_size);
        GqaDecodePaged::new(
            q,
            k_pages,
            v_pages,
            &block_table,
            max_pages,
            &lens,
            w.options,
            device,
        )
    }
}

impl BenchOp for GqaDecodePaged {
    fn roof(&self) -> RoofKey {
        GqaDecodePaged::roof(self)
    }

    fn random_inputs(&self, seed: u64) -> Result<Vec<Tensor>, Error> {
        self.plan
            .bench_inputs([&self.q, &self.k_pages, &self.v_pages], seed, &self.device)
    }

    fn placeholder_inputs(&self) -> Result<Vec<Tensor>, Error> {
        self.plan
            .placeholder_inputs([&self.q, &self.k_pages, &self.v_pages], &self.device)
    }

    fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, Error> {
        let out = match inputs {
            [q, k, v, table, seqlens] => self.forward(q, k, v, table, seqlens, None)?,
            [q, k, v, table, seqlens, k_scale, v_scale] => {
                self.forward(q, k, v, table, seqlens, Some((k_scale, v_scale)))?
            }
            _ => {
                return Err(Error::Arity {
                    op: OP,
                    expected: if self.plan.fp8() { 7 } else { 5 },
                    got: inputs.len(),
                });
            }
        };
        Ok(DecodePlan::bench_outputs(out))
    }

    fn traffic(&self) -> Option<Traffic> {
        Some(self.plan.traffic(&self.q))
    }

    fn input_dtypes(&self) -> Vec<(&'static str, DType)> {
        self.plan.cache_input_dtypes()
    }
}

/// Attention decode over a paged cache in one call: plans a [`GqaDecodePaged`] for the tensors'
/// specs on `q`'s device, with the host copies `table` (of `block_table`) and `lens` (of
/// `seqlens`), and runs it.
#[allow(clippy::too_many_arguments)]
pub fn gqa_decode_paged(
    q: &Tensor,
    k_pages: &Tensor,
    v_pages: &Tensor,
    block_table: &Tensor,
    seqlens: &Tensor,
    table: &[i32],
    lens: &[i32],
    scales: Option<(&Tensor, &Tensor)>,
    options: DecodeOptions,
) -> Result<DecodeOutput, Error> {
    let max_pages = block_table.shape().get(1).copied().unwrap_or(0);
    GqaDecodePaged::new(
        q.spec().clone(),
        k_pages.spec().clone(),
        v_pages.spec().clone(),
        table,
        max_pages,
        lens,
        options,
        q.device(),
    )?
    .forward(q, k_pages, v_pages, block_table, seqlens, scales)
}
