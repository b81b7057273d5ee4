// Registration of kernel entry points: build.rs generates, per kernel file, a C++ file that
// includes the kernel source and lists its entries with CUDA_EMU_ENTRY; the runtime
// (src/entries.rs) reads the table through cuda_emu_entry_table().
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

struct CudaEmuEntry {
    const char* name;
    const char* file;
    int max_threads;  // __launch_bounds__, 0 when none is declared
    int params;
    void (*invoke)(void** params);
};

namespace cuda_emu {

// Calls kernel F with cuLaunchKernel-style arguments: params[i] points at the i-th argument,
// read as the type the kernel declares (as the GPU reads the parameter buffer).
template <typename Fn, Fn F>
struct Invoker;

template <typename... Args, void (*F)(Args...)>
struct Invoker<void (*)(Args...), F> {
    template <std::size_t... I>
    static void call(void** params, std::index_sequence<I...>) {
        F(*static_cast<std::remove_reference_t<Args>*>(params[I])...);
    }
    static void invoke(void** params) { call(params, std::index_sequence_for<Args...>{}); }
    static constexpr int arity = sizeof...(Args);
};

}  // namespace cuda_emu

#define CUDA_EMU_ENTRY(NAME, MAX_THREADS, FILE)                                                  \
    {#NAME, FILE, MAX_THREADS, cuda_emu::Invoker<decltype(&NAME), &NAME>::arity,                \
     &cuda_emu::Invoker<decltype(&NAME), &NAME>::invoke}
