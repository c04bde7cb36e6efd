//! Checked calls into MPI's C interface: every return code is looked at, and a failure becomes
//! a [`CommError`] carrying MPI's own message (`MPI_Error_string`). The communicator aiac uses
//! has `MPI_ERRORS_RETURN`, so an error comes back here instead of aborting the job.
//!
//! Every non-blocking operation aiac starts is counted in [`Requests`], and every completion or
//! cancellation uncounts it: [`crate::MpiCtx::finalize`] refuses to finalize with a request
//! outstanding, which is how the tests show that `close()` and `Drop` leave nothing behind.

use chan_core::{CommError, ReduceOp};
use mpi::ffi;
use std::cell::Cell;
use std::os::raw::{c_int, c_void};

/// `MPI_SUCCESS` (0 in every implementation; the standard fixes it to 0).
const SUCCESS: c_int = 0;

/// The message MPI gives for an error code, with the code: `"MESSAGE (code N)"`.
pub fn error_string(code: c_int) -> String {
    let mut buf = vec![0 as std::os::raw::c_char; 1025];
    let mut len: c_int = 0;
    // SAFETY: buf has room for MPI_MAX_ERROR_STRING (256 in Open MPI, 1024 in MPICH)
    // characters plus the terminator; MPI writes at most that many and stores the length in
    // len.
    let rc = unsafe { ffi::MPI_Error_string(code, buf.as_mut_ptr(), &mut len) };
    if rc != SUCCESS || len <= 0 {
        return format!("MPI error code {code}");
    }
    let bytes: Vec<u8> = buf[..len as usize].iter().map(|&c| c as u8).collect();
    format!(
        "{} (code {code})",
        String::from_utf8_lossy(&bytes).trim_end()
    )
}

/// Turn an MPI return code into a result.
#[inline]
pub(crate) fn check(rc: c_int, call: &'static str) -> Result<(), CommError> {
    if rc == SUCCESS {
        Ok(())
    } else {
        Err(CommError::Backend {
            backend: "mpi",
            call,
            message: error_string(rc),
        })
    }
}

/// A duplicate of `comm` whose failures come back as return codes (`MPI_ERRORS_RETURN`)
/// instead of aborting the job: what chan-mpi's world communicates on.
/// Collective over `comm`.
///
/// # Safety
/// MPI is initialised and not finalised, and `comm` is a valid communicator of this process.
pub(crate) unsafe fn dup_returning_errors(comm: ffi::MPI_Comm) -> Result<ffi::MPI_Comm, CommError> {
    // SAFETY: null handle constant, overwritten by MPI_Comm_dup.
    let mut dup = unsafe { ffi::RSMPI_COMM_NULL };
    // SAFETY: the caller's contract (MPI live, `comm` valid); MPI_Comm_dup writes only `dup`.
    check(unsafe { ffi::MPI_Comm_dup(comm, &mut dup) }, "MPI_Comm_dup")?;
    // SAFETY: `dup` is the valid communicator MPI_Comm_dup just made; ERRORS_RETURN is a
    // predefined handler.
    let rc = unsafe { ffi::MPI_Comm_set_errhandler(dup, ffi::RSMPI_ERRORS_RETURN) };
    check(rc, "MPI_Comm_set_errhandler")?;
    Ok(dup)
}

/// An error of aiac's own about the MPI backend (not an MPI return code).
pub(crate) fn misuse(call: &'static str, message: impl Into<String>) -> CommError {
    CommError::Backend {
        backend: "mpi",
        call,
        message: message.into(),
    }
}

/// `MPI_REQUEST_NULL`.
#[inline]
pub(crate) fn request_null() -> ffi::MPI_Request {
    // SAFETY: reading an immutable handle constant that mpi-sys initialises statically.
    unsafe { ffi::RSMPI_REQUEST_NULL }
}

/// `MPI_UINT8_T`: messages travel as bytes, so headers (u64 bit patterns) and f64 payloads
/// arrive bit for bit, whatever they hold.
#[inline]
pub(crate) fn bytes_type() -> ffi::MPI_Datatype {
    // SAFETY: reading an immutable handle constant that mpi-sys initialises statically.
    unsafe { ffi::RSMPI_UINT8_T }
}

