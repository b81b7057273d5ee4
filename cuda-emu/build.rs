//! Compiles every tileops kernel file (and the emulator's self-test kernels) as host C++ against
//! the shim header, and generates the table of their entry points.
//!
//! The entry points are found in each file's preprocessed text (`extern "C" __global__ void
//! [__launch_bounds__(N)] name(`), because tileops declares most of them through macros; the
//! generated C++ then registers each one with a typed invoker, so parameter types come from the
//! kernel itself.
//!
//! NVIDIA's cuda_fp16.h, cuda_bf16.h and cuda_fp8.h (host code paths) need crt/host_defines.h and
//! <nv/target> as well: the pinned wheels of scripts/install-cuda-wheels.sh. The include directory
//! is `$CUDA_EMU_INCLUDE`, else `$TILEOPS_CUDA_WHEELS/nvidia/cu13/include`, else the workspace's
//! `.cuda-wheels/nvidia/cu13/include`.

// tileops's build-script module: its listing of the kernel files is the one this build compiles
// (the parser and renderer there are tileops's business).
#[allow(dead_code)]
#[path = "../tileops/build/kernel_entries.rs"]
mod kernel_entries;

use std::env;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Kernel files that are not compiled as C++, with the reason (their entries are host
/// stand-ins in cpp/stand_ins.cu).
const NOT_COMPILED: &[(&str, &str)] = &[("bench_util.cu", "inline PTX (%globaltimer)")];

struct KernelFile {
    /// The file the entries are reported under (`rms_norm.cu`).
    label: String,
    path: PathBuf,
}

struct Found {
    name: String,
    max_threads: u32,
}

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("set by cargo"));
    let kernels_dir = manifest_dir.join("../tileops/kernels");
    let include_dir = manifest_dir.join("include");
    let cpp_dir = manifest_dir.join("cpp");
    let asan = env::var_os("CARGO_FEATURE_ASAN").is_some();

    for path in [
        &kernels_dir,
        &include_dir,
        &cpp_dir,
        &manifest_dir.join("tests/planted"),
    ] {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    for var in [
        "CUDA_EMU_INCLUDE",
        "TILEOPS_CUDA_WHEELS",
        "CXX",
        "OBJCOPY",
        "AR",
        "CUDA_EMU_OBJECT_CACHE",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }

    let cuda_include = cuda_include_dir(&manifest_dir);
    for header in [
        "cuda_fp16.h",
        "cuda_bf16.h",
        "cuda_fp8.h",
        "crt/host_defines.h",
        "nv/target",
    ] {
        if !cuda_include.join(header).exists() {
            panic!(
                "cuda-emu needs NVIDIA's CUDA headers ({header} not found in {}): run \
                 `bash scripts/install-cuda-wheels.sh` (it installs the pinned nvidia-cuda-runtime, \
                 nvidia-cuda-crt and nvidia-cuda-cccl wheels), or set CUDA_EMU_INCLUDE",
                cuda_include.display()
            );
        }
    }

    let mut files = kernel_files(&kernels_dir);
    files.push(KernelFile {
        label: "bench_util.cu".to_owned(),
        path: cpp_dir.join("stand_ins.cu"),
    });
    files.push(KernelFile {
        label: "planted.cu".to_owned(),
        path: manifest_dir.join("tests/planted/planted.cu"),
    });

    let compiler = cc::Build::new().cpp(true).get_compiler();
    let mut table = String::from("#include <vector>\n#include \"entries.hpp\"\n");
    let mut appends = String::new();
    let mut generated = Vec::new();
    for (i, file) in files.iter().enumerate() {
        let found = scan_entries(
            compiler.path(),
            file,
            &include_dir,
            &kernels_dir,
            &cuda_include,
        );
        let mut unit = format!(
            "#include \"{}\"\n#include \"entries.hpp\"\n",
            file.path.display()
        );
        writeln!(
            unit,
            "extern \"C\" const CudaEmuEntry cuda_emu_entries_{i}[] = {{"
        )
        .unwrap();
        for entry in &found {
            writeln!(
                unit,
                "    CUDA_EMU_ENTRY({}, {}, \"{}\"),",
                entry.name, entry.max_threads, file.label
            )
            .unwrap();
        }
        writeln!(
            unit,
            "}};\nextern \"C\" const unsigned long cuda_emu_entries_{i}_count = {};",
            found.len()
        )
        .unwrap();
        let path = out_dir.join(format!("entries_{i}.cpp"));
        std::fs::write(&path, unit).expect("writing a generated file");
        generated.push(path);
        writeln!(
            table,
            "extern \"C\" const CudaEmuEntry cuda_emu_entries_{i}[];\nextern \"C\" const unsigned long cuda_emu_entries_{i}_count;"
        )
        .unwrap();
        writeln!(
            appends,
            "        all.insert(all.end(), cuda_emu_entries_{i}, cuda_emu_entries_{i} + cuda_emu_entries_{i}_count);"
        )
        .unwrap();
    }
    write!(
        table,
        "extern \"C\" const CudaEmuEntry* cuda_emu_entry_table(unsigned long* count) {{\n    \
         static const std::vector<CudaEmuEntry> entries = [] {{\n        std::vector<CudaEmuEntry> all;\n\
         {appends}        return all;\n    }}();\n    *count = entries.size();\n    return entries.data();\n}}\n"
    )
    .unwrap();
    let table_path = out_dir.join("entry_table.cpp");
    std::fs::write(&table_path, table).expect("writing a generated file");

    // The kernels: optimised even in debug builds (the emulator is slow enough at -O2), with the
    // alignment sanitizer, whose handlers (cpp/runtime.cpp) fail the launch on a misaligned
    // 16-byte access.
    let mut kernels = base_build(&include_dir, &kernels_dir, &cuda_include, &cpp_dir, asan);
    kernels
        .flag("-include")
        .flag(
            include_dir
                .join("cuda_emu.h")
                .to_str()
                .expect("a UTF-8 path"),
        )
        .flag("-fsanitize=alignment")
        .flag("-fno-sanitize-recover=alignment")
        .flag("-w")
        .files(&generated);
    if asan {
        // The traffic ledger (src/traffic.rs): an outline call before every access, which
        // cpp/runtime.cpp forwards to libasan's check and to the ledger.
        kernels
            .flag("--param")
            .flag("asan-instrumentation-with-call-threshold=0");
    }
    let mut runtime = base_build(&include_dir, &kernels_dir, &cuda_include, &cpp_dir, asan);
    runtime.file(cpp_dir.join("runtime.cpp")).file(&table_path);

    let libraries = [KERNELS_LIBRARY, RUNTIME_LIBRARY];
    let cache = env::var_os("CUDA_EMU_OBJECT_CACHE")
        .filter(|dir| !dir.is_empty())
        .map(|dir| {
            let key = library_key(
                &[&kernels, &runtime],
                &[
                    &kernels_dir,
                    &include_dir,
                    &cpp_dir,
                    &manifest_dir.join("tests/planted"),
                    &cuda_include,
                ],
                &generated.iter().chain([&table_path]).collect::<Vec<_>>(),
            );
            LibraryCache::open(PathBuf::from(dir), key)
        });
    if !cache
        .as_ref()
        .is_some_and(|cache| cache.restore(&out_dir, &libraries))
    {
        let objects = kernels.compile_intermediates();
        // Both builds keep static shared memory in one section (the ASan build for the ledger).
        for object in &objects {
            move_template_statics_to_shared_section(object);
        }
        archive(&out_dir.join(KERNELS_LIBRARY), &objects);
        archive(
            &out_dir.join(RUNTIME_LIBRARY),
            &runtime.compile_intermediates(),
        );
        if let Some(cache) = &cache {
            cache.store(&out_dir, &libraries);
        }
    }
    println!("cargo:rustc-link-search=native={}", out_dir.display());
    println!("cargo:rustc-link-lib=static=cuda_emu_kernels");
    println!("cargo:rustc-link-lib=static=cuda_emu_runtime");

    if asan {
        // libasan is also preloaded at run time: it must come first in the process, and the
        // programs that load the stand-in driver are not instrumented.
        println!("cargo:rustc-link-lib=dylib=asan");
    }
    println!("cargo:rustc-link-lib=stdc++");
    println!("cargo:rustc-link-lib=m");
}

