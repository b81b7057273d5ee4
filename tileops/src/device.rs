//! Where ops run: the CPU (reference implementations) or a CUDA GPU (NVRTC-compiled kernels).
//!
//! Finding a GPU never panics: the driver library is probed before any cudarc call, and the calls
//! that can still panic (a symbol missing from an old driver) run under `catch_unwind`.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{CudaContext, CudaStream};

use crate::Error;

/// How cuda-emu's stand-in driver names its device.
const EMULATED_DEVICE_PREFIX: &str = "cuda-emu";

/// A device: the CPU, or one CUDA GPU.
///
/// Cloning is cheap; clones of one GPU share its context, stream and kernel cache (so do separate
/// `Device::cuda(n)` calls with the same ordinal). A caller that already has a cudarc context
/// and stream builds the device on them with [`Device::from_cuda_stream`].
///
/// ```
/// use tileops::Device;
/// let cpu = Device::cpu();
/// assert!(!cpu.is_cuda());
/// assert_eq!(cpu.name(), "cpu");
///
/// // The GPU when one is usable, else the CPU; never panics.
/// let (device, why) = Device::probe_best();
/// println!("running on {device}: {why}");
/// ```
#[derive(Clone)]
pub struct Device {
    kind: Kind,
}

#[derive(Clone)]
enum Kind {
    Cpu,
    Cuda(Arc<CudaDevice>),
}

/// The state of one GPU shared by every `Device` handle to it.
pub(crate) struct CudaDevice {
    pub(crate) ordinal: usize,
    pub(crate) name: String,
    /// Compute capability (major, minor): `(9, 0)` on H100/H200.
    pub(crate) capability: (u32, u32),
    pub(crate) sm_count: u32,
    pub(crate) ctx: Arc<CudaContext>,
    /// Every launch, copy and cuBLAS call of this device is issued here.
    pub(crate) stream: Arc<CudaStream>,
    /// What the kernels module caches for this device (opaque here: only `kernels` reads it).
    pub(crate) kernels: crate::kernels::Cache,
}

impl Device {
    /// The CPU: every op runs its reference implementation.
    pub fn cpu() -> Device {
        Device { kind: Kind::Cpu }
    }

    /// The CUDA GPU of that ordinal.
    ///
    /// Errors (never panics) when the driver library is missing, no GPU is visible, or the ordinal
    /// is out of range.
    pub fn cuda(ordinal: usize) -> Result<Device, Error> {
        static OPENED: OnceLock<Mutex<HashMap<usize, Arc<CudaDevice>>>> = OnceLock::new();
        let opened = OPENED.get_or_init(Default::default);
        let mut opened = opened.lock().unwrap_or_else(|poison| poison.into_inner());
        if let Some(dev) = opened.get(&ordinal) {
            return Ok(Device {
                kind: Kind::Cuda(dev.clone()),
            });
        }
        let dev = Arc::new(open_cuda(ordinal)?);
        opened.insert(ordinal, dev.clone());
        Ok(Device {
            kind: Kind::Cuda(dev),
        })
    }

    /// The GPU of `ctx`, with every tileops launch, copy and cuBLAS call issued to `stream`: ops
    /// run on the caller's own stream, ordered with the caller's work on it.
    ///
    /// `stream` must belong to `ctx` (else [`Error::WrongContext`]). Kernels already loaded for
    /// the same primary context (by [`Device::cuda`] or another device built here) are reused;
    /// cuBLAS handles are made for this stream. The device equals [`Device::cuda`] of the same
    /// ordinal when `ctx` is that GPU's primary context (cudarc's [`CudaContext::new`]): their
    /// tensors are interchangeable, and cudarc's event tracking (on by default) orders work
    /// across the two streams.
    ///
    /// ```no_run
    /// use cudarc::driver::CudaContext;
    /// use tileops::Device;
    ///
    /// let ctx = CudaContext::new(0).expect("a GPU");
    /// let stream = ctx.new_stream().expect("a stream");
    /// let device = Device::from_cuda_stream(ctx, stream.clone())?;
    /// assert!(std::sync::Arc::ptr_eq(device.cuda_stream().unwrap(), &stream));
    /// # Ok::<(), tileops::Error>(())
    /// ```
    pub fn from_cuda_stream(
        ctx: Arc<CudaContext>,
        stream: Arc<CudaStream>,
    ) -> Result<Device, Error> {
        if **stream.context() != *ctx {
            return Err(Error::WrongContext {
                what: "the stream".to_owned(),
                expected: format!("the context passed (GPU {})", ctx.ordinal()),
                got: format!("a context of GPU {}", stream.context().ordinal()),
            });
        }
        let ordinal = ctx.ordinal();
        // Kernels loaded in the primary context are valid on any of its streams: share the cache
        // of `Device::cuda(ordinal)`, which uses that context, so nothing compiles or loads twice.
        let shared = if ctx.is_primary() {
            Device::cuda(ordinal)
                .ok()
                .and_then(|d| d.cuda_device().cloned())
                .filter(|base| *base.ctx == *ctx)
        } else {
            None
        };
        let dev = describe(ordinal, ctx, stream, shared.as_deref())?;
        Ok(Device {
            kind: Kind::Cuda(Arc::new(dev)),
        })
    }

