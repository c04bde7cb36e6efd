//! What a backend implements: everything here is for backend authors, nothing for users of
//! channels (they see [`crate::Context`], [`crate::Channel`] and [`crate::Reduction`]).
//!
//! A backend provides, on one world type (one rank's handle on its world):
//! 1. [`Collective`]: rank, size, barrier, all-reduce, an all-to-all and a gather of `u64`
//!    lists. chan-core builds the channel handshake ([`Agreed`]) and record
//!    gathering ([`crate::Context::gather_bytes`]) on these, once for every backend.
//! 2. [`ChannelHooks`]: the transports of its channels ([`Backend`]: a mailbox for Sync and
//!    Async, a racy transport for Racy; see [`Transport`]), and how to wire the ends
//!    the handshake agreed on. It never checks specs or talks to peers about them: the
//!    handshake did.
//!
//! 3. [`WindowHooks`]: one-sided windows ([`RawWindow`]: put, get, compare-and-swap,
//!    fetch-add, flush), see [`crate::Window`]. chan-core checks every access first and hands
//!    the backend a [`Span`] (the target's words, in range), so each operation is the
//!    library's call alone.
//!
//! Every type implementing [`ChannelHooks`] is a [`crate::Context`] (a blanket impl), which
//! is all a solver needs, and every type implementing [`WindowHooks`] is a
//! [`crate::Windows`]: one world serves channels, reductions and windows alike.

pub use crate::atomic::AtomicF64Buf;
pub use crate::handshake::{Agreed, AgreedEnd};
pub use crate::mode::{Delivery, Shared, Slots};
pub use crate::onesided::{OneSidedEnd, PeerMem, Shape, CLOSE_WORD, CTRL_WORDS};
pub use crate::pair::{PairAgreed, PairOffer, OFFER_WORDS};
pub use crate::transport::{
    Arrival, Backend, CloseReport, EnvVarError, Header, IdleStreak, MailboxTransport, RacyPoll,
    RacyTransport, Transport, WaitPolicy, SPIN_IDLE_YIELD,
};
pub use crate::window::{RawWindow, Span, WindowHooks, WindowMode, WordOp};

use crate::config::ChannelSpec;
use crate::error::{CommError, CreateError};
use crate::neighbor::{NeighborExchange, NeighborSpec};
use crate::reduce::{ReduceOp, Reduction};
use std::time::Instant;

/// Variable-length lists of `u64`, one per rank, stored flat: what [`Collective::all_to_all_v`]
/// and [`Collective::gather_v`] move.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lists {
    words: Vec<u64>,
    /// `ends[i]`: one past the last word of list i.
    ends: Vec<usize>,
}

impl Lists {
    /// Empty, with room for `lists` lists and `words` words.
    pub fn with_capacity(lists: usize, words: usize) -> Self {
        Lists {
            words: Vec::with_capacity(words),
            ends: Vec::with_capacity(lists),
        }
    }

    /// Lists from their concatenation and each one's length.
    pub fn from_flat(words: Vec<u64>, counts: impl IntoIterator<Item = usize>) -> Self {
        let ends: Vec<usize> = counts
            .into_iter()
            .scan(0, |acc, c| {
                *acc += c;
                Some(*acc)
            })
            .collect();
        assert_eq!(
            ends.last().copied().unwrap_or(0),
            words.len(),
            "the counts add up to the words"
        );
        Lists { words, ends }
    }

    /// Append words to the list being built.
    pub fn extend(&mut self, words: impl IntoIterator<Item = u64>) {
        self.words.extend(words);
    }

    /// Close the list being built (it may be empty); the next words start the next list.
    pub fn end_list(&mut self) {
        self.ends.push(self.words.len());
    }

    /// Append a whole list.
    pub fn push(&mut self, list: &[u64]) {
        self.extend(list.iter().copied());
        self.end_list();
    }

    /// Number of lists.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True when there is no list.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// List `i`.
    pub fn list(&self, i: usize) -> &[u64] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.words[start..self.ends[i]]
    }

    /// Each list's length.
    pub fn counts(&self) -> impl ExactSizeIterator<Item = usize> + '_ {
        let mut prev = 0;
        self.ends.iter().map(move |&e| {
            let c = e - prev;
            prev = e;
            c
        })
    }

    /// Every list, concatenated.
    pub fn flat(&self) -> &[u64] {
        &self.words
    }
}

