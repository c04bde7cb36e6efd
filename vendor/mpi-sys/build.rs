// Compiles the `rsmpi` C shim library.
// Generates the Rust header for the C API.
// Finds out information about the MPI library

use std::{env, path::Path};

fn main() {
    println!("cargo:rerun-if-changed=src/rsmpi.c");
    println!("cargo:rerun-if-changed=src/rsmpi.h");

    // Try to find an MPI library
    let lib = match build_probe_mpi::probe() {
        Ok(lib) => lib,
        Err(errs) => {
            println!("This library checks multiple methods to find an MPI library on your system. This process has failed to find an MPI library for various reasons:\n");
            for (i, err) in errs.iter().enumerate() {
                println!("Reason #{}:\n{}\n", i + 1, err);
            }
            panic!();
        }
    };

    let mut builder = cc::Build::new();
    builder.file("src/rsmpi.c");

    if let Some(mpicc) = lib.mpicc {
        // Use `mpicc` wrapper when it exists rather than the system C compiler.
        builder.compiler(mpicc);
    } else {
        // Specify paths (e.g., from pkg-config) when we don't have mpicc
        for inc in &lib.include_paths {
            builder.include(inc);
        }
    }

    let compiler = builder.try_get_compiler();

    // Build the `rsmpi` C shim library.
    builder.compile("rsmpi");

    // Let `rustc` know about the library search directories.
    for dir in &lib.lib_paths {
        println!("cargo:rustc-link-search=native={}", dir.display());
    }
    for lib in &lib.libs {
        println!("cargo:rustc-link-lib={}", lib);
    }

    let mut builder = bindgen::builder();
    // Let `bindgen` know about header search directories.
    for dir in &lib.include_paths {
        builder = builder.clang_arg(format!("-I{}", dir.display()));
    }

    // Get the same system includes as used to build the "rsmpi" lib. This block only really does
    // anything when targeting msvc.
    if let Ok(compiler) = compiler {
        let include_env = compiler.get_envs().find(|(key, _)| *key == "INCLUDE");
        if let Some((_, include_paths)) = include_env {
            if let Some(include_paths) = include_paths.to_str() {
                // Add include paths via -I
                builder = builder.clang_args(include_paths.split(';').map(|i| format!("-I{}", i)));
            }
        }
    }

    let mpi_opaque_types =
        "MPI_(Comm|Datatype|Errhandler|Group|Info|Message|Op|Request|Session|Win)";

    // SimGrid's SMPI (`MPICC=smpicc`): its headers live in an `smpi` directory. They declare
    // the error codes in an enum (named as MPI names them: no enum prefix) and two prototypes
    // without the `const` the MPI standard gives them (declared in lib.rs instead).
    println!("cargo:rerun-if-env-changed=MPICC");
    println!("cargo:rustc-check-cfg=cfg(smpi)");
    let smpi = lib.include_paths.iter().any(|p| p.ends_with("smpi"));
    if smpi {
        println!("cargo:rustc-cfg=smpi");
        builder = builder
            .prepend_enum_name(false)
            .blocklist_function("MPI_Comm_spawn_multiple")
            .blocklist_function("MPI_Compare_and_swap");
    }

    // Generate Rust bindings for the MPI C API.
    let bindings = builder
        .header("src/rsmpi.h")
        .new_type_alias(mpi_opaque_types)
        .derive_partialeq(true)
        .emit_builtins()
        .generate()
        .unwrap();

    // Write the bindings to disk.
    let out_dir = env::var("OUT_DIR").expect("cargo did not set OUT_DIR");
    let out_file = Path::new(&out_dir).join("functions_and_types.rs");
    bindings.write_to_file(out_file).unwrap();
}
