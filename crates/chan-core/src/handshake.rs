//! The one creation handshake of every backend (docs/architecture.md, "The handshake"): the
//! ranks of a collective [`crate::Context::open`] agree on which channel ends exist, and on
//! their parameters, before any backend allocates or wires anything.
//!
//! ## Protocol
//! 1. Each rank checks its own specs ([`ChannelSpec::check_set`]: every peer in the world and
//!    not itself, no (peer, tag) twice) and asks its backend for one word per end
//!    ([`crate::backend::ChannelHooks::declare`]: SHMEM's inbound region offset, nothing for
//!    the others).
//! 2. One all-to-all of variable-length lists ([`crate::backend::Collective::all_to_all_v`]):
//!    rank a tells rank b, for each channel a opens to b in tag order, `[tag, mode, len, R,
//!    word, element size, element id, element name (4 words)]`, the length in elements.
//! 3. Each rank compares each of its ends with what its peer declared: no such tag is
//!    [`CreateError::Unmatched`], a different mode, element type, length or R is
//!    [`CreateError::Mismatch`] naming both values. An end's *ordinal* is its place among the channels between the pair
//!    in tag order, the same at both ends (MPI derives its tags from it).
//! 4. A vote (all-reduce of the lowest failing rank): creation fails everywhere if it failed
//!    anywhere, with the rank's own error where it failed and
//!    [`CreateError::FailedElsewhere`] elsewhere. Nobody waits for a peer that will never
//!    come, and no backend wires a set that failed.
//!
//! What passed is an [`Agreed`] set, typed by its delivery; only this module makes one, so a
//! backend wires exactly the ends both sides agreed on, and a mailbox cannot be wired from a
//! racy agreement.

use crate::backend::{vote, ChannelHooks, Lists};
use crate::config::ChannelSpec;
use crate::element::{ElementType, NAME_WORDS};
use crate::error::{CommError, CreateError};
use crate::mode::{Delivery, ModeKind};
use crate::transport::Backend;
use std::marker::PhantomData;

/// Words one end declares to its peer: tag, mode code, length, R, the backend's word, and the
/// element type ([`ElementType::wire`]).
const DECL: usize = 5 + 2 + NAME_WORDS;

/// One end of an agreed set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgreedEnd {
    /// The spec this rank gave, its length in 8-byte words: what the backend wires.
    pub spec: ChannelSpec,
    /// Place of this channel among the channels between this rank and its peer in this set,
    /// in tag order: the same at both ends.
    pub ordinal: u32,
    /// The word this rank's backend declared for the end.
    pub word: u64,
    /// The word the peer's backend declared for its end.
    pub peer_word: u64,
}

/// The ends of one collective creation that every rank agreed on, in the order of the specs.
/// Made only by the handshake; `D` is the delivery the set will be wired for.
#[derive(Debug)]
pub struct Agreed<D: Delivery> {
    mode: ModeKind,
    ends: Vec<AgreedEnd>,
    _delivery: PhantomData<D>,
}

impl<D: Delivery> Agreed<D> {
    /// The mode both ends of every channel named.
    pub fn mode(&self) -> ModeKind {
        self.mode
    }
    /// The agreed ends, in the order of the specs.
    pub fn ends(&self) -> &[AgreedEnd] {
        &self.ends
    }
}