const KERNELS_LIBRARY: &str = "libcuda_emu_kernels.a";
const RUNTIME_LIBRARY: &str = "libcuda_emu_runtime.a";

/// Compiled libraries shared between builds, in `$CUDA_EMU_OBJECT_CACHE` (CI sets it): the kernels'
/// C++ is a minute of compiling on two cores, and the same in the debug build that clippy and
/// `cargo check` run this script for as in the `emulated` build, whose flags are fixed here
/// (`-O2`, debug info only with ASan). An entry is a directory named by the SHA-256 of everything
/// the libraries depend on ([`library_key`]); builds of one entry take turns on `<key>.lock` (an
/// advisory lock; the second copies what the first compiled), and an entry is written to a
/// temporary directory, then renamed into place whole. A cache that cannot be used costs the
/// cache only: the libraries are compiled as without one.
struct LibraryCache {
    entry: PathBuf,
    /// Held while this build restores or compiles the entry; released when the file closes.
    _turn: Option<std::fs::File>,
}

impl LibraryCache {
    fn open(dir: PathBuf, key: String) -> LibraryCache {
        let turn = std::fs::create_dir_all(&dir)
            .and_then(|()| {
                std::fs::OpenOptions::new()
                    .create(true)
                    .truncate(false)
                    .write(true)
                    .open(dir.join(format!("{key}.lock")))
            })
            .and_then(|file| file.lock().map(|()| file))
            .ok();
        LibraryCache {
            entry: dir.join(key),
            _turn: turn,
        }
    }