/// `MPI_DOUBLE`, for reductions.
#[inline]
pub(crate) fn double_type() -> ffi::MPI_Datatype {
    // SAFETY: reading an immutable handle constant that mpi-sys initialises statically.
    unsafe { ffi::RSMPI_DOUBLE }
}

/// `MPI_UINT64_T`, for the creation handshake.
#[inline]
pub(crate) fn u64_type() -> ffi::MPI_Datatype {
    // SAFETY: reading an immutable handle constant that mpi-sys initialises statically.
    unsafe { ffi::RSMPI_UINT64_T }
}

/// `MPI_INT`-sized counts travel as `MPI_INT32_T` (c_int is 32 bits on every MPI platform).
#[inline]
pub(crate) fn int_type() -> ffi::MPI_Datatype {
    const _: () = assert!(std::mem::size_of::<c_int>() == 4);
    // SAFETY: reading an immutable handle constant that mpi-sys initialises statically.
    unsafe { ffi::RSMPI_INT32_T }
}

/// The MPI operation for a reduction. MPI's MAX and MIN do not promise to propagate NaN, as
/// chan-core's tree does; the solvers reduce finite values.
pub(crate) fn op(op: ReduceOp) -> ffi::MPI_Op {
    // SAFETY: reading immutable handle constants that mpi-sys initialises statically.
    unsafe {
        match op {
            ReduceOp::Sum => ffi::RSMPI_SUM,
            ReduceOp::Max => ffi::RSMPI_MAX,
            ReduceOp::Min => ffi::RSMPI_MIN,
        }
    }
}

/// An `MPI_Status` to be filled in.
pub(crate) fn empty_status() -> ffi::MPI_Status {
    // SAFETY: MPI_Status is a plain C struct of integers, for which all-zero is a valid value.
    unsafe { std::mem::zeroed() }
}

/// Count of the non-blocking operations aiac has started and not yet completed or cancelled.
#[derive(Debug, Default)]
pub(crate) struct Requests(Cell<i64>);

impl Requests {
    pub(crate) fn started(&self) {
        self.0.set(self.0.get() + 1);
    }
    pub(crate) fn finished(&self, n: usize) {
        self.0.set(self.0.get() - n as i64);
    }
    pub(crate) fn outstanding(&self) -> i64 {
        self.0.get()
    }
}

/// `n` as a count of MPI's `int` type (elements, bytes), if it fits.
pub fn int_count(n: usize) -> Option<c_int> {
    c_int::try_from(n).ok()
}

/// A byte count as MPI's `int`, or an error naming the limit.
pub(crate) fn byte_count(f64s: usize) -> Result<c_int, CommError> {
    f64s.checked_mul(8).and_then(int_count).ok_or_else(|| {
        misuse(
            "channel creation",
            format!("a message of {f64s} f64 exceeds MPI's int byte count (2 GiB)"),
        )
    })
}

/// Test a set of requests; the indices of those that completed are written to `done` (cleared
/// first). Completed requests become `MPI_REQUEST_NULL` (persistent ones inactive). Never allocates when `done` and
/// `scratch` have room for `reqs.len()` entries.
pub(crate) fn test_some(
    reqs: &mut [ffi::MPI_Request],
    done: &mut Vec<usize>,
    scratch: &mut Vec<c_int>,
    counter: &Requests,
) -> Result<(), CommError> {
    complete_some(false, reqs, done, scratch, counter)
}

/// As [`test_some`], but waits until at least one request completes (`MPI_Waitsome`); `done`
/// is left empty when no request was active.
pub(crate) fn wait_some(
    reqs: &mut [ffi::MPI_Request],
    done: &mut Vec<usize>,
    scratch: &mut Vec<c_int>,
    counter: &Requests,
) -> Result<(), CommError> {
    complete_some(true, reqs, done, scratch, counter)
}

