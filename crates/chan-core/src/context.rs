//! A rank's view of its world: the trait solvers are written against.

use crate::backend::{ChannelHooks, Collective};
use crate::channel::Channel;
use crate::config::ChannelSpec;
use crate::element::{Element, ElementType};
use crate::error::{CommError, CreateError};
use crate::handshake;
use crate::mode::{Carries, Mode};
use crate::neighbor::{NeighborExchange, NeighborSpec};
use crate::pair::{self, PairOffer};
use crate::reduce::{ReduceOp, Reduction};
use crate::transport::Backend;
use std::time::{Duration, Instant};

mod sealed {
    pub trait Sealed {}
    impl<W: crate::backend::ChannelHooks> Sealed for W {}
}

/// One rank of a world of `size()` ranks, over some backend. Solvers are written once against
/// this trait and run over threads, MPI or SHMEM. The blocking collectives (rank, size,
/// barrier, all-reduce) come from its supertrait [`Collective`].
///
/// Creation calls ([`Context::open`], [`Context::reduction`]) are **collective**: every rank
/// calls them, in the same order, and each fails on every rank if it fails anywhere. The one
/// exception is [`Context::open_pair`], which only a channel's two ends call.
///
/// Sealed: every backend world ([`ChannelHooks`]) is a `Context`, and nothing else is.
pub trait Context: Collective + sealed::Sealed {
    /// The backend's channel transports.
    type Backend: Backend;
    /// The non-blocking reduction this backend provides.
    type Reduction: Reduction;

    /// Collectively create this rank's channels of mode `M`, one per spec; the peer must
    /// create the matching end (same tag) in the same collective call. Two ends that disagree
    /// on length, R or mode both get [`CreateError::Mismatch`] naming both values; every other
    /// rank gets [`CreateError::FailedElsewhere`] (docs/architecture.md, "The handshake").
    fn open<M: Mode>(
        &mut self,
        specs: &[ChannelSpec],
    ) -> Result<Vec<Channel<Self::Backend, M>>, CreateError> {
        self.open_typed::<M, f64>(specs)
    }

    /// As [`Context::open`], for channels of elements `T`: each spec's length counts
    /// elements of `T`. Both ends must name the same element type: two that differ get
    /// [`CreateError::Mismatch`] on [`crate::SpecField::Element`], naming both types. A racy
    /// channel carries only a [`crate::RacyElement`]:
    ///
    /// ```compile_fail
    /// # use chan_core::{Context, ChannelSpec, Racy};
    /// fn racy_pairs<C: Context>(ctx: &mut C, specs: &[ChannelSpec]) {
    ///     let _ = ctx.open_typed::<Racy, [u32; 2]>(specs); // an array is no RacyElement
    /// }
    /// ```
    /// ```compile_fail
    /// # use chan_core::{Context, ChannelSpec, Racy};
    /// fn racy_u16<C: Context>(ctx: &mut C, specs: &[ChannelSpec]) {
    ///     let _ = ctx.open_typed::<Racy, u16>(specs); // no 2-byte racy view
    /// }
    /// ```
    fn open_typed<M: Mode + Carries<T>, T: Element>(
        &mut self,
        specs: &[ChannelSpec],
    ) -> Result<Vec<Channel<Self::Backend, M, T>>, CreateError>;

    /// Create one channel end of mode `M` with the peer of `spec` alone, as the paper's
    /// `create_channel` does: only the two ranks named call it, and no other rank takes part
    /// (they may compute, make collective calls among themselves or open their own pairwise
    /// channels). It blocks until the peer makes the matching call (same tag, naming this
    /// rank) and returns an end used exactly like one from [`Context::open`].
    ///
    /// Two ends that disagree on length, R or mode both get
    /// [`CreateError::Mismatch`]; a peer
    /// that does not come within `timeout` gives [`CreateError::PairTimeout`], leaves nothing
    /// behind, and a peer that comes after this end gave up times out in turn. A (peer, tag)
    /// has one pairwise channel at a time; pairwise tags never meet the tags of collective
    /// sets. Several pairwise opens between the same two ranks must be made in the same order
    /// at both ends (docs/architecture.md, "Pairwise creation").
    fn open_pair<M: Mode>(
        &mut self,
        spec: ChannelSpec,
        timeout: Duration,
    ) -> Result<Channel<Self::Backend, M>, CreateError> {
        self.open_pair_typed::<M, f64>(spec, timeout)
    }

    /// As [`Context::open_pair`], for a channel of elements `T`: `spec`'s length counts
    /// elements of `T`, and both ends must name the same element type, as with
    /// [`Context::open_typed`].
    fn open_pair_typed<M: Mode + Carries<T>, T: Element>(
        &mut self,
        spec: ChannelSpec,
        timeout: Duration,
    ) -> Result<Channel<Self::Backend, M, T>, CreateError>;

    /// Collectively create a non-blocking reduction of `len` values with `op`.
    fn reduction(&mut self, len: usize, op: ReduceOp) -> Result<Self::Reduction, CreateError>;

