//! Non-blocking sends and receives whose buffers the borrow checker holds for as long as MPI
//! may use them.
//!
//! From `MPI_Isend` or `MPI_Irecv` until the request completes, MPI holds a pointer into the
//! buffer: a send buffer must not be written, a receive buffer neither read nor written, and
//! neither freed (MPI 3.1 §3.7.2; completion by test or wait, §3.7.3, §3.7.5). Here a request
//! is posted inside a [`Scope`] that [`Requests::scope`] lends to a closure, as
//! `std::thread::scope` lends its scope: the buffer is borrowed for `'env`, a lifetime that
//! outlives the whole call of `scope` (`&'env [u8]` for a send, `&'env mut [u8]` for a
//! receive), so the borrow checker refuses any other use of it, and its drop, until `scope`
//! returned. And `scope` returns only when every request posted in it completed:
//!
//! * the closure completes them ([`Request::test`], [`Request::wait`], [`Scope::wait_all`]);
//! * those it left active (it returned early with an error, it panicked, it forgot a
//!   [`Request`]) `scope` completes when the closure is done: a receive is cancelled
//!   (`MPI_Cancel`, §3.8.4) and waited for, a send is waited for (the peer's receive completes
//!   it; a job whose rank stopped on an error should abort, as `aiac probe` does).
//!
//! The handles live in the scope's storage, not in the [`Request`] token, so a forgotten token
//! (`std::mem::forget`) loses nothing: rsmpi's `LocalScope` only counts its requests, and must
//! abort the process when one is left, its handle gone with the token; this scope still holds
//! it. Should MPI fail to complete what is left (`MPI_Cancel` or `MPI_Waitall` failing), the
//! process aborts: a buffer MPI may still write must not be given back.
//!
//! A buffer posted in a scope cannot be touched until the scope ended:
//!
//! ```compile_fail,E0502
//! # fn f(comm: &mpi_probe::Comm) -> Result<(), mpi_probe::Error> {
//! let mut requests = mpi_probe::request::Requests::new(1);
//! let mut buf = vec![0u8; 64];
//! requests.scope(comm, |s| {
//!     let mut r = s.irecv(&mut buf, 0)?;
//!     let first = buf[0]; // refused: MPI may be writing `buf`
//!     r.wait()
//! })
//! # }
//! ```
//!
//! nor freed:
//!
//! ```compile_fail,E0505
//! # fn f(comm: &mpi_probe::Comm) -> Result<(), mpi_probe::Error> {
//! let mut requests = mpi_probe::request::Requests::new(1);
//! let mut buf = vec![0u8; 64];
//! requests.scope(comm, |s| {
//!     let r = s.irecv(&mut buf, 0)?;
//!     drop(buf); // refused: MPI may be writing it
//!     std::mem::forget(r);
//!     Ok(())
//! })
//! # }
//! ```
//!
//! nor can a buffer of the closure's own be posted (it would die before the scope ends):
//!
//! ```compile_fail,E0597
//! # fn f(comm: &mpi_probe::Comm) -> Result<(), mpi_probe::Error> {
//! let mut requests = mpi_probe::request::Requests::new(1);
//! requests.scope(comm, |s| {
//!     let buf = vec![0u8; 64];
//!     let mut r = s.isend(&buf, 0)?; // refused: `buf` does not live long enough
//!     r.wait()
//! })
//! # }
//! ```
//!
//! nor does a request outlive its scope:
//!
//! ```compile_fail
//! # fn f(comm: &mpi_probe::Comm) {
//! let mut requests = mpi_probe::request::Requests::new(1);
//! let buf = vec![0u8; 64];
//! let r = requests.scope(comm, |s| s.isend(&buf, 0)); // refused: the request escapes
//! # }
//! ```
//!
//! And with the scope ended, the buffer is the caller's again:
//!
//! ```no_run
//! # fn f(comm: &mpi_probe::Comm) -> Result<(), mpi_probe::Error> {
//! let mut requests = mpi_probe::request::Requests::new(1);
//! let mut buf = vec![0u8; 64];
//! requests.scope(comm, |s| {
//!     let mut r = s.irecv(&mut buf, 0)?;
//!     r.wait()
//! })?;
//! let first = buf[0];
//! # Ok(()) }
//! ```

use crate::comm::Comm;
use crate::error::{check, count, Error};
use mpi::ffi;
use std::cell::Cell;
use std::marker::PhantomData;
use std::os::raw::{c_int, c_void};

/// `MPI_REQUEST_NULL`.
fn null() -> ffi::MPI_Request {
    // SAFETY: reading an immutable handle constant that mpi-sys initialises statically.
    unsafe { ffi::RSMPI_REQUEST_NULL }
}

