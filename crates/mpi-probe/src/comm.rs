//! The probe's communicator: a duplicate of the world's, of two ranks, whose failures come back
//! as return codes (every one checked), with the few blocking calls the probe makes on it.
//! Its non-blocking sends and receives are posted through a [`Scope`](crate::request::Scope).

use crate::error::{check, count, Error};
use chan_core::traits::*;
use chan_mpi::{MpiComm, MpiCtx};
use mpi::ffi;
use std::os::raw::{c_int, c_void};

/// Tag of the clock exchange's messages (the kernels use 0 and 1, see
/// [`Comm::idle_call`]).
const CLOCK_TAG: c_int = 2;

/// Tag nobody sends: [`Comm::idle_call`] probes for it.
const IDLE_TAG: c_int = 1;

/// A communicator of the job's two ranks (chan-mpi's [`MpiComm`]: a duplicate of aiac's
/// communicator, errors returned, valid while it lives and freed when dropped).
///
/// Every call on it is one of the two ranks' matching calls: a collective ([`Comm::barrier`])
/// waits for the other rank.
#[derive(Debug)]
pub struct Comm {
    comm: MpiComm,
    rank: usize,
}

impl Comm {
    /// The two ranks' communicator. Collective over the job: both ranks call it. Fails when the
    /// job does not have exactly two ranks ([`Error::Ranks`], on every rank).
    pub fn pair(ctx: &MpiCtx) -> Result<Self, Error> {
        if ctx.size() != 2 {
            return Err(Error::Ranks(ctx.size()));
        }
        Ok(Comm {
            comm: ctx.communicator()?,
            rank: ctx.rank(),
        })
    }

    /// This rank: 0 (the kernel's sender) or 1.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The other rank.
    pub(crate) fn peer(&self) -> c_int {
        1 - self.rank as c_int
    }

    /// The raw handle, for the requests a scope posts on it: valid while `self` lives.
    pub(crate) fn raw(&self) -> ffi::MPI_Comm {
        self.comm.as_raw()
    }

    /// `MPI_Barrier`.
    pub fn barrier(&self) -> Result<(), Error> {
        let comm = self.raw();
        // SAFETY: `comm` is valid while `self` lives (MpiComm::as_raw); both ranks call this.
        check(unsafe { ffi::MPI_Barrier(comm) }, "MPI_Barrier")
    }

    /// Send one time stamp to the other rank (the clock exchange).
    pub(crate) fn send_time(&self, t: f64) -> Result<(), Error> {
        let comm = self.raw();
        // SAFETY: one double at &t (`MPI_DOUBLE`, a handle constant), which MPI_Send reads
        // before it returns; `comm` is valid (as in `barrier`); the peer is the other rank.
        let rc = unsafe {
            ffi::MPI_Send(
                (&t as *const f64).cast(),
                1,
                ffi::RSMPI_DOUBLE,
                self.peer(),
                CLOCK_TAG,
                comm,
            )
        };
        check(rc, "MPI_Send")
    }

    /// Receive one time stamp from the other rank.
    pub(crate) fn recv_time(&self) -> Result<f64, Error> {
        let mut t = 0.0f64;
        let comm = self.raw();
        // SAFETY: room for one double at &mut t (`MPI_DOUBLE`, a handle constant), which
        // MPI_Recv writes before it returns; `comm` is valid (as in `barrier`); the peer is the
        // other rank; the status is ignored (`MPI_STATUS_IGNORE`, a constant).
        let rc = unsafe {
            ffi::MPI_Recv(
                (&mut t as *mut f64).cast(),
                1,
                ffi::RSMPI_DOUBLE,
                self.peer(),
                CLOCK_TAG,
                comm,
                ffi::RSMPI_STATUS_IGNORE,
            )
        };
        check(rc, "MPI_Recv")?;
        Ok(t)
    }

    /// An MPI call that matches nothing (`MPI_Iprobe` for a tag nobody sends): MPI's progress
    /// only.
    pub(crate) fn idle_call(&self) -> Result<(), Error> {
        let mut flag: c_int = 0;
        let comm = self.raw();
        // SAFETY: `comm` is valid (as in `barrier`); flag is a local int MPI writes; the status
        // is ignored (`MPI_STATUS_IGNORE`, a constant).
        let rc = unsafe {
            ffi::MPI_Iprobe(
                self.peer(),
                IDLE_TAG,
                comm,
                &mut flag,
                ffi::RSMPI_STATUS_IGNORE,
            )
        };
        check(rc, "MPI_Iprobe")
    }

    /// Rank 0's `v` to both ranks.
    pub(crate) fn bcast(&self, v: &mut u64) -> Result<(), Error> {
        let comm = self.raw();
        // SAFETY: one u64 at v on both ranks (`MPI_UINT64_T`, a handle constant), read at rank
        // 0 and written at rank 1 before MPI_Bcast returns; `comm` is valid (as in `barrier`).
        let rc = unsafe {
            ffi::MPI_Bcast(
                (v as *mut u64).cast::<c_void>(),
                1,
                ffi::RSMPI_UINT64_T,
                0,
                comm,
            )
        };
        check(rc, "MPI_Bcast")
    }

    /// Both ranks' `mine` (the same length on both) into `all` at rank 0, rank by rank; `all`
    /// is left as it was at rank 1.
    pub(crate) fn gather_into(&self, mine: &[f64], all: &mut [f64]) -> Result<(), Error> {
        assert_eq!(all.len(), 2 * mine.len(), "room for both ranks' values");
        let n = count(mine.len(), "values (reps)")?;
        let comm = self.raw();
        // SAFETY: `n` doubles (`MPI_DOUBLE`, a handle constant) read from `mine` on both ranks;
        // `all` holds `n` for each of the communicator's 2 ranks (asserted above), written at
        // rank 0 before MPI_Gather returns; `comm` is valid (as in `barrier`).
        let rc = unsafe {
            ffi::MPI_Gather(
                mine.as_ptr().cast(),
                n,
                ffi::RSMPI_DOUBLE,
                all.as_mut_ptr().cast(),
                n,
                ffi::RSMPI_DOUBLE,
                0,
                comm,
            )
        };
        check(rc, "MPI_Gather")
    }
}

/// `MPI_Get_library_version`, its first line (and MPICH's device).
pub fn library_version() -> String {
    let mut buf = vec![0u8; 8192];
    let mut len: c_int = 0;
    // SAFETY: MPI_Get_library_version may be called at any time, even after finalize; buf
    // has room for MPI_MAX_LIBRARY_VERSION_STRING (at most 8192 in Open MPI and MPICH).
    let rc = unsafe { ffi::MPI_Get_library_version(buf.as_mut_ptr().cast(), &mut len) };
    if rc != 0 {
        return "unknown".into();
    }
    buf.truncate(len.clamp(0, 8192) as usize);
    let s = String::from_utf8_lossy(&buf);
    let tidy = |l: &str| {
        l.trim_matches(char::from(0))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut v = tidy(s.lines().next().unwrap_or("unknown"));
    // MPICH names its device (ch4:ucx, ch3:nemesis) on a line of its own.
    if let Some(d) = s.lines().find(|l| l.starts_with("MPICH Device:")) {
        v = format!("{v}, {}", tidy(d));
    }
    v
}