    /// Collectively create a non-blocking barrier: a [`crate::Reduction`] of no values
    /// (`start(&[])`, then `test` until it returns), complete once every rank has started
    /// the round. Every rank must complete each round it starts before the barrier is
    /// dropped.
    fn ibarrier(&mut self) -> Result<Self::Reduction, CreateError>;

    /// Collectively create a halo exchange with the neighbours `peers` as one collective
    /// ([`NeighborExchange`]; MPI's `MPI_Ineighbor_alltoallv`). Every rank calls it, each
    /// with its own neighbours; a backend without neighbourhood collectives refuses on every
    /// rank.
    fn neighbor_exchange(
        &mut self,
        peers: &[NeighborSpec],
    ) -> Result<Box<dyn NeighborExchange>, CreateError>;

    /// Collective: every rank's bytes at rank 0 (`Some`, in rank order), `None` elsewhere.
    fn gather_bytes(&mut self, mine: &[u8]) -> Result<Option<Vec<Vec<u8>>>, CommError>;
}

impl<W: ChannelHooks> Context for W {
    type Backend = W::Backend;
    type Reduction = W::Reduction;

    fn open_typed<M: Mode + Carries<T>, T: Element>(
        &mut self,
        specs: &[ChannelSpec],
    ) -> Result<Vec<Channel<W::Backend, M, T>>, CreateError> {
        let element = ElementType::of::<T>();
        let agreed = handshake::agree::<W, M::Delivery>(self, M::KIND, element, specs)?;
        let transports = M::wire(self, agreed)?;
        Ok(transports
            .into_iter()
            .zip(specs)
            .map(|(t, s)| Channel::from_transport(t, s))
            .collect())
    }

    fn open_pair_typed<M: Mode + Carries<T>, T: Element>(
        &mut self,
        spec: ChannelSpec,
        timeout: Duration,
    ) -> Result<Channel<W::Backend, M, T>, CreateError> {
        let (rank, size) = (self.rank(), self.size());
        if spec.peer >= size || spec.peer == rank {
            return Err(CreateError::BadPeer {
                rank,
                peer: spec.peer,
                size,
            });
        }
        // A timeout too long to add is no deadline in practice: a year.
        let start = Instant::now();
        let deadline = start
            .checked_add(timeout)
            .unwrap_or_else(|| start + Duration::from_secs(365 * 24 * 3600));
        // What the backend wires: the length in words.
        let element = ElementType::of::<T>();
        let (declared, wired) = match element.wired(&spec) {
            Ok(w) => (self.pair_declare::<M::Delivery>(&w), w),
            Err(e) => (Err(e.into()), spec),
        };
        let offer = match declared {
            Ok(word) => PairOffer::new(M::KIND, element, &spec, word),
            Err(_) => PairOffer::refusal(),
        };
        let met = self.pair_meet(&wired, offer, deadline);
        let word = declared?;
        let outcome = met.and_then(|theirs| {
            let theirs = theirs.ok_or(CreateError::PairTimeout {
                rank,
                peer: spec.peer,
                tag: spec.tag,
                timeout,
            })?;
            pair::settle::<M::Delivery>(rank, (spec, wired), M::KIND, element, word, theirs)
        });
        match outcome {
            Ok(agreed) => Ok(Channel::from_transport(M::wire_pair(self, agreed)?, &spec)),
            Err(e) => {
                self.pair_forget(&wired, word);
                Err(e)
            }
        }
    }

    fn reduction(&mut self, len: usize, op: ReduceOp) -> Result<W::Reduction, CreateError> {
        self.make_reduction(len, op)
    }

    fn ibarrier(&mut self) -> Result<W::Reduction, CreateError> {
        self.make_barrier()
    }

    fn neighbor_exchange(
        &mut self,
        peers: &[NeighborSpec],
    ) -> Result<Box<dyn NeighborExchange>, CreateError> {
        self.make_neighbor_exchange(peers)
    }

    fn gather_bytes(&mut self, mine: &[u8]) -> Result<Option<Vec<Vec<u8>>>, CommError> {
        // [byte count, bytes packed 8 per word, little-endian]
        let mut words = Vec::with_capacity(1 + mine.len().div_ceil(8));
        words.push(mine.len() as u64);
        words.extend(mine.chunks(8).map(|c| {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(w)
        }));
        let Some(lists) = self.gather_v(&words, 0)? else {
            return Ok(None);
        };
        (0..lists.len())
            .map(|r| {
                let list = lists.list(r);
                let n = list.first().copied().unwrap_or(0) as usize;
                if list.len() != 1 + n.div_ceil(8) {
                    return Err(CommError::Backend {
                        backend: <W::Backend as Backend>::NAME,
                        call: "gather_bytes",
                        message: format!("rank {r} sent {} words for {n} bytes", list.len()),
                    });
                }
                let mut bytes: Vec<u8> = list[1..].iter().flat_map(|w| w.to_le_bytes()).collect();
                bytes.truncate(n);
                Ok(bytes)
            })
            .collect::<Result<_, _>>()
            .map(Some)
    }
}
