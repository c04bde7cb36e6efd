//! The heat program under `mpirun`, in a test binary of its own: cargo runs test binaries one
//! after the other, so its three busy-polling ranks do not share the two cores with the
//! in-process tests' threads.

#[cfg(feature = "mpi")]
use std::process::Command;

/// Particles over channels opened pairwise, one rank per MPI process: each pair keeps its
/// particles (the binary checks and exits 1 otherwise).
#[cfg(feature = "mpi")]
#[test]
fn particles_under_mpirun_keep_every_particle() {
    let out = Command::new("timeout")
        .args(["-k", "5", "120", "mpirun", "--oversubscribe", "-np", "4"])
        .arg(env!("CARGO_BIN_EXE_particles"))
        .args(["4", "20", "200"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("4 ranks, every pair kept its 40 particles"),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The same program, one rank per MPI process (`--features mpi`, as `scripts/test` builds it).
#[cfg(feature = "mpi")]
#[test]
fn heat_under_mpirun_reaches_the_steady_state() {
    let out = Command::new("timeout")
        .args(["-k", "5", "120", "mpirun", "--oversubscribe", "-np", "3"])
        .arg(env!("CARGO_BIN_EXE_heat2d"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("3 ranks") && stdout.contains("converged true"),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