/// Room for the requests a [`Scope`] has in flight, kept from one scope to the next so that a
/// repetition allocates nothing. Between scopes every handle is `MPI_REQUEST_NULL`.
#[derive(Debug)]
pub struct Requests {
    /// The handles, as MPI writes them (`Cell<T>` has `T`'s layout: one array MPI_Waitall
    /// takes).
    handles: Vec<Cell<ffi::MPI_Request>>,
    /// Whether each is a receive (cancelled when left active at the scope's end).
    recv: Vec<Cell<bool>>,
}

impl Requests {
    /// Room for `n` requests in one scope.
    pub fn new(n: usize) -> Self {
        let mut r = Requests {
            handles: Vec::new(),
            recv: Vec::new(),
        };
        r.reserve(n);
        r
    }

    /// Room for at least `n` requests in one scope.
    pub fn reserve(&mut self, n: usize) {
        if self.handles.len() < n {
            self.handles.resize_with(n, || Cell::new(null()));
            self.recv.resize_with(n, || Cell::new(false));
        }
    }

    /// How many requests one scope can post.
    pub fn room(&self) -> usize {
        self.handles.len()
    }

    /// Run `f` with a scope posting on `comm`, and return once every request `f` posted
    /// completed (the module docs: those `f` left active are completed here, a receive by
    /// cancelling it). Buffers posted in the scope are borrowed for `'env`, beyond this call.
    ///
    /// # Panics
    /// When `f` posts more requests than [`Requests::room`] (after completing what it
    /// posted), and with `f`'s panic.
    pub fn scope<'env, R>(
        &mut self,
        comm: &Comm,
        f: impl for<'s> FnOnce(&'s Scope<'s, 'env>) -> R,
    ) -> R {
        debug_assert!(self.handles.iter().all(|h| h.get() == null()));
        let scope = Scope {
            requests: self,
            used: Cell::new(0),
            comm: comm.raw(),
            peer: comm.peer(),
            _env: PhantomData,
        };
        // `scope` is dropped after `f` returned or while `f`'s panic unwinds: its drop
        // completes what is left, before any borrow of `'env` can end.
        f(&scope)
    }
}

/// The requests of one [`Requests::scope`] call: posts sends and receives to the other rank of
/// a [`Comm`], on buffers borrowed for `'env`.
///
/// `'env` is invariant (as in `std::thread::Scope`): a scope cannot be taken for one whose
/// buffers live shorter.
pub struct Scope<'s, 'env: 's> {
    requests: &'s Requests,
    /// Handles taken so far, from the first.
    used: Cell<usize>,
    comm: ffi::MPI_Comm,
    peer: c_int,
    _env: PhantomData<&'env mut &'env ()>,
}