    /// Copies the entry's libraries into `out_dir`; false if the entry is not there whole.
    fn restore(&self, out_dir: &Path, libraries: &[&str]) -> bool {
        libraries
            .iter()
            .all(|name| std::fs::copy(self.entry.join(name), out_dir.join(name)).is_ok())
    }

    fn store(&self, out_dir: &Path, libraries: &[&str]) {
        let tmp = self
            .entry
            .with_extension(format!("tmp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let written = std::fs::create_dir_all(&tmp).and_then(|()| {
            libraries
                .iter()
                .try_for_each(|name| std::fs::copy(out_dir.join(name), tmp.join(name)).map(|_| ()))
        });
        if written
            .and_then(|()| std::fs::rename(&tmp, &self.entry))
            .is_err()
        {
            let _ = std::fs::remove_dir_all(&tmp);
        }
    }
}

/// The SHA-256 of what the libraries are made from: each build's compiler, its `--version` and
/// its every argument (cc's flags, including CXXFLAGS, the include directories and the defines),
/// then the path and contents of every file under the directories the sources include from (the
/// kernels, the shim, NVIDIA's headers), and the name and contents of each generated source.
fn library_key(builds: &[&cc::Build], dirs: &[&PathBuf], generated: &[&PathBuf]) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    let mut field = |bytes: &[u8]| {
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(bytes);
    };
    field(b"cuda-emu libraries 1");
    for build in builds {
        let tool = build.get_compiler();
        let version = Command::new(tool.path())
            .arg("--version")
            .output()
            .map(|out| out.stdout)
            .unwrap_or_default();
        field(tool.path().as_os_str().as_encoded_bytes());
        field(&version);
        for arg in tool.args() {
            field(arg.as_encoded_bytes());
        }
    }
    let mut file = |label: &Path, path: &Path| {
        field(label.as_os_str().as_encoded_bytes());
        field(&std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display())));
    };
    // A generated source by its name alone: it lives in this build's OUT_DIR, which differs
    // between the builds that share an entry.
    for path in generated {
        file(Path::new(path.file_name().expect("a file name")), path);
    }
    let mut sources = Vec::new();
    for dir in dirs {
        files_under(dir, &mut sources);
    }
    for path in &sources {
        file(path, path);
    }
    hash.finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Every file under `dir`, recursively, in sorted order (links followed).
fn files_under(dir: &Path, files: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            files_under(&path, files);
        } else {
            files.push(path);
        }
    }
}

/// GCC ignores the section attribute of a function-local static with vague linkage (a
/// `__shared__` array inside a template or inline function, as most of tileops's are): it goes
/// to a COMDAT `.bss._ZZ<function><name>` section instead. Kernel code has no other zero-initialised
/// function-local statics, so those sections are moved into `cuda_emu_shared`, where the runtime
/// poisons them before every block like the others.
fn move_template_statics_to_shared_section(object: &Path) {
    let bytes =
        std::fs::read(object).unwrap_or_else(|e| panic!("reading {}: {e}", object.display()));
    let file = object::File::parse(&*bytes)
        .unwrap_or_else(|e| panic!("parsing {}: {e}", object.display()));
    use object::{Object, ObjectSection};
    let renames: Vec<String> = file
        .sections()
        .filter_map(|s| s.name().ok().map(str::to_owned))
        .filter(|name| name.starts_with(".bss._ZZ"))
        .map(|name| format!("{name}=cuda_emu_shared"))
        .collect();
    if renames.is_empty() {
        return;
    }
    let objcopy = env::var("OBJCOPY").unwrap_or_else(|_| "objcopy".to_owned());
    let mut command = Command::new(&objcopy);
    for rename in &renames {
        command.arg("--rename-section").arg(rename);
    }
    let status = command
        .arg(object)
        .status()
        .unwrap_or_else(|e| panic!("running {objcopy} (binutils): {e}"));
    assert!(status.success(), "{objcopy} failed on {}", object.display());
}