    /// The first CUDA GPU when one is usable, else the CPU; `TILEOPS_DEVICE=cpu` forces the CPU.
    ///
    /// Prints nothing (a library does not write to stderr): a tool that wants to say which device
    /// it runs on, and why, calls [`Device::probe_best`] and prints its sentence.
    pub fn best() -> Device {
        Device::probe_best().0
    }

    /// Like [`Device::best`], with a sentence saying why that device was picked.
    pub fn probe_best() -> (Device, String) {
        if std::env::var("TILEOPS_DEVICE").is_ok_and(|v| v.eq_ignore_ascii_case("cpu")) {
            return (Device::cpu(), "TILEOPS_DEVICE=cpu".to_owned());
        }
        match Device::cuda(0) {
            Ok(device) => (device, "a CUDA GPU is usable".to_owned()),
            Err(err) => (Device::cpu(), format!("no CUDA GPU: {err}")),
        }
    }

    /// Whether this is a CUDA GPU.
    pub fn is_cuda(&self) -> bool {
        matches!(self.kind, Kind::Cuda(_))
    }

    /// Whether this GPU is cuda-emu's emulated device (the kernels running on the CPU behind a
    /// stand-in driver; see `scripts/emu-check.sh`): its results are correct or wrong like a
    /// GPU's, but its timings say nothing about a GPU, so benchmarks record none.
    ///
    /// ```
    /// assert!(!tileops::Device::cpu().is_emulated());
    /// ```
    pub fn is_emulated(&self) -> bool {
        self.cuda_device()
            .is_some_and(|dev| dev.name.starts_with(EMULATED_DEVICE_PREFIX))
    }

    /// Whether this is the CPU.
    pub fn is_cpu(&self) -> bool {
        matches!(self.kind, Kind::Cpu)
    }

    /// `"cpu"`, or the GPU's marketing name (`"NVIDIA H200"`).
    pub fn name(&self) -> &str {
        match &self.kind {
            Kind::Cpu => "cpu",
            Kind::Cuda(dev) => &dev.name,
        }
    }

    /// The GPU's ordinal; `None` on the CPU.
    pub fn ordinal(&self) -> Option<usize> {
        self.cuda_device().map(|dev| dev.ordinal)
    }

    /// The GPU's compute capability (`(9, 0)` for sm_90); `None` on the CPU.
    pub fn compute_capability(&self) -> Option<(u32, u32)> {
        self.cuda_device().map(|dev| dev.capability)
    }

    /// Number of streaming multiprocessors; `None` on the CPU.
    pub fn sm_count(&self) -> Option<u32> {
        self.cuda_device().map(|dev| dev.sm_count)
    }

    /// The GPU's context, for timing and other low-level work (events, extra streams).
    pub fn cuda_context(&self) -> Option<&Arc<CudaContext>> {
        self.cuda_device().map(|dev| &dev.ctx)
    }

    /// The stream every tileops kernel, copy and cuBLAS call on this GPU is issued to: the
    /// context's default stream for [`Device::cuda`], the caller's for
    /// [`Device::from_cuda_stream`].
    pub fn cuda_stream(&self) -> Option<&Arc<CudaStream>> {
        self.cuda_device().map(|dev| &dev.stream)
    }

    /// Waits for all work issued to this device; a no-op on the CPU.
    ///
    /// Kernel launches are asynchronous: an error inside a kernel surfaces here.
    pub fn synchronize(&self) -> Result<(), Error> {
        match &self.kind {
            Kind::Cpu => Ok(()),
            Kind::Cuda(dev) => dev
                .stream
                .synchronize()
                .map_err(|e| Error::driver("synchronizing the stream", e)),
        }
    }