/// The blocking collectives of a world. Every rank calls each of them, in the same order.
pub trait Collective {
    /// This rank, `0..size()`.
    fn rank(&self) -> usize;
    /// Number of ranks.
    fn size(&self) -> usize;
    /// Blocking barrier.
    fn barrier(&mut self) -> Result<(), CommError>;
    /// Blocking all-reduce in place: every rank gets the same result.
    fn all_reduce(&mut self, data: &mut [f64], op: ReduceOp) -> Result<(), CommError>;
    /// All-to-all of variable-length lists: `send` holds `size()` lists, list p for rank p;
    /// the result holds `size()` lists, list p from rank p (`MPI_Alltoallv`).
    fn all_to_all_v(&mut self, send: &Lists) -> Result<Lists, CommError>;
    /// Gather every rank's list at `root`: `Some(lists in rank order)` there, `None`
    /// elsewhere (`MPI_Gatherv`).
    fn gather_v(&mut self, mine: &[u64], root: usize) -> Result<Option<Lists>, CommError>;
}

/// A backend's channels: what chan-core's [`crate::Context::open`] and reductions need from
/// it. Implemented once per backend on its world type.
pub trait ChannelHooks: Collective {
    /// The channel transports.
    type Backend: Backend;
    /// The non-blocking reduction the backend provides.
    type Reduction: Reduction;

    /// One word per spec for the handshake to carry to the peer (an offset into this rank's
    /// memory, say); it comes back as [`AgreedEnd::word`] and, at the peer,
    /// [`AgreedEnd::peer_word`]. Collective: every rank calls it once per creation, before
    /// anything else of it. An error here fails the creation on every rank.
    fn declare<D: Delivery>(&mut self, specs: &[ChannelSpec]) -> Result<Vec<u64>, CreateError> {
        Ok(vec![0; specs.len()])
    }

    /// The most channels two ranks may share in one set (MPI: what its tag space holds).
    fn max_channels_per_pair(&self) -> usize {
        usize::MAX
    }

    /// Allocate and connect the mailbox ends of an agreed set, in its order. Collective.
    fn wire_slots(
        &mut self,
        agreed: Agreed<Slots>,
    ) -> Result<Vec<<Self::Backend as Backend>::Mailbox>, CreateError>;

    /// Allocate and connect the racy ends of an agreed set, in its order. Collective.
    fn wire_shared(
        &mut self,
        agreed: Agreed<Shared>,
    ) -> Result<Vec<<Self::Backend as Backend>::Racy>, CreateError>;

    /// Pairwise creation, step 1 (`crate::Context::open_pair`; only the two ends call it): one
    /// word for the peer (SHMEM: the offset of this end's inbound region, carved from its
    /// pairwise pool). An error fails this end, and the peer gets
    /// [`CreateError::FailedElsewhere`] at the rendezvous.
    fn pair_declare<D: Delivery>(&mut self, spec: &ChannelSpec) -> Result<u64, CreateError> {
        let _ = spec;
        Ok(0)
    }

    /// Pairwise creation failed after [`ChannelHooks::pair_declare`] gave `word` (a mismatch,
    /// a refusal, a timeout): give back what it set aside.
    fn pair_forget(&mut self, spec: &ChannelSpec, word: u64) {
        let _ = (spec, word);
    }

    /// Pairwise creation, step 2: meet the peer of `spec` that makes the matching call (same
    /// tag, naming this rank) and exchange offers: `Some(its offer)` once both ends hold each
    /// other's, `None` when it did not come before `deadline`. Either way both ends must see
    /// the same outcome (both got the offers, or neither goes on), and a `None` leaves
    /// nothing behind that a later call of either end could take for a meeting.
    fn pair_meet(
        &mut self,
        spec: &ChannelSpec,
        mine: PairOffer,
        deadline: Instant,
    ) -> Result<Option<PairOffer>, CreateError> {
        let _ = (spec, mine, deadline);
        Err(pair_unsupported::<Self>())
    }

    /// Pairwise creation, step 4: allocate and connect the mailbox end both ranks agreed on.
    /// Not collective: only the two ends call it.
    fn pair_wire_slots(
        &mut self,
        agreed: PairAgreed<Slots>,
    ) -> Result<<Self::Backend as Backend>::Mailbox, CreateError> {
        let _ = agreed;
        Err(pair_unsupported::<Self>())
    }