/// A static library of `objects`.
fn archive(library: &Path, objects: &[PathBuf]) {
    let _ = std::fs::remove_file(library);
    let ar = env::var("AR").unwrap_or_else(|_| "ar".to_owned());
    let status = Command::new(&ar)
        .arg("crs")
        .arg(library)
        .args(objects)
        .status()
        .unwrap_or_else(|e| panic!("running {ar} (binutils): {e}"));
    assert!(status.success(), "{ar} failed on {}", library.display());
}

fn base_build(
    include_dir: &Path,
    kernels_dir: &Path,
    cuda_include: &Path,
    cpp_dir: &Path,
    asan: bool,
) -> cc::Build {
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .std("c++17")
        .opt_level(2)
        // Debug info in the ASan build, so its reports name the kernel's source line.
        .debug(asan)
        .include(include_dir)
        .include(kernels_dir)
        .include(cpp_dir)
        .include(cuda_include)
        .flag("-fno-strict-aliasing")
        .flag("-fvisibility=hidden")
        .flag("-fvisibility-inlines-hidden");
    if asan {
        build
            .define("CUDA_EMU_ASAN", None)
            // The ASan build also counts the traffic ledger: static shared memory goes to its
            // section as in the normal build, so the ledger can tell shared accesses.
            .define("CUDA_EMU_TRAFFIC", None)
            .flag("-fsanitize=address")
            .flag("-fno-omit-frame-pointer");
    }
    build
}

fn cuda_include_dir(manifest_dir: &Path) -> PathBuf {
    if let Some(dir) = env::var_os("CUDA_EMU_INCLUDE").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = env::var_os("TILEOPS_CUDA_WHEELS").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir).join("nvidia/cu13/include");
    }
    manifest_dir.join("../.cuda-wheels/nvidia/cu13/include")
}

/// The `.cu` files of tileops's kernels directory and its family directories, as tileops's build
/// script lists them, labelled by file name as tileops compiles them.
fn kernel_files(kernels_dir: &Path) -> Vec<KernelFile> {
    let mut files: Vec<KernelFile> = kernel_entries::kernel_files(kernels_dir)
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .filter_map(|relative| {
            let label = relative.rsplit('/').next()?.to_owned();
            if NOT_COMPILED.iter().any(|(f, _)| *f == label) {
                return None;
            }
            Some(KernelFile {
                label,
                path: kernels_dir.join(relative),
            })
        })
        .collect();
    files.sort_by(|a, b| a.label.cmp(&b.label));
    files
}

/// The entries of one file, from its preprocessed text (with `__global__` and
/// `__launch_bounds__` kept as tokens by the shim's scan mode).
fn scan_entries(
    compiler: &Path,
    file: &KernelFile,
    include_dir: &Path,
    kernels_dir: &Path,
    cuda_include: &Path,
) -> Vec<Found> {
    let output = Command::new(compiler)
        .args(["-E", "-P", "-x", "c++", "-std=c++17", "-DCUDA_EMU_SCAN"])
        .arg("-include")
        .arg(include_dir.join("cuda_emu.h"))
        .arg("-I")
        .arg(kernels_dir)
        .arg("-I")
        .arg(cuda_include)
        .arg(&file.path)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", compiler.display()));
    if !output.status.success() {
        panic!(
            "preprocessing {} failed:\n{}",
            file.path.display(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let found = parse_entries(&text);
    if found.is_empty() {
        panic!(
            "{}: no extern \"C\" __global__ entry found",
            file.path.display()
        );
    }
    found
}

/// `extern "C" __global__ void [__launch_bounds__(N[, M])] NAME (` in preprocessed text.
fn parse_entries(text: &str) -> Vec<Found> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("__global__") {
        let before = rest[..at].trim_end();
        rest = &rest[at + "__global__".len()..];
        if !before.ends_with("extern \"C\"") {
            continue;
        }
        let mut tail = rest.trim_start();
        let Some(after_void) = tail.strip_prefix("void") else {
            continue;
        };
        tail = after_void.trim_start();
        let mut max_threads = 0;
        if let Some(bounds) = tail.strip_prefix("__launch_bounds__") {
            let bounds = bounds.trim_start();
            let Some(close) = bounds.find(')') else {
                continue;
            };
            let args = bounds[1..close].trim();
            let first = args.split(',').next().unwrap_or("").trim();
            max_threads = first
                .trim_end_matches(['u', 'U'])
                .parse()
                .unwrap_or_else(|_| panic!("__launch_bounds__({args}): not a number"));
            tail = bounds[close + 1..].trim_start();
        }
        let name: String = tail
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() && tail[name.len()..].trim_start().starts_with('(') {
            found.push(Found { name, max_threads });
        }
    }
    found
}
