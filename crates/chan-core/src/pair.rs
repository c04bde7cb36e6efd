//! Pairwise channel creation (docs/architecture.md, "Pairwise creation"): the two ranks named
//! by a channel create it alone, as the paper's `create_channel` does; no other rank takes
//! part.
//!
//! ## Protocol
//! 1. Each end checks its spec (a peer in the world, not itself) and asks its backend for one
//!    word ([`crate::backend::ChannelHooks::pair_declare`]: SHMEM carves the end's inbound
//!    region from its pairwise pool and declares its offset; the others declare 0). A rank
//!    whose declaration failed still meets its peer, with a refusal, so that the peer fails
//!    at once rather than at its timeout.
//! 2. The backend's rendezvous ([`crate::backend::ChannelHooks::pair_meet`]) exchanges one
//!    [`PairOffer`] each way before the deadline, or reports that the peer did not come; a
//!    rendezvous that did not happen leaves nothing behind (no posted request, no entry, no
//!    offer the peer could later take).
//! 3. Both ends see both offers and compare them the same way (mode, element type, length, R:
//!    [`CreateError::Mismatch`] on both ranks, with `here` and `there` swapped); a refusal is
//!    [`CreateError::FailedElsewhere`] naming the peer. No vote is needed: the outcome is a
//!    function of the two offers, which both ends hold.
//! 4. Only then does the backend wire the end ([`crate::backend::ChannelHooks::pair_wire_slots`]
//!    or `pair_wire_shared`), with no collective call.

use crate::config::ChannelSpec;
use crate::element::{ElementType, NAME_WORDS};
use crate::error::CreateError;
use crate::mode::{Delivery, ModeKind};
use std::marker::PhantomData;

/// Words of a [`PairOffer`] on the wire: mode, length, R, the backend's word and the element
/// type ([`ElementType`]: size, id, name).
pub const OFFER_WORDS: usize = 4 + 2 + NAME_WORDS;

/// What one end of a pairwise creation tells the other: its mode, element type, length (in
/// elements), R and the word its backend declared, or a refusal (the end's own declaration
/// failed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PairOffer {
    words: [u64; OFFER_WORDS],
}

impl PairOffer {
    /// The offer of an end that will be wired if the peer agrees.
    pub(crate) fn new(mode: ModeKind, element: ElementType, spec: &ChannelSpec, word: u64) -> Self {
        let mut words = [0; OFFER_WORDS];
        words[..4].copy_from_slice(&[
            mode.code(),
            spec.config.len() as u64,
            spec.config.max_in_flight() as u64,
            word,
        ]);
        words[4..].copy_from_slice(&element.wire());
        PairOffer { words }
    }

    /// The offer of an end that failed before the rendezvous and will not be wired.
    pub(crate) fn refusal() -> Self {
        PairOffer {
            words: [0; OFFER_WORDS],
        }
    }

    /// The offer as words, for a backend to carry to the peer.
    pub fn to_words(self) -> [u64; OFFER_WORDS] {
        self.words
    }

    /// The offer the peer's [`PairOffer::to_words`] made.
    pub fn from_words(words: [u64; OFFER_WORDS]) -> Self {
        PairOffer { words }
    }
}

/// One end both ranks of a pairwise creation agreed on; `D` is the delivery it will be wired
/// for. Made only by chan-core, after the rendezvous.
#[derive(Debug)]
pub struct PairAgreed<D: Delivery> {
    /// The spec this rank gave, its length in 8-byte words: what the backend wires.
    pub spec: ChannelSpec,
    /// The word this rank's backend declared.
    pub word: u64,
    /// The word the peer's backend declared.
    pub peer_word: u64,
    _delivery: PhantomData<D>,
}

/// Step 3: this end's outcome from both offers (the peer's computes the mirror image). `spec`
/// counts elements of `element`; `wired` is the same in words.
pub(crate) fn settle<D: Delivery>(
    rank: usize,
    (spec, wired): (ChannelSpec, ChannelSpec),
    mode: ModeKind,
    element: ElementType,
    word: u64,
    theirs: PairOffer,
) -> Result<PairAgreed<D>, CreateError> {
    let [code, len, r, peer_word] = [0, 1, 2, 3].map(|i| theirs.words[i]);
    if code == 0 {
        return Err(CreateError::FailedElsewhere {
            failed_rank: spec.peer,
        });
    }
    let Some(their_mode) = ModeKind::from_code(code) else {
        return Err(CreateError::Comm(crate::CommError::Backend {
            backend: "chan-core",
            call: "open_pair",
            message: format!("rank {} offered an unknown mode code {code}", spec.peer),
        }));
    };
    if their_mode == mode {
        element.check_match(rank, spec.peer, spec.tag, &theirs.words[4..])?;
    }
    CreateError::check_match(
        rank,
        spec.peer,
        spec.tag,
        (mode, spec.config.len(), spec.config.max_in_flight()),
        (their_mode, len as usize, r as usize),
    )?;
    Ok(PairAgreed {
        spec: wired,
        word,
        peer_word,
        _delivery: PhantomData,
    })
}
