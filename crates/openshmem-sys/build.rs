//! Find the installed OpenSHMEM, compile the C shim, and generate bindings with bindgen.
//!
//! Probes, in order; the first that finds a `shmem.h` wins, and if none does the build fails
//! with every probe's reason:
//!
//! 1. **Environment**: `OSHMEM_DIR` (an installation prefix: `$OSHMEM_DIR/include`,
//!    `$OSHMEM_DIR/lib`), or `OSHMEM_INCLUDE_DIR` and `OSHMEM_LIB_DIR` naming the two
//!    directories. `OSHMEM_LIBS` (comma-separated, default `oshmem`) names the libraries.
//! 2. **Compiler wrapper**: `$OSHCC` or `oshcc` with Open MPI's `--showme:compile` and
//!    `--showme:link` (the include, library directories and libraries it would pass).
//! 3. **pkg-config**: the first of `oshmem`, `sandia-openshmem`, `osss-ucx` it knows.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What a probe found.
#[derive(Debug, Default)]
struct Install {
    via: String,
    include: Vec<PathBuf>,
    lib_dirs: Vec<PathBuf>,
    libs: Vec<String>,
    /// Other linker arguments the wrapper passes (`-Wl,…`, `-pthread`).
    link_args: Vec<String>,
}

const ENV_VARS: [&str; 5] = [
    "OSHMEM_DIR",
    "OSHMEM_INCLUDE_DIR",
    "OSHMEM_LIB_DIR",
    "OSHMEM_LIBS",
    "OSHCC",
];

/// A probe: what it found, or why it found nothing.
type Probe = fn() -> Result<Install, String>;

/// The reason of a probe that was not configured.
const NOT_SET: &str = "not set";

fn main() {
    for v in ENV_VARS {
        println!("cargo:rerun-if-env-changed={v}");
    }
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-changed=csrc/aiac_shmem.h");
    println!("cargo:rerun-if-changed=csrc/aiac_shmem.c");

    let probes: [(&str, Probe); 3] = [
        (
            "environment (OSHMEM_DIR, or OSHMEM_INCLUDE_DIR + OSHMEM_LIB_DIR)",
            probe_env,
        ),
        ("compiler wrapper ($OSHCC or oshcc --showme)", probe_wrapper),
        ("pkg-config", probe_pkg_config),
    ];
    let mut failures = Vec::new();
    let mut found = None;
    for (name, probe) in probes {
        match probe().and_then(has_header) {
            Ok(i) => {
                found = Some(i);
                break;
            }
            Err(why) => failures.push(format!("  - {name}: {why}")),
        }
    }
    let Some(install) = found else {
        panic!(
            "openshmem-sys: no OpenSHMEM installation found. Every probe failed:\n{}\n\
             Install one (Debian: `apt-get install libopenmpi-dev openmpi-bin`, which ships \
             Open MPI's OSHMEM) or point OSHMEM_DIR at its prefix.",
            failures.join("\n")
        );
    };
    // A probe the user configured and that failed is worth a warning; one that was merely not
    // configured (no OSHMEM_DIR) is not.
    for f in failures.iter().filter(|f| !f.ends_with(NOT_SET)) {
        println!(
            "cargo:warning=openshmem-sys: skipped probe: {}",
            f.trim_start()
        );
    }
    let mut install = install;
    add_private_deps(&mut install);

    for d in &install.lib_dirs {
        println!("cargo:rustc-link-search=native={}", d.display());
    }
    for l in &install.libs {
        println!("cargo:rustc-link-lib={l}");
    }
    for a in &install.link_args {
        println!("cargo:rustc-link-arg={a}");
    }
    // For dependents (`DEP_OSHMEM_INCLUDE`), and for the record.
    let inc = env::join_paths(&install.include).expect("include paths join");
    println!("cargo:include={}", inc.to_string_lossy());
    println!("cargo:found_via={}", install.via);

    let mut shim = cc::Build::new();
    shim.file("csrc/aiac_shmem.c").include("csrc");
    for d in &install.include {
        shim.include(d);
    }
    shim.compile("aiac_shmem_shim");

    let mut b = bindgen::Builder::default()
        .header("csrc/aiac_shmem.h")
        .clang_arg("-Icsrc")
        .allowlist_function("shmem_.*")
        .allowlist_var("AIAC_SHMEM_.*")
        .allowlist_type("shmem_ctx_t")
        // Type-generic (C11 _Generic) macros have no symbol; the typed functions are bound.
        .layout_tests(false)
        .generate_comments(false)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    for d in &install.include {
        b = b.clang_arg(format!("-I{}", d.display()));
    }
    let bindings = b
        .generate()
        .unwrap_or_else(|e| panic!("openshmem-sys: bindgen failed on shmem.h: {e}"));
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("write bindings.rs");
}

/// A probe's result is usable only if `shmem.h` is in one of its include directories.
fn has_header(i: Install) -> Result<Install, String> {
    if i.include.iter().any(|d| d.join("shmem.h").is_file()) {
        Ok(i)
    } else {
        Err(format!(
            "found {} but no shmem.h in its include directories {:?}",
            i.via, i.include
        ))
    }
}