    pub(crate) fn cuda_device(&self) -> Option<&Arc<CudaDevice>> {
        match &self.kind {
            Kind::Cpu => None,
            Kind::Cuda(dev) => Some(dev),
        }
    }
}

impl PartialEq for Device {
    fn eq(&self, other: &Self) -> bool {
        match (&self.kind, &other.kind) {
            (Kind::Cpu, Kind::Cpu) => true,
            // Same GPU and same context: memory of one is usable by the other, whatever the
            // streams (a non-primary context's memory is not another context's).
            (Kind::Cuda(a), Kind::Cuda(b)) => a.ordinal == b.ordinal && *a.ctx == *b.ctx,
            _ => false,
        }
    }
}

impl Eq for Device {}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Cpu => f.write_str("cpu"),
            Kind::Cuda(dev) => {
                let (major, minor) = dev.capability;
                write!(f, "cuda:{} ({}, sm_{major}{minor})", dev.ordinal, dev.name)
            }
        }
    }
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Device({self})")
    }
}

/// Runs a cudarc call that may panic (it does when a library or symbol is missing) as a `Result`.
fn guarded<T>(what: &str, call: impl FnOnce() -> T) -> Result<T, Error> {
    crate::libraries::catch_library_panic(call).map_err(|message| Error::NoDevice {
        reason: format!("{what}: {message}"),
    })
}

fn open_cuda(ordinal: usize) -> Result<CudaDevice, Error> {
    // `CudaContext::new` panics without libcuda.so (cudarc's dynamic loading): probe the library
    // first (never panics). Linked (the `dynamic-linking` feature), it is already loaded.
    if !crate::libraries::loader_opens(crate::libraries::DRIVER_SONAMES) {
        return Err(Error::DriverMissing {
            detail: "libcuda.so could not be loaded by the dynamic linker".to_owned(),
        });
    }
    let count = guarded("counting CUDA devices", CudaContext::device_count)?.map_err(|e| {
        Error::NoDevice {
            reason: format!("the driver reports {e}"),
        }
    })?;
    let count = usize::try_from(count).unwrap_or(0);
    if count == 0 {
        return Err(Error::NoDevice {
            reason: "the driver sees no GPU".to_owned(),
        });
    }
    if ordinal >= count {
        return Err(Error::NoDevice {
            reason: format!("ordinal {ordinal} requested, but only {count} GPU(s) are visible"),
        });
    }
    let ctx = guarded("creating a CUDA context", || CudaContext::new(ordinal))?
        .map_err(|e| Error::driver(format!("creating a context on GPU {ordinal}"), e))?;
    let stream = ctx.default_stream();
    describe(ordinal, ctx, stream, None)
}

/// The device state of `ctx` on `stream`; the kernels' cache shared with `shared` when given (same
/// context), else empty.
fn describe(
    ordinal: usize,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    shared: Option<&CudaDevice>,
) -> Result<CudaDevice, Error> {
    let name = ctx
        .name()
        .map_err(|e| Error::driver("reading the device name", e))?;
    let (major, minor) = ctx
        .compute_capability()
        .map_err(|e| Error::driver("reading the compute capability", e))?;
    let sm_count = ctx
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .map_err(|e| Error::driver("reading the SM count", e))?;
    Ok(CudaDevice {
        ordinal,
        name,
        capability: (major.max(0) as u32, minor.max(0) as u32),
        sm_count: sm_count.max(1) as u32,
        ctx,
        stream,
        kernels: shared.map_or_else(Default::default, |d| d.kernels.for_another_stream()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_is_cpu() {
        let cpu = Device::cpu();
        assert!(cpu.is_cpu() && !cpu.is_cuda());
        assert_eq!(cpu.to_string(), "cpu");
        assert_eq!(cpu.ordinal(), None);
        assert_eq!(cpu, Device::cpu());
        cpu.synchronize().unwrap();
    }

    #[test]
    fn probing_never_panics() {
        // On a machine without a GPU this is an error value; with one, a device.
        match Device::cuda(0) {
            Ok(dev) => assert!(dev.is_cuda()),
            Err(err) => assert!(!err.to_string().is_empty()),
        }
        let (device, why) = Device::probe_best();
        assert!(!why.is_empty());
        assert_eq!(device.is_cuda(), Device::cuda(0).is_ok());
    }

    #[test]
    fn out_of_range_ordinal_is_an_error() {
        assert!(Device::cuda(4096).is_err());
    }
}
