//! Borrowed tensors on the caller's stream: ops read ranges of the caller's `CudaSlice`s at
//! non-zero offsets (typed, bytes, views, strided layouts) and write into ranges of the caller's
//! slices, in place; the memory around the ranges stays as it was, and every result equals the
//! owned path on `Device::cuda(0)` bit for bit. Also the errors: a misaligned offset, a range
//! past the end, a strided layout that is not contiguous, the wrong kind of device.

use cudarc::driver::{CudaSlice, DeviceRepr, ValidAsZeroBits};
use half::bf16;
use tileops::ops::{AttentionOutputMut, DecodeOptions, Gemm, GqaDecode, RmsNorm, Silu, Softmax};
use tileops::tensor::Element;
use tileops::{DType, Device, Error, Tensor, TensorMut, TensorRef, TensorSpec};

use super::{Caller, address, caller_or_skip, host_values, inputs};
use crate::common::spec;

/// What the memory around a borrowed range holds, to see that nothing outside it is written.
const SENTINEL: f64 = 1234.0;

/// The caller's slice of `before + values.len() + after` elements: `values` in the middle,
/// [`SENTINEL`] around them.
fn padded<T: Element + DeviceRepr>(
    caller: &Caller,
    values: &[T],
    before: usize,
    after: usize,
) -> (CudaSlice<T>, Vec<T>) {
    let sentinel: Vec<T> = host_values(&[SENTINEL], &[1]);
    let mut host = vec![sentinel[0]; before];
    host.extend_from_slice(values);
    host.extend(std::iter::repeat_n(sentinel[0], after));
    (caller.stream.clone_htod(&host).unwrap(), host)
}

/// The caller's slice, read back on its stream (ordered after the ops that wrote it).
fn read_back<T: Element + DeviceRepr>(caller: &Caller, slice: &CudaSlice<T>) -> Vec<T> {
    caller.stream.clone_dtoh(slice).unwrap()
}

/// `got` is `before` then `want` then `after`, bit for bit (compared as bytes through tensors,
/// so NaNs and signed zeros count).
fn assert_spliced<T: Element>(got: &[T], before: &[T], want: &[T], after: &[T], what: &str) {
    let cpu = Device::cpu();
    let bytes = |v: &[T]| {
        Tensor::from_slice(v, [v.len()], &cpu)
            .unwrap()
            .to_bytes()
            .unwrap()
    };
    let mut expected = bytes(before);
    expected.extend(bytes(want));
    expected.extend(bytes(after));
    assert_eq!(bytes(got), expected, "{what}");
}

