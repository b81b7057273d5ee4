// The parts of the runtime that must be C++ (or need the linker's section symbols): poisoning the
// static shared memory before each block, and the alignment sanitizer's handlers, which turn a
// misaligned access in kernel code into a launch failure naming the source line.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" [[noreturn]] void cuda_emu_fail(const char* what, const char* file, int line);

#if !defined(CUDA_EMU_ASAN) || defined(CUDA_EMU_TRAFFIC)
#define CUDA_EMU_SHARED_SECTION 1
#endif

#ifdef CUDA_EMU_SHARED_SECTION
// Every static __shared__ array lives in section cuda_emu_shared (include/cuda_emu.h); the linker
// defines these bounds. Weak: a build with no shared array has no such section.
extern "C" char __start_cuda_emu_shared[] __attribute__((weak));
extern "C" char __stop_cuda_emu_shared[] __attribute__((weak));
#endif

// Fills `len` bytes of static shared memory from `offset` into the section with 0xFF (NaN in every
// float type): a read of an element no thread of the block wrote shows as NaN. The emulator passes
// the ranges a launch's kernel can reach (src/shared_section.rs).
extern "C" void cuda_emu_poison_shared(std::size_t offset, std::size_t len) {
// Not in the AddressSanitizer build: its redzones around the arrays of templates (which it keeps
// in the section too) must not be written.
#ifndef CUDA_EMU_ASAN
    if (__start_cuda_emu_shared != nullptr && +__stop_cuda_emu_shared > +__start_cuda_emu_shared) {
        const std::size_t n = static_cast<std::size_t>(__stop_cuda_emu_shared - __start_cuda_emu_shared);
        if (offset <= n && len <= n - offset) {
            std::memset(__start_cuda_emu_shared + offset, 0xff, len);
        }
    }
#else
    (void)offset;
    (void)len;
#endif
}

// The bounds of the static shared section, for the traffic ledger's classification of accesses
// ((0, 0) when there is none).
extern "C" void cuda_emu_shared_bounds(std::uintptr_t* start, std::uintptr_t* stop) {
    *start = 0;
    *stop = 0;
#ifdef CUDA_EMU_SHARED_SECTION
    if (__start_cuda_emu_shared != nullptr) {
        *start = reinterpret_cast<std::uintptr_t>(__start_cuda_emu_shared);
        *stop = reinterpret_cast<std::uintptr_t>(__stop_cuda_emu_shared);
    }
#endif
}

#ifdef CUDA_EMU_TRAFFIC
// The traffic ledger's hook (src/traffic.rs). The kernels are compiled with
// `-fsanitize=address --param asan-instrumentation-with-call-threshold=0`, so GCC calls
// __asan_{load,store}{1,2,4,8,16,N} before every access instead of checking the shadow memory
// inline. These definitions are hidden, so the kernels (linked into this object) call them rather
// than libasan's; each runs libasan's own check first (found with dlsym, as libasan is preloaded
// into the process), so a bad access is still reported at its line, then reports the access to
// the ledger with the kernel's return address as its site.
#include <dlfcn.h>

extern "C" void cuda_emu_access(std::uintptr_t addr, std::size_t size, int write, const void* pc);

namespace {
using Check = void (*)(std::uintptr_t);
using CheckN = void (*)(std::uintptr_t, std::uintptr_t);
template <typename F>
F libasan(const char* name) {
    void* f = dlsym(RTLD_DEFAULT, name);
    if (f == nullptr) {
        std::fprintf(stderr, "cuda-emu: %s not found: the traffic build needs libasan preloaded\n", name);
        std::abort();
    }
    return reinterpret_cast<F>(f);
}
}  // namespace