/// Complete the link line with the installation's own libraries that the named ones need.
///
/// Open MPI's `liboshmem.so` calls into `libopen-pal`/`libopen-rte` but lists only `libmpi` as
/// needed (it relies on libmpi pulling them in), and the wrapper's link line names only
/// `-loshmem -lmpi`. A linker that checks shared libraries for undefined symbols (rust-lld,
/// the default linker of recent Rust on Linux) then refuses the link. So: for every library
/// named, read its `DT_NEEDED` entries (`readelf -d`), and add each one that lives in the
/// installation's own library directories, transitively. Libraries elsewhere (libc, libm) are
/// the system's business. Without `readelf`, nothing is added (a warning says so).
fn add_private_deps(i: &mut Install) {
    let find = |name: &str| -> Option<PathBuf> {
        i.lib_dirs
            .iter()
            .map(|d| d.join(format!("lib{name}.so")))
            .find(|p| p.exists())
    };
    let mut todo: Vec<String> = i.libs.clone();
    let mut seen: Vec<String> = i.libs.clone();
    while let Some(name) = todo.pop() {
        let Some(path) = find(&name) else { continue };
        let out = match Command::new("readelf").arg("-d").arg(&path).output() {
            Ok(o) if o.status.success() => o,
            _ => {
                println!(
                    "cargo:warning=openshmem-sys: cannot run `readelf -d {}`; linking only {:?}",
                    path.display(),
                    i.libs
                );
                return;
            }
        };
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            if !line.contains("(NEEDED)") {
                continue;
            }
            let Some(soname) = line.split('[').nth(1).and_then(|s| s.split(']').next()) else {
                continue;
            };
            // libopen-pal.so.40 -> open-pal
            let Some(dep) = soname
                .strip_prefix("lib")
                .and_then(|s| s.split(".so").next())
                .map(str::to_string)
            else {
                continue;
            };
            if !seen.contains(&dep) && find(&dep).is_some() {
                seen.push(dep.clone());
                i.libs.push(dep.clone());
                todo.push(dep);
            }
        }
    }
}

fn var(name: &str) -> Option<String> {
    env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn probe_env() -> Result<Install, String> {
    let libs = var("OSHMEM_LIBS")
        .map(|s| {
            s.split(',')
                .map(|l| l.trim().to_string())
                .filter(|l| !l.is_empty())
                .collect()
        })
        .unwrap_or_else(|| vec!["oshmem".to_string()]);
    if let Some(dir) = var("OSHMEM_DIR") {
        let p = Path::new(&dir);
        let mut include = vec![p.join("include")];
        // Open MPI keeps part of its headers one level down.
        if p.join("include/openmpi").is_dir() {
            include.push(p.join("include/openmpi"));
        }
        let lib_dirs = ["lib", "lib64"]
            .iter()
            .map(|l| p.join(l))
            .filter(|d| d.is_dir())
            .collect();
        return Ok(Install {
            via: format!("OSHMEM_DIR={dir}"),
            include,
            lib_dirs,
            libs,
            link_args: Vec::new(),
        });
    }
    match (var("OSHMEM_INCLUDE_DIR"), var("OSHMEM_LIB_DIR")) {
        (Some(inc), Some(lib)) => Ok(Install {
            via: format!("OSHMEM_INCLUDE_DIR={inc}, OSHMEM_LIB_DIR={lib}"),
            include: env::split_paths(&inc).collect(),
            lib_dirs: env::split_paths(&lib).collect(),
            libs,
            link_args: Vec::new(),
        }),
        (Some(_), None) => Err("OSHMEM_INCLUDE_DIR is set but OSHMEM_LIB_DIR is not".into()),
        (None, Some(_)) => Err("OSHMEM_LIB_DIR is set but OSHMEM_INCLUDE_DIR is not".into()),
        (None, None) => Err(NOT_SET.into()),
    }
}

fn showme(wrapper: &str, what: &str) -> Result<String, String> {
    let out = Command::new(wrapper)
        .arg(format!("--showme:{what}"))
        .output()
        .map_err(|e| format!("cannot run `{wrapper}`: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`{wrapper} --showme:{what}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn probe_wrapper() -> Result<Install, String> {
    let wrapper = var("OSHCC").unwrap_or_else(|| "oshcc".to_string());
    let compile = showme(&wrapper, "compile")?;
    let link = showme(&wrapper, "link")?;
    let mut i = Install {
        via: format!("`{wrapper} --showme`"),
        ..Install::default()
    };
    for tok in compile.split_whitespace() {
        if let Some(d) = tok.strip_prefix("-I") {
            i.include.push(PathBuf::from(d));
        }
    }
    for tok in link.split_whitespace() {
        if let Some(d) = tok.strip_prefix("-L") {
            i.lib_dirs.push(PathBuf::from(d));
        } else if let Some(l) = tok.strip_prefix("-l") {
            i.libs.push(l.to_string());
        } else if tok.starts_with("-Wl,") || tok == "-pthread" {
            i.link_args.push(tok.to_string());
        }
    }
    if i.libs.is_empty() {
        return Err(format!(
            "`{wrapper} --showme:link` names no library: `{link}`"
        ));
    }
    Ok(i)
}

fn probe_pkg_config() -> Result<Install, String> {
    let mut reasons = Vec::new();
    for name in ["oshmem", "sandia-openshmem", "osss-ucx"] {
        match pkg_config::Config::new()
            .cargo_metadata(false)
            .env_metadata(false)
            .probe(name)
        {
            Ok(lib) => {
                return Ok(Install {
                    via: format!("pkg-config {name}"),
                    include: lib.include_paths,
                    lib_dirs: lib.link_paths,
                    libs: lib.libs,
                    link_args: Vec::new(),
                })
            }
            Err(e) => reasons.push(format!(
                "{name}: {}",
                e.to_string().lines().next().unwrap_or("")
            )),
        }
    }
    Err(reasons.join("; "))
}