/// RMSNorm from `x` at element offset `x_at` of a larger slice and the weight at byte offset 16
/// of a byte slice, into `y` at element offset `y_at` of the caller's slice: the same bits as
/// the owned path, and the memory around `y` untouched.
fn rms_norm_borrowed<T>(caller: &Caller, x_at: usize, y_at: usize)
where
    T: Element + DeviceRepr + ValidAsZeroBits + Default + Clone + PartialEq + std::fmt::Debug,
{
    let (rows, n) = (4, 64);
    let x_spec = spec(&[rows, n], T::DTYPE);
    let w_spec = spec(&[n], T::DTYPE);
    let x_host: Vec<T> = host_values(&inputs(rows * n, 21), &[rows * n]);
    let w_host: Vec<T> = host_values(&inputs(n, 22), &[n]);
    let w_bytes = Tensor::from_slice(&w_host, [n], &Device::cpu())
        .unwrap()
        .to_bytes()
        .unwrap();

    let (x_slice, _) = padded(caller, &x_host, x_at, 40);
    let mut w_slice = caller.stream.alloc_zeros::<u8>(16 + w_bytes.len()).unwrap();
    caller
        .stream
        .memcpy_htod(&w_bytes, &mut w_slice.slice_mut(16..))
        .unwrap();
    let (mut y_slice, y_before) = padded(caller, &vec![T::default(); rows * n], y_at, 24);
    let y_address = address(&y_slice, &caller.stream);

    let op = RmsNorm::new(x_spec.clone(), w_spec.clone(), 1e-6, &caller.device).unwrap();
    let x = TensorRef::from_cuda_slice(&x_slice, x_at, [rows, n], &caller.device).unwrap();
    let w = TensorRef::from_cuda_bytes(&w_slice, 16, &w_spec, &caller.device).unwrap();
    let y = TensorMut::from_cuda_slice_mut(&mut y_slice, y_at, [rows, n], &caller.device).unwrap();
    op.forward_into(x, w, y).unwrap();
    // Written in place: the caller's allocation, not a copy.
    assert_eq!(address(&y_slice, &caller.stream), y_address);

    let own_op = RmsNorm::new(x_spec.clone(), w_spec, 1e-6, &caller.own).unwrap();
    let own_x = Tensor::from_slice(&x_host, [rows, n], &caller.own).unwrap();
    let own_w = Tensor::from_slice(&w_host, [n], &caller.own).unwrap();
    let want: Vec<T> = own_op.forward(&own_x, &own_w).unwrap().to_vec().unwrap();

    let got = read_back(caller, &y_slice);
    assert_spliced(
        &got,
        &y_before[..y_at],
        &want,
        &y_before[y_at + rows * n..],
        &format!("rms_norm {} x at {x_at}, y at {y_at}", T::DTYPE),
    );

    // `forward` (owned output) from the same borrowed input gives the same bits.
    let x = TensorRef::from_cuda_slice(&x_slice, x_at, [rows, n], &caller.device).unwrap();
    let w =
        TensorRef::from_cuda_bytes(&w_slice, 16, &spec(&[n], T::DTYPE), &caller.device).unwrap();
    let owned: Vec<T> = op.forward(x, w).unwrap().to_vec().unwrap();
    assert_eq!(owned, want);
}

#[test]
fn rms_norm_reads_and_writes_borrowed_ranges() {
    let Some(caller) = caller_or_skip("rms_norm_reads_and_writes_borrowed_ranges") else {
        return;
    };
    // Offsets that keep 16-byte alignment: 8 f32 (32 bytes), 24 bf16 (48 bytes).
    rms_norm_borrowed::<f32>(&caller, 8, 4);
    rms_norm_borrowed::<bf16>(&caller, 24, 8);
    rms_norm_borrowed::<half::f16>(&caller, 8, 40);
}

#[test]
fn softmax_through_views_and_strided_layouts() {
    let Some(caller) = caller_or_skip("softmax_through_views_and_strided_layouts") else {
        return;
    };
    let (rows, n) = (6, 40);
    let x_spec = spec(&[1, rows, n], DType::BFloat16);
    let x_host: Vec<bf16> = host_values(&inputs(rows * n, 31), &[rows * n]);
    let (x_slice, _) = padded(&caller, &x_host, 16, 8);
    let (mut y_slice, y_before) = padded(&caller, &vec![bf16::ZERO; 2 * rows * n], 0, 0);
    let y_at = 8;

    let op = Softmax::new(x_spec.clone(), -1, &caller.device).unwrap();
    // Input: elements 16.. of the slice as candle's strided layout gives them, with a size-1
    // dim of any stride; output: a view of the slice from element 8 on (longer than the tensor).
    let x = TensorRef::from_cuda_strided(&x_slice, 16, &[1, rows, n], &[999, n, 1], &caller.device)
        .unwrap();
    assert_eq!(x.shape(), &[1, rows, n]);
    let mut y =
        TensorMut::from_cuda_view_mut(y_slice.slice_mut(y_at..), [1, rows, n], &caller.device)
            .unwrap();
    op.forward_into(&x, &mut y).unwrap();
    // The written range, read through a borrow of it, then the whole slice.
    let through_ref: Vec<bf16> = y.as_tensor_ref().to_tensor().unwrap().to_vec().unwrap();
    drop(y);

    let own_op = Softmax::new(x_spec, -1, &caller.own).unwrap();
    let own_x = Tensor::from_slice(&x_host, [1, rows, n], &caller.own).unwrap();
    let want: Vec<bf16> = own_op.forward(&own_x).unwrap().to_vec().unwrap();
    assert_eq!(through_ref, want);
    let got = read_back(&caller, &y_slice);
    assert_spliced(
        &got,
        &y_before[..y_at],
        &want,
        &y_before[y_at + rows * n..],
        "softmax through views",
    );
}

