// The parts of the runtime that must be C++ (or need the linker's section symbols): poisoning the
// static shared memory before each block, and the alignment sanitizer's handlers, which turn a
// misaligned access in kernel code into a launch failure naming the source line.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>

extern "C" [[noreturn]] void cuda_emu_fail(const char* what, const char* file, int line);

#ifndef CUDA_EMU_ASAN
// Every static __shared__ array lives in section cuda_emu_shared (include/cuda_emu.h); the linker
// defines these bounds. Weak: a build with no shared array has no such section.
extern "C" char __start_cuda_emu_shared[] __attribute__((weak));
extern "C" char __stop_cuda_emu_shared[] __attribute__((weak));
#endif

// Fills all static shared memory with 0xFF (NaN in every float type): a read of an element no
// thread of the block wrote shows as NaN. Returns the bytes poisoned.
extern "C" std::size_t cuda_emu_poison_shared(void) {
#ifndef CUDA_EMU_ASAN
    if (__start_cuda_emu_shared != nullptr && +__stop_cuda_emu_shared > +__start_cuda_emu_shared) {
        const std::size_t n = static_cast<std::size_t>(__stop_cuda_emu_shared - __start_cuda_emu_shared);
        std::memset(__start_cuda_emu_shared, 0xff, n);
        return n;
    }
#endif
    return 0;
}

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
