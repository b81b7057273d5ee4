//! Resident CTAs per SM on sm_90 (H100/H200), as the CUDA occupancy calculator counts them.

/// sm_90's per-SM limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SmLimits {
    /// 32-bit registers per SM.
    pub registers: u32,
    /// Registers per thread are allocated in multiples of this.
    pub thread_register_unit: u32,
    /// A warp's registers are allocated in granules of this many.
    pub warp_register_granule: u32,
    /// Most registers one thread may use.
    pub max_thread_registers: u32,
    /// Resident warps per SM.
    pub warps: u32,
    /// Resident CTAs per SM.
    pub ctas: u32,
    /// Shared memory per SM, bytes.
    pub shared_bytes: u32,
    /// Shared memory one CTA may use (static + dynamic), bytes.
    pub max_cta_shared_bytes: u32,
    /// Shared memory the driver reserves per resident CTA, bytes.
    pub reserved_cta_shared_bytes: u32,
    /// Threads per CTA.
    pub max_cta_threads: u32,
    /// SMs on the device the waves are counted over (H100 SXM and H200: 132).
    pub sm_count: u32,
}

/// sm_90 as on an H200: 65,536 registers, 64 warps, 32 CTAs, 228 KB of shared memory per SM,
/// 1 KB reserved per CTA, 132 SMs.
pub const SM90: SmLimits = SmLimits {
    registers: 65_536,
    thread_register_unit: 8,
    warp_register_granule: 256,
    max_thread_registers: 255,
    warps: 64,
    ctas: 32,
    shared_bytes: 228 * 1024,
    max_cta_shared_bytes: 227 * 1024,
    reserved_cta_shared_bytes: 1024,
    max_cta_threads: 1024,
    sm_count: 132,
};

/// Resident CTAs per SM, or why a CTA cannot be resident at all.
pub fn ctas_per_sm(
    limits: &SmLimits,
    threads: u32,
    registers: u32,
    shared_bytes: u32,
) -> Result<u32, String> {
    if threads == 0 || threads > limits.max_cta_threads {
        return Err(format!(
            "{threads} threads per CTA (1..={} on sm_90)",
            limits.max_cta_threads
        ));
    }
    if shared_bytes > limits.max_cta_shared_bytes {
        return Err(format!(
            "{shared_bytes} bytes of shared memory per CTA (at most {} on sm_90)",
            limits.max_cta_shared_bytes
        ));
    }
    let warps = threads.div_ceil(32);
    let thread_registers = registers
        .max(1)
        .next_multiple_of(limits.thread_register_unit);
    let warp_registers = (thread_registers * 32).next_multiple_of(limits.warp_register_granule);
    let by_registers = (limits.registers / warp_registers) / warps;
    if by_registers == 0 {
        return Err(format!(
            "{threads} threads × {registers} registers exceed the SM's {} registers",
            limits.registers
        ));
    }
    let by_warps = limits.warps / warps;
    let by_shared = limits.shared_bytes / (shared_bytes + limits.reserved_cta_shared_bytes);
    Ok(by_registers.min(by_warps).min(by_shared).min(limits.ctas))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limiting_resource_sets_the_count() {
        // 256 threads at 38 registers → 40 per thread, 1280 per warp: 51 warps → 6 CTAs.
        assert_eq!(ctas_per_sm(&SM90, 256, 38, 0), Ok(6));
        // At 32 registers, the 64-warp limit: 8 CTAs.
        assert_eq!(ctas_per_sm(&SM90, 256, 32, 0), Ok(8));
        // 1024 threads at 48 registers: 42 warps' worth of registers, 1 CTA.
        assert_eq!(ctas_per_sm(&SM90, 1024, 48, 0), Ok(1));
        // 64 threads at 16 registers: the 32-CTA limit.
        assert_eq!(ctas_per_sm(&SM90, 64, 16, 0), Ok(32));
        // 100 KB of shared memory (+1 KB reserved) per CTA: 2 fit in 228 KB.
        assert_eq!(ctas_per_sm(&SM90, 128, 32, 100 * 1024), Ok(2));
    }

    #[test]
    fn impossible_ctas_are_errors() {
        assert!(ctas_per_sm(&SM90, 0, 32, 0).is_err());
        assert!(ctas_per_sm(&SM90, 2048, 32, 0).is_err());
        assert!(ctas_per_sm(&SM90, 128, 32, 228 * 1024).is_err());
        assert!(
            ctas_per_sm(&SM90, 1024, 255, 0)
                .unwrap_err()
                .contains("registers")
        );
    }
}