impl<'s, 'env> Scope<'s, 'env> {
    /// `MPI_Isend` of `buf` to the other rank with `tag` (standard mode). `buf` stays borrowed
    /// (readable, not writable) until the scope ended.
    pub fn isend(&'s self, buf: &'env [u8], tag: i32) -> Result<Request<'s>, Error> {
        self.post(false, buf.as_ptr().cast_mut(), buf.len(), tag)
    }

    /// `MPI_Irecv` into `buf` from the other rank with `tag`. `buf` stays borrowed (neither
    /// readable nor writable) until the scope ended.
    pub fn irecv(&'s self, buf: &'env mut [u8], tag: i32) -> Result<Request<'s>, Error> {
        self.post(true, buf.as_mut_ptr(), buf.len(), tag)
    }

    /// Post a receive (`recv`) or a send of `len` bytes at `ptr` into the next handle: `ptr`
    /// comes from a borrow for `'env` (`isend`, `irecv`), which outlives the scope, whose
    /// drop completes the request.
    fn post(
        &'s self,
        recv: bool,
        ptr: *mut u8,
        len: usize,
        tag: c_int,
    ) -> Result<Request<'s>, Error> {
        let i = self.used.get();
        let room = self.requests.handles.len();
        let handle =
            self.requests.handles.get(i).unwrap_or_else(|| {
                panic!("a scope with room for {room} requests posts request {i}")
            });
        let n = count(len, "bytes")?;
        let (buf, mut req) = (ptr.cast::<c_void>(), null());
        let (peer, comm) = (self.peer, self.comm);
        // SAFETY: (1) `buf` is valid for `len` bytes for `'env`: `isend` and `irecv` take it
        // from a borrow for `'env`, which outlives this scope (`'env` is invariant and a
        // parameter of `Requests::scope`, so it covers the whole call). (2) Nothing else
        // touches it meanwhile: a receive's `&'env mut` is exclusive, a send's `&'env [u8]`
        // allows only reads, which MPI 3.1 permits beside a pending send. (3) The request
        // completes before the scope ends: by the caller, or by `Scope::drop`, which waits
        // for it (aborting the process if it cannot). `comm` is the `Comm` the scope was
        // made from, which outlives it (borrowed by `Requests::scope`); `req` is a local MPI
        // writes the new handle into; `MPI_UINT8_T` is an immutable handle constant.
        let rc = unsafe {
            if recv {
                ffi::MPI_Irecv(buf, n, ffi::RSMPI_UINT8_T, peer, tag, comm, &mut req)
            } else {
                ffi::MPI_Isend(buf, n, ffi::RSMPI_UINT8_T, peer, tag, comm, &mut req)
            }
        };
        check(rc, if recv { "MPI_Irecv" } else { "MPI_Isend" })?;
        handle.set(req);
        self.requests.recv[i].set(recv);
        self.used.set(i + 1);
        Ok(Request { handle })
    }

    /// `MPI_Waitall` on every request posted in this scope so far (completed ones return at
    /// once).
    pub fn wait_all(&self) -> Result<(), Error> {
        let handles = &self.requests.handles[..self.used.get()];
        let n = count(handles.len(), "requests")?;
        // SAFETY: `handles` is `n` contiguous `Cell<MPI_Request>`, laid out as
        // `MPI_Request`s; a `Cell` may be written through a pointer from a shared borrow, and
        // no other borrow of these values exists during the call (`Cell` lends none, and the
        // scope is not `Sync`). Each is an active request of this scope or null, whose buffer
        // the scope keeps borrowed; MPI sets each to null as it completes; statuses ignored
        // (`MPI_STATUSES_IGNORE`, a constant).
        let rc = unsafe {
            ffi::MPI_Waitall(
                n,
                handles.as_ptr().cast::<ffi::MPI_Request>().cast_mut(),
                ffi::RSMPI_STATUSES_IGNORE,
            )
        };
        check(rc, "MPI_Waitall")
    }

    /// Complete what the closure left active: cancel its receives, wait for everything.
    fn complete_rest(&self) -> Result<(), Error> {
        let used = self.used.get();
        for (h, recv) in self.requests.handles[..used]
            .iter()
            .zip(&self.requests.recv[..used])
        {
            let mut req = h.get();
            if recv.get() && req != null() {
                // SAFETY: `req` is an active receive of this scope (not null); MPI_Cancel
                // marks it for cancellation and leaves the handle as it is (the wait below
                // completes and frees it).
                check(unsafe { ffi::MPI_Cancel(&mut req) }, "MPI_Cancel")?;
            }
        }
        self.wait_all()
    }
}

impl Drop for Scope<'_, '_> {
    fn drop(&mut self) {
        if let Err(e) = self.complete_rest() {
            // A buffer MPI may still write cannot be given back to its owner.
            eprintln!("mpi-probe: completing a scope's requests: {e}; aborting");
            std::process::abort();
        }
        self.used.set(0);
    }
}

/// A send or a receive posted in a [`Scope`]: its handle, which the scope holds (a forgotten
/// `Request` is completed by the scope all the same).
#[must_use = "a request left active is completed when its scope ends (a receive cancelled)"]
#[derive(Debug)]
pub struct Request<'s> {
    handle: &'s Cell<ffi::MPI_Request>,
}

impl Request<'_> {
    /// `MPI_Test`: whether the request completed (a completed one answers `true` again, at
    /// once).
    pub fn test(&mut self) -> Result<bool, Error> {
        let (mut req, mut flag) = (self.handle.get(), 0 as c_int);
        // SAFETY: `req` is an active request of this scope or null (MPI_Test then returns at
        // once); its buffer stays borrowed by the scope until it completes; MPI writes the
        // local handle (null once complete), stored back below; the status is ignored
        // (`MPI_STATUS_IGNORE`, a constant).
        let rc = unsafe { ffi::MPI_Test(&mut req, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
        self.handle.set(req);
        check(rc, "MPI_Test")?;
        Ok(flag != 0)
    }

    /// `MPI_Wait` (returns at once on a request already completed).
    pub fn wait(&mut self) -> Result<(), Error> {
        let mut req = self.handle.get();
        // SAFETY: as in `test`.
        let rc = unsafe { ffi::MPI_Wait(&mut req, ffi::RSMPI_STATUS_IGNORE) };
        self.handle.set(req);
        check(rc, "MPI_Wait")
    }

    /// Whether a test or wait saw it complete.
    pub fn is_complete(&self) -> bool {
        self.handle.get() == null()
    }
}
