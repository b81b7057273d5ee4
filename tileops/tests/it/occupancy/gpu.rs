//! The activations size their grid to one full wave by the driver's occupancy API
//! (`cuOccupancyMaxActiveBlocksPerMultiprocessor`). Per activation entry point: the registers the
//! driver reports for the loaded CUBIN against ptxas's report of the same compile, and the blocks
//! of the kernels' 256 threads the driver says one SM holds against the CUDA occupancy
//! calculator's rule for sm_90 on those registers. On a GPU this checks the rule tileops's kernel
//! ledger prices with; on the emulated device, the emulator's reading of the CUBIN.
//!
//! Without a usable GPU the test prints `SKIP: <reason>` and passes; with `TILEOPS_REQUIRE_GPU=1`
//! it fails instead.

use crate::common::gpu_or_skip;
use tileops::kernels::{self, ACTIVATION, Target};

/// Threads per block of the activation kernels.
const THREADS: u32 = 256;

/// sm_90's rule: registers per thread in multiples of 8, per warp in granules of 256, 65,536 per
/// SM; 64 warps and 32 blocks per SM.
fn sm90_resident_blocks(threads: u32, registers: u32) -> u32 {
    let warps = threads.div_ceil(32);
    let warp_registers = (registers.next_multiple_of(8) * 32).next_multiple_of(256);
    ((65_536 / warp_registers) / warps).min(64 / warps).min(32)
}

#[test]
fn activation_grids_are_sized_by_the_drivers_occupancy() {
    let test = "activation_grids_are_sized_by_the_drivers_occupancy";
    let Some(device) = gpu_or_skip(test) else {
        return;
    };
    let capability = device.compute_capability().expect("a CUDA device");
    let arch = capability.0 * 10 + capability.1;
    let compiled = kernels::compile(&ACTIVATION, Target::Sm(arch)).expect("activation.cu compiles");
    let usage = compiled.resource_usage();
    let mut problems = Vec::new();
    for entry in ACTIVATION.entries {
        let ptxas = usage
            .iter()
            .find(|u| u.function == entry.name)
            .unwrap_or_else(|| panic!("no ptxas report for {}", entry.name));
        let function = kernels::load(&device, &ACTIVATION, entry.name).expect("the entry loads");
        let registers = function.num_regs().expect("the driver reports registers") as u32;
        let blocks = function
            .occupancy_max_active_blocks_per_multiprocessor(THREADS, 0, None)
            .expect("the driver answers the occupancy");
        println!(
            "{}: {registers} registers (ptxas {}), {blocks} blocks of {THREADS} per SM",
            entry.name, ptxas.registers
        );
        if registers != ptxas.registers {
            problems.push(format!(
                "{}: the driver reports {registers} registers, ptxas {}",
                entry.name, ptxas.registers
            ));
        }
        if arch == 90 && blocks != sm90_resident_blocks(THREADS, ptxas.registers) {
            problems.push(format!(
                "{}: the driver fits {blocks} blocks of {THREADS} per SM, the sm_90 rule {} at {} registers",
                entry.name,
                sm90_resident_blocks(THREADS, ptxas.registers),
                ptxas.registers
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