/// `MPI_Waitsome` (`block`) or `MPI_Testsome` over `reqs`, the completed indices into `done`.
fn complete_some(
    block: bool,
    reqs: &mut [ffi::MPI_Request],
    done: &mut Vec<usize>,
    scratch: &mut Vec<c_int>,
    counter: &Requests,
) -> Result<(), CommError> {
    done.clear();
    if reqs.is_empty() {
        return Ok(());
    }
    if scratch.len() < reqs.len() {
        scratch.resize(reqs.len(), 0);
    }
    let mut outcount: c_int = 0;
    let (n, out, idx) = (reqs.len() as c_int, &mut outcount, scratch.as_mut_ptr());
    // SAFETY: reqs is a valid array of reqs.len() requests (active or MPI_REQUEST_NULL) that
    // MPI may update in place; scratch has room for reqs.len() indices; statuses are ignored.
    let rc = unsafe {
        if block {
            ffi::MPI_Waitsome(n, reqs.as_mut_ptr(), out, idx, ffi::RSMPI_STATUSES_IGNORE)
        } else {
            ffi::MPI_Testsome(n, reqs.as_mut_ptr(), out, idx, ffi::RSMPI_STATUSES_IGNORE)
        }
    };
    check(
        rc,
        if block {
            "MPI_Waitsome"
        } else {
            "MPI_Testsome"
        },
    )?;
    // MPI_UNDEFINED (negative) when every request was already null.
    if outcount > 0 {
        done.extend(scratch[..outcount as usize].iter().map(|&i| i as usize));
        counter.finished(done.len());
    }
    Ok(())
}

/// Test one request; true (and the request null) when it completed.
pub(crate) fn test_one(req: &mut ffi::MPI_Request, counter: &Requests) -> Result<bool, CommError> {
    if *req == request_null() {
        return Ok(false);
    }
    let mut flag: c_int = 0;
    // SAFETY: req is an active request handle owned by the caller; the status is ignored.
    let rc = unsafe { ffi::MPI_Test(req, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
    check(rc, "MPI_Test")?;
    if flag != 0 {
        counter.finished(1);
    }
    Ok(flag != 0)
}

/// Wait for one active request.
pub(crate) fn wait_one(req: &mut ffi::MPI_Request, counter: &Requests) -> Result<(), CommError> {
    if *req == request_null() {
        return Ok(());
    }
    // SAFETY: req is an active request handle owned by the caller; the status is ignored.
    let rc = unsafe { ffi::MPI_Wait(req, ffi::RSMPI_STATUS_IGNORE) };
    check(rc, "MPI_Wait")?;
    counter.finished(1);
    Ok(())
}

/// Cancel an active receive and complete it (a persistent one is left inactive, not null).
/// Returns true when it was cancelled, false when a message had already matched it (it then
/// completed as a normal receive).
pub(crate) fn cancel_recv(
    req: &mut ffi::MPI_Request,
    counter: &Requests,
) -> Result<bool, CommError> {
    if *req == request_null() {
        return Ok(true);
    }
    let mut status = empty_status();
    // SAFETY: req is an active receive request owned by the caller. MPI_Cancel marks it; the
    // MPI_Wait that follows completes it (a cancelled receive completes promptly): a
    // persistent request is left inactive, any other nulled.
    unsafe {
        check(ffi::MPI_Cancel(req), "MPI_Cancel")?;
        check(ffi::MPI_Wait(req, &mut status), "MPI_Wait")?;
    }
    counter.finished(1);
    let mut flag: c_int = 0;
    // SAFETY: status was filled by the MPI_Wait above.
    let rc = unsafe { ffi::MPI_Test_cancelled(&status, &mut flag) };
    check(rc, "MPI_Test_cancelled")?;
    Ok(flag != 0)
}

/// `MPI_Send` of `count` bytes at `buf` on `route`: returns once the buffer may be reused.
/// Only for messages small enough to leave eagerly, to a peer that has a receive posted for
/// them, so that it returns without waiting for a call of the peer's.
///
/// # Safety
/// `buf` is valid for reads of `count` bytes.
pub(crate) unsafe fn send_now(
    buf: *const c_void,
    count: c_int,
    route: Route,
) -> Result<(), CommError> {
    let Route { comm, peer, tag } = route;
    // SAFETY: the caller keeps buf valid for count bytes; MPI_Send reads it before returning.
    let rc = unsafe { ffi::MPI_Send(buf, count, bytes_type(), peer, tag, comm) };
    check(rc, "MPI_Send")
}

/// Make a persistent receive of `count` bytes into `buf` on `route` (`MPI_Recv_init`): an
/// inactive request that [`start_persistent`] posts again and again, without the allocation
/// and free of a request per message that `MPI_Irecv` and its completion cost. Freed with
/// [`free_request`] once inactive.
///
/// # Safety
/// `buf` is valid for writes of `count` bytes and is neither moved nor freed until the request
/// is freed; while the request is active (started, not completed) it is not read as plain
/// memory (reading it through atomics is allowed).
pub(crate) unsafe fn init_recv(
    buf: *mut c_void,
    count: c_int,
    route: Route,
    req: &mut ffi::MPI_Request,
) -> Result<(), CommError> {
    let Route { comm, peer, tag } = route;
    // SAFETY: the caller keeps buf valid and untouched as MPI requires (this fn's contract);
    // req is a handle MPI writes the new request into.
    let rc = unsafe { ffi::MPI_Recv_init(buf, count, bytes_type(), peer, tag, comm, req) };
    check(rc, "MPI_Recv_init")
}

/// Start an inactive persistent request (`MPI_Start`) and count it in `counter`; a test that
/// finds it complete leaves it inactive again (not null). This hands the request's buffer to
/// MPI until the request completes.
///
/// # Safety
/// `req` is an inactive persistent request made by [`init_recv`], whose contract still holds
/// for its buffer; from this call until a test or wait completes the request, nothing reads
/// or writes that buffer as plain memory.
pub(crate) unsafe fn start_persistent(
    req: &mut ffi::MPI_Request,
    counter: &Requests,
) -> Result<(), CommError> {
    // SAFETY: the caller's contract: an inactive persistent request whose buffer stays valid
    // and untouched while it is active.
    let rc = unsafe { ffi::MPI_Start(req) };
    check(rc, "MPI_Start")?;
    counter.started();
    Ok(())
}

/// Free an inactive persistent request (`MPI_Request_free`); it becomes `MPI_REQUEST_NULL`.
///
/// # Safety
/// `req` is null or a persistent request that is not active (never started, or its last
/// start completed): MPI then holds no claim on its buffer, which the caller may free after.
pub(crate) unsafe fn free_request(req: &mut ffi::MPI_Request) -> Result<(), CommError> {
    if *req == request_null() {
        return Ok(());
    }
    // SAFETY: the caller's contract: an inactive persistent request; nothing of it is
    // pending, so freeing it releases no buffer MPI still writes.
    let rc = unsafe { ffi::MPI_Request_free(req) };
    check(rc, "MPI_Request_free")
}

/// The point-to-point requests aiac starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
    /// `MPI_Irecv` into the buffer.
    Recv,
    /// `MPI_Isend` from the buffer (standard mode).
    Send,
}

/// Where a point-to-point message goes or comes from: a peer, a tag, a communicator.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Route {
    pub(crate) comm: ffi::MPI_Comm,
    pub(crate) peer: c_int,
    pub(crate) tag: c_int,
}