#[test]
fn one_borrowed_output_written_by_two_ops() {
    let Some(caller) = caller_or_skip("one_borrowed_output_written_by_two_ops") else {
        return;
    };
    // silu, then softmax reading silu's output in place and writing another range of the
    // same caller's slice: reborrows of one TensorMut, and a TensorRef of what it wrote.
    let n = 64;
    let x_spec = spec(&[n], DType::Float32);
    let x_host: Vec<f32> = host_values(&inputs(n, 41), &[n]);
    let x_slice = caller.stream.clone_htod(&x_host).unwrap();
    let mut out = caller.stream.alloc_zeros::<f32>(3 * n).unwrap();
    let silu = Silu::new(x_spec.clone(), &caller.device).unwrap();
    let softmax = Softmax::new(x_spec.clone(), -1, &caller.device).unwrap();
    {
        let (head, tail) = out.split_at_mut(n);
        let mut first = TensorMut::from_cuda_view_mut(head, [n], &caller.device).unwrap();
        let x = TensorRef::from_cuda_view(x_slice.as_view(), [n], &caller.device).unwrap();
        silu.forward_into(&x, &mut first).unwrap();
        // The first n elements of the 2n of `tail`: the last n of `out` stay zero.
        let rest = TensorMut::from_cuda_view_mut(tail, [n], &caller.device).unwrap();
        softmax.forward_into(&first, rest).unwrap();
    }
    let own_x = Tensor::from_slice(&x_host, [n], &caller.own).unwrap();
    let own_silu = Silu::new(x_spec.clone(), &caller.own).unwrap();
    let own_softmax = Softmax::new(x_spec, -1, &caller.own).unwrap();
    let s = own_silu.forward(&own_x).unwrap();
    let want_silu: Vec<f32> = s.to_vec().unwrap();
    let want_softmax: Vec<f32> = own_softmax.forward(&s).unwrap().to_vec().unwrap();
    let got = read_back(&caller, &out);
    assert_spliced(
        &got,
        &[],
        &[want_silu, want_softmax].concat(),
        &[0.0; 64],
        "silu then softmax",
    );
}

#[test]
fn gemm_on_borrowed_bytes() {
    let Some(caller) = caller_or_skip("gemm_on_borrowed_bytes") else {
        return;
    };
    // cuBLASLt (bfloat16) on operands at byte offsets of one caller's buffer, into another's.
    let dtype = DType::BFloat16;
    let (a_spec, b_spec, c_spec) = (
        spec(&[16, 32], dtype),
        spec(&[32, 8], dtype),
        spec(&[16, 8], dtype),
    );
    let cpu = Device::cpu();
    let a_bytes = Tensor::random(&a_spec, 51, &cpu)
        .unwrap()
        .to_bytes()
        .unwrap();
    let b_bytes = Tensor::random(&b_spec, 52, &cpu)
        .unwrap()
        .to_bytes()
        .unwrap();
    let a_at = 64;
    let b_at = a_at + a_bytes.len() + 32;
    let mut host = vec![0xa5u8; b_at + b_bytes.len() + 16];
    host[a_at..a_at + a_bytes.len()].copy_from_slice(&a_bytes);
    host[b_at..b_at + b_bytes.len()].copy_from_slice(&b_bytes);
    let inputs_slice = caller.stream.clone_htod(&host).unwrap();
    let c_at = 256;
    let c_len = c_spec.size_in_bytes().unwrap();
    let mut c_slice = caller
        .stream
        .clone_htod(&vec![0x5au8; c_at + c_len + 48])
        .unwrap();

    let op = Gemm::new(
        a_spec.clone(),
        b_spec.clone(),
        Default::default(),
        &caller.device,
    )
    .unwrap();
    let a = TensorRef::from_cuda_bytes(&inputs_slice, a_at, &a_spec, &caller.device).unwrap();
    let b = TensorRef::from_cuda_bytes(&inputs_slice, b_at, &b_spec, &caller.device).unwrap();
    let c = TensorMut::from_cuda_bytes_mut(&mut c_slice, c_at, &c_spec, &caller.device).unwrap();
    op.forward_into(a, b, c).unwrap();

    let own_op = Gemm::new(
        a_spec.clone(),
        b_spec.clone(),
        Default::default(),
        &caller.own,
    )
    .unwrap();
    let want = own_op
        .forward(
            &Tensor::from_bytes(&a_bytes, &a_spec, &caller.own).unwrap(),
            &Tensor::from_bytes(&b_bytes, &b_spec, &caller.own).unwrap(),
        )
        .unwrap()
        .to_bytes()
        .unwrap();
    let got = read_back(&caller, &c_slice);
    assert_eq!(&got[..c_at], &vec![0x5au8; c_at][..]);
    assert_eq!(&got[c_at..c_at + c_len], &want[..]);
    assert_eq!(&got[c_at + c_len..], &[0x5au8; 48][..]);
}