#define CUDA_EMU_HOOK(NAME, SIZE, WRITE)                                                              \
    extern "C" __attribute__((visibility("hidden"), no_sanitize_address, noinline)) void NAME(         \
        std::uintptr_t addr) {                                                                       \
        static const Check real = libasan<Check>(#NAME);                                             \
        real(addr);                                                                                  \
        cuda_emu_access(addr, SIZE, WRITE, __builtin_return_address(0));                             \
    }
#define CUDA_EMU_HOOKS(SUFFIX)                                                                        \
    CUDA_EMU_HOOK(__asan_load1##SUFFIX, 1, 0)                                                        \
    CUDA_EMU_HOOK(__asan_load2##SUFFIX, 2, 0)                                                        \
    CUDA_EMU_HOOK(__asan_load4##SUFFIX, 4, 0)                                                        \
    CUDA_EMU_HOOK(__asan_load8##SUFFIX, 8, 0)                                                        \
    CUDA_EMU_HOOK(__asan_load16##SUFFIX, 16, 0)                                                      \
    CUDA_EMU_HOOK(__asan_store1##SUFFIX, 1, 1)                                                       \
    CUDA_EMU_HOOK(__asan_store2##SUFFIX, 2, 1)                                                       \
    CUDA_EMU_HOOK(__asan_store4##SUFFIX, 4, 1)                                                       \
    CUDA_EMU_HOOK(__asan_store8##SUFFIX, 8, 1)                                                       \
    CUDA_EMU_HOOK(__asan_store16##SUFFIX, 16, 1)
#define CUDA_EMU_HOOK_N(NAME, WRITE)                                                                  \
    extern "C" __attribute__((visibility("hidden"), no_sanitize_address, noinline)) void NAME(         \
        std::uintptr_t addr, std::uintptr_t size) {                                                  \
        static const CheckN real = libasan<CheckN>(#NAME);                                           \
        real(addr, size);                                                                            \
        cuda_emu_access(addr, size, WRITE, __builtin_return_address(0));                             \
    }

// The aborting forms (GCC's default) and the _noabort forms (-fsanitize-recover=address).
CUDA_EMU_HOOKS()
CUDA_EMU_HOOKS(_noabort)
CUDA_EMU_HOOK_N(__asan_loadN, 0)
CUDA_EMU_HOOK_N(__asan_storeN, 1)
CUDA_EMU_HOOK_N(__asan_loadN_noabort, 0)
CUDA_EMU_HOOK_N(__asan_storeN_noabort, 1)
#endif

// GCC's -fsanitize=alignment calls these (libubsan's ABI); the emulator provides them itself, so
// no libubsan is linked and the failure names the kernel, block and thread.
struct UbsanSourceLocation {
    const char* file;
    std::uint32_t line;
    std::uint32_t column;
};
struct UbsanTypeDescriptor {
    std::uint16_t kind;
    std::uint16_t info;
    char name[1];
};
struct UbsanTypeMismatchData {
    UbsanSourceLocation location;
    const UbsanTypeDescriptor* type;
    unsigned char log_alignment;
    unsigned char type_check_kind;
};

static const char* const kCheckKinds[] = {"load of",       "store to",      "reference binding to",
                                          "member access within", "member call on", "constructor call on",
                                          "downcast of",   "downcast of",   "upcast of",
                                          "cast to virtual base of", "_Nonnull binding to",
                                          "dynamic operation on"};

extern "C" [[noreturn]] void __ubsan_handle_type_mismatch_v1(UbsanTypeMismatchData* data, std::uintptr_t ptr) {
    char what[256];
    const unsigned kind = data->type_check_kind;
    const char* verb = kind < sizeof(kCheckKinds) / sizeof(kCheckKinds[0]) ? kCheckKinds[kind] : "access to";
    const std::uintptr_t alignment = std::uintptr_t{1} << data->log_alignment;
    if (ptr == 0) {
        std::snprintf(what, sizeof what, "%s a null pointer of type %s", verb, data->type->name);
    } else {
        std::snprintf(what, sizeof what, "misaligned %s address %#llx for type %s, which needs %llu-byte alignment",
                      verb, static_cast<unsigned long long>(ptr), data->type->name,
                      static_cast<unsigned long long>(alignment));
    }
    cuda_emu_fail(what, data->location.file, static_cast<int>(data->location.line));
}

extern "C" [[noreturn]] void __ubsan_handle_type_mismatch_v1_abort(UbsanTypeMismatchData* data, std::uintptr_t ptr) {
    __ubsan_handle_type_mismatch_v1(data, ptr);
}