/// Start a point-to-point request of `count` bytes at `buf` on `route`, and count it in
/// `counter`.
///
/// # Safety
/// `buf` is valid for `count` bytes (for writes when receiving, reads when sending) and is
/// neither moved nor freed until the request completes or is cancelled. A receive buffer is
/// not read as plain memory until then (reading it through atomics is allowed: the racy
/// transport does); a send buffer is not written until then.
pub(crate) unsafe fn start(
    kind: Start,
    buf: *mut c_void,
    count: c_int,
    route: Route,
    req: &mut ffi::MPI_Request,
    counter: &Requests,
) -> Result<(), CommError> {
    let (ty, Route { comm, peer, tag }) = (bytes_type(), route);
    // SAFETY: the caller keeps buf valid and untouched as MPI requires until completion (this
    // fn's contract); req is a handle MPI writes the new request into.
    let (rc, call) = unsafe {
        match kind {
            Start::Recv => (
                ffi::MPI_Irecv(buf, count, ty, peer, tag, comm, req),
                "MPI_Irecv",
            ),
            Start::Send => (
                ffi::MPI_Isend(buf.cast_const(), count, ty, peer, tag, comm, req),
                "MPI_Isend",
            ),
        }
    };
    check(rc, call)?;
    counter.started();
    Ok(())
}