#[test]
fn decode_reads_a_borrowed_cache_and_writes_borrowed_outputs() {
    let Some(caller) = caller_or_skip("decode_reads_a_borrowed_cache_and_writes_borrowed_outputs")
    else {
        return;
    };
    // The cache is one layer's range of a caller's multi-layer buffer; o and lse go into ranges
    // of the caller's buffers.
    let d = &caller.device;
    let q_spec = spec(&[2, 8, 64], DType::BFloat16);
    let cache_spec = spec(&[2, 16, 2, 64], DType::BFloat16);
    let lens = [11i32, 3];
    let options = DecodeOptions::default().return_lse(true);
    let cpu = Device::cpu();
    let q_host: Vec<bf16> = Tensor::random(&q_spec, 61, &cpu).unwrap().to_vec().unwrap();
    let k_host: Vec<bf16> = Tensor::random(&cache_spec, 62, &cpu)
        .unwrap()
        .to_vec()
        .unwrap();
    let v_host: Vec<bf16> = Tensor::random(&cache_spec, 63, &cpu)
        .unwrap()
        .to_vec()
        .unwrap();
    let layer = k_host.len();
    // Layer 1 of 3: keys and values of layers 0 and 2 are sentinels.
    let (k_layers, _) = padded(&caller, &k_host, layer, layer);
    let (v_layers, _) = padded(&caller, &v_host, layer, layer);
    let q_slice = caller.stream.clone_htod(&q_host).unwrap();
    let seqlens = caller.stream.clone_htod(&lens).unwrap();
    let (mut o_slice, o_before) = padded(&caller, &vec![bf16::ZERO; 2 * 8 * 64], 64, 8);
    let (mut lse_slice, lse_before) = padded(&caller, &[0.0f32; 16], 4, 4);

    let op = GqaDecode::new(
        q_spec.clone(),
        cache_spec.clone(),
        cache_spec.clone(),
        &lens,
        options,
        d,
    )
    .unwrap();
    let out = AttentionOutputMut {
        o: TensorMut::from_cuda_slice_mut(&mut o_slice, 64, [2, 8, 64], d).unwrap(),
        lse: Some(TensorMut::from_cuda_slice_mut(&mut lse_slice, 4, [2, 8], d).unwrap()),
    };
    op.forward_into(
        TensorRef::from_cuda_slice(&q_slice, 0, [2, 8, 64], d).unwrap(),
        TensorRef::from_cuda_slice(&k_layers, layer, [2, 16, 2, 64], d).unwrap(),
        TensorRef::from_cuda_slice(&v_layers, layer, [2, 16, 2, 64], d).unwrap(),
        TensorRef::from_cuda_slice(&seqlens, 0, [2], d).unwrap(),
        None,
        out,
    )
    .unwrap();

    let own = GqaDecode::new(
        q_spec,
        cache_spec.clone(),
        cache_spec,
        &lens,
        options,
        &caller.own,
    )
    .unwrap();
    let want = own
        .forward(
            &Tensor::from_slice(&q_host, [2, 8, 64], &caller.own).unwrap(),
            &Tensor::from_slice(&k_host, [2, 16, 2, 64], &caller.own).unwrap(),
            &Tensor::from_slice(&v_host, [2, 16, 2, 64], &caller.own).unwrap(),
            &Tensor::from_slice(&lens, [2], &caller.own).unwrap(),
            None,
        )
        .unwrap();
    let want_o: Vec<bf16> = want.o.to_vec().unwrap();
    let want_lse: Vec<f32> = want.lse.unwrap().to_vec().unwrap();
    let got_o = read_back(&caller, &o_slice);
    assert_spliced(
        &got_o,
        &o_before[..64],
        &want_o,
        &o_before[64 + 1024..],
        "decode o",
    );
    let got_lse = read_back(&caller, &lse_slice);
    assert_spliced(
        &got_lse,
        &lse_before[..4],
        &want_lse,
        &lse_before[20..],
        "decode lse",
    );
}

