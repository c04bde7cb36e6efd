//! aiac under SimGrid's SMPI: the `aiac` command-line tool as a shared object whose `main`
//! `smpirun` calls once per simulated rank, all of them in one process, on a simulated
//! platform (docs/scale.md). Built by `scripts/smpi-build`, against SMPI's `mpi.h` and
//! `libsimgrid` (the workspace's patched mpi-sys, `vendor/mpi-sys`), without OpenSHMEM.
//!
//! SMPI gives each simulated rank its own copy of this library's data (its statics), so
//! each rank knows which it is, and its clock is the simulation's.
//!
//! `AIAC_SMPI_COMPUTE` says what computation the simulation counts: `measured` (unset: SMPI
//! times everything a rank runs between two MPI calls) or `modelled` (only the solvers'
//! computations, each injected with the time a cost model gives it, `smpi_execute`; run with
//! `--cfg=smpi/simulate-computation:no`, as `scripts/scale --compute modelled` does). The
//! model's coefficients come in `AIAC_SMPI_MODEL`, `sweep=S,pass=P,byte=B`: seconds per point
//! of a sweep, per point of another pass over a block, per byte packed or unpacked
//! ([`jacobi::Work`]), measured on a real machine by `scripts/scale --calibrate`. A
//! computation the model has no units for is injected with its time on this machine's clock.
//! docs/scale.md says why both modes exist.

use jacobi::{CostModel, Work};
use std::ffi::{c_char, c_int, CStr, OsString};
use std::os::unix::ffi::OsStringExt;
use std::sync::OnceLock;
use std::time::Duration;

extern "C" {
    /// SimGrid: the name of the running actor; SMPI names a rank's actor by its rank.
    fn sg_actor_self_get_name() -> *const c_char;
    /// SMPI: compute for `duration` seconds of this machine (scaled by `smpi/host-speed` to the
    /// platform's cores) on the running rank's simulated core.
    fn smpi_execute(duration: f64);
    /// mpi-sys (vendor/mpi-sys, SMPI only): reads this rank's `MPI_COMM_WORLD` and
    /// `MPI_COMM_SELF` into the handles the `mpi` crate uses.
    fn RSMPI_smpi_set_handles();
}

/// The model every rank injects with (each rank's copy of this static is set by its own
/// `main`, from the same variable).
static MODEL: OnceLock<CostModel> = OnceLock::new();

/// The compute hook of `AIAC_SMPI_COMPUTE=modelled`: one computation, injected as the model's
/// time for it.
fn inject(took: Duration, work: Work) {
    let Some(model) = MODEL.get() else { return };
    let cost = model.cost(took, work);
    if cost > 0.0 {
        // SAFETY: called by the solvers on the running rank, inside its actor (SMPI's main
        // called us), between MPI calls, with a finite positive duration.
        unsafe { smpi_execute(cost) }
    }
}

/// This simulated rank, from its actor's name (SMPI names the actor of rank r "r").
fn simulated_rank() -> Option<usize> {
    // SAFETY: SimGrid returns the running actor's name, a NUL-terminated string it owns for
    // the actor's life (this call runs inside the actor), or null outside any actor.
    let name = unsafe { sg_actor_self_get_name() };
    if name.is_null() {
        return None;
    }
    // SAFETY: non-null, NUL-terminated, alive while this actor runs (above).
    unsafe { CStr::from_ptr(name) }.to_str().ok()?.parse().ok()
}

/// The program's `main`, as `smpirun` calls it for each simulated rank.
///
/// # Safety
/// `argv` holds `argc` valid NUL-terminated strings (what the C runtime, or SMPI in its
/// place, gives `main`).
#[no_mangle]
pub unsafe extern "C" fn main(argc: c_int, argv: *const *const c_char) -> c_int {
    let args: Vec<OsString> = (0..usize::try_from(argc).unwrap_or(0))
        .map(|i| {
            // SAFETY: the caller's contract: argv[0..argc] are valid C strings.
            let arg = unsafe { CStr::from_ptr(*argv.add(i)) };
            OsString::from_vec(arg.to_bytes().to_vec())
        })
        .collect();
    let Some(rank) = simulated_rank() else {
        eprintln!("aiac: this is aiac's SMPI build: run it with SimGrid's smpirun (scripts/scale)");
        return 1;
    };
    // SAFETY: inside this rank's actor (simulated_rank found it), before any MPI call; it
    // writes this rank's copy of mpi-sys's two handles (SMPI privatizes them per rank).
    unsafe { RSMPI_smpi_set_handles() };
    match std::env::var("AIAC_SMPI_COMPUTE").as_deref() {
        Err(_) | Ok("" | "measured") => {}
        Ok("modelled") => {
            let model = std::env::var("AIAC_SMPI_MODEL")
                .map_err(|_| "AIAC_SMPI_MODEL is not set".to_string())
                .and_then(|m| {
                    CostModel::parse(&m).map_err(|e| format!("AIAC_SMPI_MODEL={m:?}: {e}"))
                });
            match model {
                Ok(m) => {
                    let _ = MODEL.set(m);
                    jacobi::set_compute_hook(inject);
                }
                Err(e) => {
                    if rank == 0 {
                        eprintln!("aiac: error: AIAC_SMPI_COMPUTE=modelled: {e}");
                    }
                    return 1;
                }
            }
        }
        Ok(other) => {
            if rank == 0 {
                eprintln!(
                    "aiac: error: AIAC_SMPI_COMPUTE={other:?}: allowed values are measured, modelled"
                );
            }
            return 1;
        }
    }
    cli::main_simulated(args, rank)
}
