//! Compiles the C baseline of the kernel benchmark (`csrc/sweep.c`, `-O3 -march=native`) and
//! links it into the **benchmarks only** (`cargo:rustc-link-arg-benches`): the library and
//! the `aiac` binary never contain it. Without a working C compiler the benchmark runs without
//! the baseline (cfg `jacobi_c_baseline` unset) and the build says why.

fn main() {
    println!("cargo::rerun-if-changed=csrc/sweep.c");
    println!("cargo::rustc-check-cfg=cfg(jacobi_c_baseline)");
    let objects = cc::Build::new()
        .file("csrc/sweep.c")
        .opt_level(3)
        .flag_if_supported("-march=native")
        .flag_if_supported("-std=c99")
        .cargo_metadata(false)
        .try_compile_intermediates();
    match objects {
        Ok(objs) => {
            for o in objs {
                println!("cargo::rustc-link-arg-benches={}", o.display());
            }
            println!("cargo::rustc-cfg=jacobi_c_baseline");
        }
        Err(e) => {
            println!("cargo::warning=C baseline of the kernel benchmark not built: {e}");
        }
    }
}