#[test]
fn borrows_that_do_not_fit_are_errors() {
    let Some(caller) = caller_or_skip("borrows_that_do_not_fit_are_errors") else {
        return;
    };
    let d = &caller.device;
    let mut slice = caller.stream.alloc_zeros::<f32>(64).unwrap();

    // Element 1 of an f32 buffer is 4 bytes past a 16-byte boundary: refused, not copied.
    let err = TensorRef::from_cuda_slice(&slice, 1, [8], d).unwrap_err();
    assert!(
        matches!(err, Error::Misaligned { byte_offset: 4, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("16-byte aligned"), "{err}");
    let err = TensorMut::from_cuda_slice_mut(&mut slice, 2, [8], d).unwrap_err();
    assert!(
        matches!(err, Error::Misaligned { byte_offset: 8, .. }),
        "{err}"
    );
    let bytes = caller.stream.alloc_zeros::<u8>(64).unwrap();
    let err =
        TensorRef::from_cuda_bytes(&bytes, 3, &spec(&[4], DType::Float8E4M3Fn), d).unwrap_err();
    assert!(
        matches!(err, Error::Misaligned { byte_offset: 3, .. }),
        "{err}"
    );

    // Past the end.
    let err = TensorRef::from_cuda_slice(&slice, 60, [8], d).unwrap_err();
    assert!(
        matches!(
            err,
            Error::BorrowOutOfRange {
                offset: 60,
                needed: 8,
                available: 64,
                ..
            }
        ),
        "{err}"
    );
    let err = TensorMut::from_cuda_view_mut(slice.slice_mut(32..), [33], d).unwrap_err();
    assert!(matches!(err, Error::BorrowOutOfRange { .. }), "{err}");
    let err = TensorRef::from_cuda_slice(&slice, usize::MAX, [2], d).unwrap_err();
    assert!(matches!(err, Error::BorrowOutOfRange { .. }), "{err}");

    // A transposed layout (as candle's Layout describes one): named with its shape and strides.
    let err = TensorRef::from_cuda_strided(&slice, 0, &[4, 8], &[1, 4], d).unwrap_err();
    assert!(matches!(err, Error::NotContiguous { .. }), "{err}");
    assert!(err.to_string().contains("[4, 8]") && err.to_string().contains("[1, 4]"));
    // A broadcast one (stride 0 on a dim of extent > 1).
    let err = TensorRef::from_cuda_strided(&slice, 0, &[4, 8], &[0, 1], d).unwrap_err();
    assert!(matches!(err, Error::NotContiguous { .. }), "{err}");

    // A GPU buffer on the CPU device, host data on the GPU device.
    let err = TensorRef::from_cuda_slice(&slice, 0, [8], &Device::cpu()).unwrap_err();
    assert!(matches!(err, Error::WrongDevice { .. }), "{err}");
    let host = [0.0f32; 8];
    let err = TensorRef::from_host_slice(&host, [8], d).unwrap_err();
    assert!(matches!(err, Error::WrongDevice { .. }), "{err}");

    // A borrowed tensor of another spec than the plan's is the usual InputMismatch.
    let op = Softmax::new(TensorSpec::new([16], DType::Float32), -1, d).unwrap();
    let x = TensorRef::from_cuda_slice(&slice, 0, [8], d).unwrap();
    let mut out = caller.stream.alloc_zeros::<f32>(16).unwrap();
    let y = TensorMut::from_cuda_slice_mut(&mut out, 0, [16], d).unwrap();
    let err = op.forward_into(x, y).unwrap_err();
    assert!(matches!(err, Error::InputMismatch { .. }), "{err}");
}