    /// Pairwise creation, step 4: allocate and connect the racy end both ranks agreed on.
    fn pair_wire_shared(
        &mut self,
        agreed: PairAgreed<Shared>,
    ) -> Result<<Self::Backend as Backend>::Racy, CreateError> {
        let _ = agreed;
        Err(pair_unsupported::<Self>())
    }

    /// Collectively create a non-blocking reduction of `len` values with `op` (behind
    /// [`crate::Context::reduction`]).
    fn make_reduction(&mut self, len: usize, op: ReduceOp) -> Result<Self::Reduction, CreateError>;

    /// Collectively create a non-blocking barrier (behind [`crate::Context::ibarrier`]): a
    /// reduction of no values, which completes on a rank once every rank has started the
    /// round. By default the backend's reduction of no values (chan-core's tree synchronises
    /// even then); a backend with a native non-blocking barrier returns that
    /// (chan-mpi: `MPI_Ibarrier`).
    fn make_barrier(&mut self) -> Result<Self::Reduction, CreateError> {
        self.make_reduction(0, ReduceOp::Sum)
    }

    /// Collectively create a halo exchange with the neighbours `peers` as one collective
    /// (behind [`crate::Context::neighbor_exchange`]). Only a backend with neighbourhood
    /// collectives has it (MPI-3's `MPI_Ineighbor_alltoallv`); the others refuse, on every
    /// rank, naming the backend.
    fn make_neighbor_exchange(
        &mut self,
        peers: &[NeighborSpec],
    ) -> Result<Box<dyn NeighborExchange>, CreateError> {
        let _ = peers;
        Err(no_neighbor_collectives::<Self>())
    }

    /// The tags of aiac's own channels (the tree reduction's) on this rank: the backend keeps
    /// one [`ReservedTags`] per world; only chan-core draws from it, so every rank gets the same
    /// sequence of tags from the same sequence of collective calls.
    fn reserved_tags(&mut self) -> &mut ReservedTags;
}

/// The refusal of a backend without neighbourhood collectives.
pub fn no_neighbor_collectives<W: ChannelHooks + ?Sized>() -> CreateError {
    CreateError::Comm(CommError::Backend {
        backend: <W::Backend as Backend>::NAME,
        call: "neighbor_exchange",
        message: format!(
            "the {} backend has no neighbourhood collectives (MPI-3's are the only ones \
             aiac has: the neighbourhood exchange needs the MPI backend)",
            <W::Backend as Backend>::NAME
        ),
    })
}

fn pair_unsupported<W: ChannelHooks + ?Sized>() -> CreateError {
    CreateError::Comm(CommError::Backend {
        backend: <W::Backend as Backend>::NAME,
        call: "open_pair",
        message: "this backend does not create pairwise channels".into(),
    })
}

/// The sequence of tags of aiac's own channels on one rank. Only chan-core draws from it.
#[derive(Debug, Default)]
pub struct ReservedTags(u32);

impl ReservedTags {
    /// A sequence that has handed out no tag yet.
    pub fn new() -> Self {
        ReservedTags(0)
    }

    /// The next tag, with [`crate::RESERVED_TAG_BIT`] set.
    pub(crate) fn next(&mut self) -> u32 {
        self.0 += 1;
        self.0 | crate::RESERVED_TAG_BIT
    }
}

/// Collective: agree on the outcome of a step that may fail on some ranks only (allocating a
/// set's memory, posting its receives). `Ok` on every rank when `local` is `Ok` on every rank;
/// otherwise this rank's own error where it failed and [`CreateError::FailedElsewhere`] naming
/// the lowest failing rank elsewhere, so no rank goes on to wait for a peer that gave up.
pub fn vote<W: Collective + ?Sized, T>(
    w: &mut W,
    local: Result<T, CreateError>,
) -> Result<T, CreateError> {
    let (rank, size) = (w.rank(), w.size());
    // The lowest failing rank, or `size` when none failed (exact in f64).
    let mut lowest = [match local {
        Ok(_) => size as f64,
        Err(_) => rank as f64,
    }];
    w.all_reduce(&mut lowest, ReduceOp::Min)?;
    let value = local?;
    if (lowest[0] as usize) < size {
        return Err(CreateError::FailedElsewhere {
            failed_rank: lowest[0] as usize,
        });
    }
    Ok(value)
}