/// Run the handshake for `specs` (lengths in elements of `element`) in `mode` (collective
/// over every rank of `w`).
pub(crate) fn agree<W: ChannelHooks + ?Sized, D: Delivery>(
    w: &mut W,
    mode: ModeKind,
    element: ElementType,
    specs: &[ChannelSpec],
) -> Result<Agreed<D>, CreateError> {
    let (rank, size) = (w.rank(), w.size());
    let (mut valid, mut local_err) = ChannelSpec::check_set(rank, size, specs);
    // What the backend wires: each length in words. A length whose words do not fit is this
    // rank's error, and the end is left out as an invalid one is.
    let wired: Vec<ChannelSpec> = specs
        .iter()
        .zip(&mut valid)
        .map(|(s, ok)| match element.wired(s) {
            Ok(w) => w,
            Err(e) => {
                *ok = false;
                local_err.get_or_insert(e.into());
                *s
            }
        })
        .collect();
    let words = match w.declare::<D>(&wired) {
        Ok(words) if words.len() == specs.len() => words,
        Ok(words) => {
            local_err.get_or_insert(CreateError::Comm(backend_error::<W>(format!(
                "declared {} words for {} channels",
                words.len(),
                specs.len()
            ))));
            vec![0; specs.len()]
        }
        Err(e) => {
            local_err.get_or_insert(e);
            vec![0; specs.len()]
        }
    };

    // This rank's valid ends, by (peer, tag): the order of the declarations and of ordinals.
    let mut order: Vec<usize> = (0..specs.len()).filter(|&i| valid[i]).collect();
    order.sort_by_key(|&i| (specs[i].peer, specs[i].tag));
    let mut send = Lists::with_capacity(size, order.len() * DECL);
    let mut next = order.iter().peekable();
    for p in 0..size {
        while let Some(&&i) = next.peek().filter(|&&&i| specs[i].peer == p) {
            let s = &specs[i];
            send.extend([
                u64::from(s.tag),
                mode.code(),
                s.config.len() as u64,
                s.config.max_in_flight() as u64,
                words[i],
            ]);
            send.extend(element.wire());
            next.next();
        }
        send.end_list();
    }
    let theirs = w.all_to_all_v(&send)?;

    let limit = w.max_channels_per_pair();
    let mut ordinals = vec![0u32; size];
    let mut ends: Vec<Option<AgreedEnd>> = vec![None; specs.len()];
    for &i in &order {
        let s = specs[i];
        let declared = theirs.list(s.peer).chunks_exact(DECL);
        let outcome = match declared.clone().find(|e| e[0] == u64::from(s.tag)) {
            None => Err(CreateError::Unmatched {
                rank,
                peer: s.peer,
                tag: s.tag,
            }),
            Some(e) => match ModeKind::from_code(e[1]) {
                None => Err(CreateError::Comm(backend_error::<W>(format!(
                    "rank {} declared an unknown mode code {}",
                    s.peer, e[1]
                )))),
                Some(m) => {
                    // The mode first, then the element type (lengths count its elements),
                    // then length and R.
                    let same_type = match m == mode {
                        true => element.check_match(rank, s.peer, s.tag, &e[5..]),
                        false => Ok(()),
                    };
                    same_type
                        .and_then(|()| {
                            CreateError::check_match(
                                rank,
                                s.peer,
                                s.tag,
                                (mode, s.config.len(), s.config.max_in_flight()),
                                (m, e[2] as usize, e[3] as usize),
                            )
                        })
                        .map(|()| e[4])
                }
            },
        };
        let ordinal = ordinals[s.peer];
        ordinals[s.peer] += 1;
        if ordinal as usize >= limit {
            local_err.get_or_insert(CreateError::Comm(backend_error::<W>(format!(
                "more than {limit} channels between ranks {rank} and {} in one set",
                s.peer
            ))));
        }
        match outcome {
            Ok(peer_word) => {
                ends[i] = Some(AgreedEnd {
                    spec: wired[i],
                    ordinal,
                    word: words[i],
                    peer_word,
                })
            }
            Err(e) => {
                local_err.get_or_insert(e);
            }
        }
    }

    vote(w, local_err.map_or(Ok(()), Err))?;
    Ok(Agreed {
        mode,
        ends: ends
            .into_iter()
            .map(|e| e.expect("every end of a set that passed the vote was agreed"))
            .collect(),
        _delivery: PhantomData,
    })
}

fn backend_error<W: ChannelHooks + ?Sized>(message: String) -> CommError {
    CommError::Backend {
        backend: <W::Backend as Backend>::NAME,
        call: "channel creation",
        message,
    }
}
