//! Channel modes as sealed marker types.

use crate::backend::{Agreed, ChannelHooks, PairAgreed};
use crate::element::{Element, RacyElement};
use crate::error::CreateError;
use crate::transport::Backend;
use serde::{Deserialize, Serialize};

mod sealed {
    pub trait Sealed {}
}

/// A channel mode: [`Sync`], [`Async`] or [`Racy`]. Sealed: no other modes exist. Every mode
/// carries `f64` ([`Carries`]).
pub trait Mode: sealed::Sealed + Carries<f64> + Send + 'static {
    /// The value form of the mode, for handshakes, errors and reports.
    const KIND: ModeKind;
    /// How the mode's messages are delivered: into slots ([`Slots`]: Sync and Async) or into
    /// one buffer read through atomics ([`Shared`]: Racy).
    type Delivery: Delivery;
    /// The backend's transport that carries a channel of this mode.
    type Transport<B: Backend>: crate::transport::Transport;

    /// Wire the ends chan-core's handshake agreed on (dispatch for [`crate::Context::open`]).
    /// Only the handshake makes an [`Agreed`], so only it can call this.
    #[doc(hidden)]
    fn wire<W: ChannelHooks + ?Sized>(
        w: &mut W,
        agreed: Agreed<Self::Delivery>,
    ) -> Result<Vec<Self::Transport<W::Backend>>, CreateError>;

    /// Wire the one end of a pairwise creation (dispatch for [`crate::Context::open_pair`]).
    #[doc(hidden)]
    fn wire_pair<W: ChannelHooks + ?Sized>(
        w: &mut W,
        agreed: PairAgreed<Self::Delivery>,
    ) -> Result<Self::Transport<W::Backend>, CreateError>;
}

/// Every send matched by exactly one receive, pairwise, in order (the paper's synchronous
/// halo swap: `MPI_Issend` + `MPI_Irecv` + `MPI_Waitall`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Sync;

/// Up to R messages in flight with end-to-end flow control; a receive yields the newest whole
/// message and discards older ones.
#[derive(Debug, Clone, Copy, Default)]
pub struct Async;

/// One receive buffer per direction that the transport may write at any moment; it is read
/// through atomics ([`crate::AtomicF64Slice`]) and elements from different sends may mix.
#[derive(Debug, Clone, Copy, Default)]
pub struct Racy;

impl sealed::Sealed for Sync {}
impl sealed::Sealed for Async {}
impl sealed::Sealed for Racy {}

/// The element types a mode's channels carry: Sync and Async any [`Element`], Racy a
/// [`RacyElement`] (a scalar whose racy receive is an atomic view). Sealed.
pub trait Carries<T>: sealed::Sealed {}
impl<T: Element> Carries<T> for Sync {}
impl<T: Element> Carries<T> for Async {}
impl<T: RacyElement> Carries<T> for Racy {}

/// Each mode's delivery, its transport among the backend's two, and the hooks that wire it
/// (collectively and pairwise): Sync and Async deliver into R + 1 flagged slots, Racy into
/// one shared buffer.
macro_rules! mode {
    ($mode:ident, $delivery:ident, $transport:ident, $wire:ident, $wire_pair:ident) => {
        impl Mode for $mode {
            const KIND: ModeKind = ModeKind::$mode;
            type Delivery = $delivery;
            type Transport<B: Backend> = B::$transport;
            fn wire<W: ChannelHooks + ?Sized>(
                w: &mut W,
                agreed: Agreed<$delivery>,
            ) -> Result<Vec<<W::Backend as Backend>::$transport>, CreateError> {
                w.$wire(agreed)
            }
            fn wire_pair<W: ChannelHooks + ?Sized>(
                w: &mut W,
                agreed: PairAgreed<$delivery>,
            ) -> Result<<W::Backend as Backend>::$transport, CreateError> {
                w.$wire_pair(agreed)
            }
        }
    };
}
mode!(Sync, Slots, Mailbox, wire_slots, pair_wire_slots);
mode!(Async, Slots, Mailbox, wire_slots, pair_wire_slots);
mode!(Racy, Shared, Racy, wire_shared, pair_wire_shared);

/// How a channel end receives; a type, so that a backend's one generic end is parameterised
/// by it and a mailbox cannot be wired from a racy agreement. Sealed.
pub trait Delivery: sealed::Sealed + Send + 'static {
    /// True for [`Shared`].
    const SHARED: bool;
}

/// R + 1 receive slots per end, each lent whole to the channel until it is given back: the
/// delivery of [`Sync`] and [`Async`] channels ([`crate::transport::MailboxTransport`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Slots;

/// One receive buffer per end that the transport writes whenever a send lands and the
/// channel reads through atomics: the delivery of [`Racy`] channels
/// ([`crate::transport::RacyTransport`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Shared;

impl sealed::Sealed for Slots {}
impl sealed::Sealed for Shared {}
impl Delivery for Slots {
    const SHARED: bool = false;
}
impl Delivery for Shared {
    const SHARED: bool = true;
}

/// The mode of a channel as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModeKind {
    /// See [`Sync`].
    Sync,
    /// See [`Async`].
    Async,
    /// See [`Racy`].
    Racy,
}

impl ModeKind {
    /// Lower-case name: `sync`, `async` or `racy`.
    pub fn name(self) -> &'static str {
        match self {
            ModeKind::Sync => "sync",
            ModeKind::Async => "async",
            ModeKind::Racy => "racy",
        }
    }

    /// A small integer code, for wire handshakes.
    pub fn code(self) -> u64 {
        match self {
            ModeKind::Sync => 1,
            ModeKind::Async => 2,
            ModeKind::Racy => 3,
        }
    }

    /// Inverse of [`ModeKind::code`].
    pub fn from_code(code: u64) -> Option<Self> {
        match code {
            1 => Some(ModeKind::Sync),
            2 => Some(ModeKind::Async),
            3 => Some(ModeKind::Racy),
            _ => None,
        }
    }
}

impl std::fmt::Display for ModeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
