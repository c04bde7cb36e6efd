//! Pairwise channels over MPI (chan-core's `Context::open_pair`; docs/architecture.md,
//! "Pairwise creation"). They take the two-sided path, on one communicator that
//! `MpiCtx::init` duplicated for all of them (a node's shared window and a set's own
//! communicator are collective): the channel with tag t uses MPI tags 3t (the rendezvous),
//! 3t + 1 (data) and 3t + 2 (control) there, so pairwise tags never meet those of collective
//! sets, and two pairs, or two tags of one pair, never meet each other.
//!
//! ## The rendezvous: the lower rank decides
//! Messages of `[kind, nonce, offer…]`, 96 bytes, sent with a blocking `MPI_Send` (they leave
//! eagerly, as the control messages of `twosided/` do: no send request is left behind).
//! * The higher rank sends `OFFER(n)`, n a number new on that rank, then waits for the lower
//!   rank's `VERDICT(n)` until its deadline. A `VERDICT` of an older number answers an offer
//!   it withdrew: dropped. If `VERDICT(n)` came, it sends `CONFIRM(n)` and has met the peer.
//!   At the deadline it cancels its receive (`MPI_Cancel`; a receive that had matched is taken
//!   as such) and sends `WITHDRAW(n)`. Either way, every `OFFER` is followed by exactly one
//!   `CONFIRM` or `WITHDRAW` before the call returns.
//! * The lower rank waits for an `OFFER` until its deadline (cancelling its receive at the
//!   deadline: a peer that comes later finds nobody, and times out in turn). On `OFFER(n)` it
//!   sends `VERDICT(n)` with its own offer and waits for the higher rank's decision, which
//!   comes promptly: the higher rank is still in its call (and answers at once) or already
//!   withdrew. `CONFIRM(n)`: met. `WITHDRAW(n)`: the offer was stale (left by a call that had
//!   given up), so it waits on for a fresh one.
//!
//! MPI delivers the messages of one source and tag in order, so an `OFFER` and its decision
//! arrive together and an offer left behind by a call that gave up is found, and discarded
//! with its `WITHDRAW`, by the next call on the same tag. Both ends see the same outcome: the
//! higher rank's decision is the one point where it is settled.

use crate::env::MpiCtx;
use crate::raw::{self, Route};
use crate::transport::MpiEnd;
use crate::twosided::{Core, MpiDelivery, RecvKind, Wire, HDR};
use chan_core::backend::{PairAgreed, PairOffer, OFFER_WORDS};
use chan_core::{ChannelSpec, CommError, CreateError};
use std::cell::RefCell;
use std::collections::HashSet;
use std::os::raw::c_int;
use std::rc::Rc;
use std::time::Instant;

/// How long a pairwise open waits for the close of the previous channel with its (peer, tag)
/// to complete before refusing.
const CLOSING_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

const OFFER: u64 = 1;
const VERDICT: u64 = 2;
const CONFIRM: u64 = 3;
const WITHDRAW: u64 = 4;

/// `[kind, nonce, offer…]`.
type Msg = [u64; 2 + OFFER_WORDS];

/// The MPI tags of the pairwise channel with user tag `tag`: rendezvous, data, control; an
/// error when they do not fit under `MPI_TAG_UB`.
pub(crate) fn tags(tag: u32, tag_ub: c_int) -> Result<(c_int, c_int, c_int), CommError> {
    let base = u64::from(tag) * 3;
    if base + 2 > tag_ub as u64 {
        return Err(raw::misuse(
            "open_pair",
            format!(
                "tag {tag} is too large for a pairwise channel: its MPI tags 3·{tag} + 0..2 exceed MPI_TAG_UB = {tag_ub} (use tags up to {})",
                (tag_ub as u64 - 2) / 3
            ),
        ));
    }
    let base = base as c_int;
    Ok((base, base + 1, base + 2))
}

/// The (peer, tag) of this rank's pairwise channels whose core still exists (open, or closing
/// with receives posted on the channel's MPI tags).
pub(crate) type LivePairs = Rc<RefCell<HashSet<(usize, u32)>>>;

/// A live (peer, tag), held by its core: removed from the set when the core goes.
pub(crate) struct PairTag {
    live: LivePairs,
    key: (usize, u32),
}

impl Drop for PairTag {
    fn drop(&mut self) {
        self.live.borrow_mut().remove(&self.key);
    }
}

impl MpiCtx {
    /// chan-core's `pair_declare` over MPI: refuse a (peer, tag) whose previous pairwise
    /// channel's core still exists after [`CLOSING_GRACE`] (its receives would take the new
    /// channel's messages); the peer learns of it at the rendezvous.
    pub(crate) fn check_pair_free(&mut self, spec: &ChannelSpec) -> Result<u64, CreateError> {
        let world = Rc::clone(self.world());
        tags(spec.tag, world.tag_ub())?;
        // A dropped end's core goes as soon as its close completes, which the peer's close
        // announcement ends: step the closes for a while before refusing.
        let start = Instant::now();
        let mut spins = 0u32;
        let live = world.pair_live();
        while live.borrow().contains(&(spec.peer, spec.tag)) && start.elapsed() < CLOSING_GRACE {
            world.progress_closing();
            world.relax(spins);
            spins = spins.saturating_add(1);
        }
        if live.borrow().contains(&(spec.peer, spec.tag)) {
            return Err(CreateError::Comm(raw::misuse(
                "open_pair",
                format!(
                    "rank {} already has a pairwise channel to rank {} with tag {} open or closing; close it (close() at both ends) before opening the tag again",
                    world.rank, spec.peer, spec.tag
                ),
            )));
        }
        Ok(0)
    }

    /// One message of the rendezvous to `peer`.
    fn pair_send(
        &self,
        route: Route,
        kind: u64,
        nonce: u64,
        offer: PairOffer,
    ) -> Result<(), CommError> {
        let mut msg: Msg = [0; 2 + OFFER_WORDS];
        msg[0] = kind;
        msg[1] = nonce;
        msg[2..].copy_from_slice(&offer.to_words());
        // SAFETY: msg is a local array of 96 bytes, read by MPI_Send before it returns; 96
        // bytes leave eagerly, so the call does not wait for the peer's receive.
        unsafe {
            raw::send_now(
                msg.as_ptr().cast(),
                std::mem::size_of::<Msg>() as c_int,
                route,
            )
        }
    }

    /// The next message of the rendezvous from the peer of `route`, or `None` at `deadline`
    /// (the receive cancelled; `None` for no deadline waits as long as it takes). Closing
    /// channels of this rank are stepped meanwhile.
    fn pair_recv(&self, route: Route, deadline: Option<Instant>) -> Result<Option<Msg>, CommError> {
        let world = self.world();
        let mut msg: Box<Msg> = Box::new([0; 2 + OFFER_WORDS]);
        let mut req = raw::request_null();
        // SAFETY: msg is boxed, owned here, neither read nor freed until the request
        // completes: every path below tests it to completion or cancels and completes it.
        unsafe {
            raw::start(
                raw::Start::Recv,
                msg.as_mut_ptr().cast(),
                std::mem::size_of::<Msg>() as c_int,
                route,
                &mut req,
                &world.requests,
            )?;
        }
        let mut spins = 0u32;
        loop {
            match raw::test_one(&mut req, &world.requests) {
                Ok(true) => return Ok(Some(*msg)),
                Ok(false) => {}
                Err(e) => {
                    // Leave no request behind even after an error; the error is the news.
                    let _ = raw::cancel_recv(&mut req, &world.requests);
                    return Err(e);
                }
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return match raw::cancel_recv(&mut req, &world.requests)? {
                    true => Ok(None),
                    // It matched before the cancel took: the message is here.
                    false => Ok(Some(*msg)),
                };
            }
            world.progress_closing();
            world.relax(spins);
            spins = spins.saturating_add(1);
        }
    }

    /// chan-core's `pair_meet` over MPI (this module's protocol).
    pub(crate) fn meet(
        &mut self,
        spec: &ChannelSpec,
        mine: PairOffer,
        deadline: Instant,
    ) -> Result<Option<PairOffer>, CreateError> {
        let world = Rc::clone(self.world());
        let (meet_tag, _, _) = tags(spec.tag, world.tag_ub())?;
        let route = Route {
            comm: world.pair_comm().raw(),
            peer: spec.peer as c_int,
            tag: meet_tag,
        };
        let offer = |m: &Msg| {
            let mut w = [0; OFFER_WORDS];
            w.copy_from_slice(&m[2..]);
            PairOffer::from_words(w)
        };
        let unexpected = |m: &Msg| {
            CreateError::Comm(raw::misuse(
                "open_pair",
                format!(
                    "rank {} sent rendezvous message {} (nonce {}) out of turn on tag {}",
                    spec.peer, m[0], m[1], spec.tag
                ),
            ))
        };
        if world.rank > spec.peer {
            let nonce = world.next_pair_nonce();
            self.pair_send(route, OFFER, nonce, mine)?;
            loop {
                match self.pair_recv(route, Some(deadline))? {
                    None => {
                        self.pair_send(route, WITHDRAW, nonce, mine)?;
                        return Ok(None);
                    }
                    Some(m) if m[0] == VERDICT && m[1] == nonce => {
                        self.pair_send(route, CONFIRM, nonce, mine)?;
                        return Ok(Some(offer(&m)));
                    }
                    // The answer to an offer this rank withdrew.
                    Some(m) if m[0] == VERDICT && m[1] < nonce => {}
                    Some(m) => return Err(unexpected(&m)),
                }
            }
        }
        loop {
            let Some(m) = self.pair_recv(route, Some(deadline))? else {
                return Ok(None);
            };
            if m[0] != OFFER {
                return Err(unexpected(&m));
            }
            let nonce = m[1];
            self.pair_send(route, VERDICT, nonce, mine)?;
            // The decision follows every offer before the peer's call returns.
            let d = self
                .pair_recv(route, None)?
                .expect("a receive without a deadline completes");
            match (d[0], d[1] == nonce) {
                (CONFIRM, true) => return Ok(Some(offer(&m))),
                (WITHDRAW, true) => {} // a stale offer: wait for a fresh one
                _ => return Err(unexpected(&d)),
            }
        }
    }

    /// chan-core's `pair_wire_*` over MPI: a two-sided end on the pairwise communicator.
    pub(crate) fn wire_pair<D: MpiDelivery>(
        &mut self,
        agreed: PairAgreed<D>,
    ) -> Result<MpiEnd<D>, CreateError> {
        let world = Rc::clone(self.world());
        let s = agreed.spec;
        let (_, data_tag, ctrl_tag) = tags(s.tag, world.tag_ub())?;
        let (len, r) = (s.config.len(), s.config.max_in_flight());
        let comm = world.pair_comm();
        let wire = Wire {
            comm: comm.raw(),
            peer: s.peer,
            data_tag,
            ctrl_tag,
        };
        let kind = if world.simulated {
            RecvKind::PostedEachTime
        } else {
            RecvKind::Persistent
        };
        let mut core = Core::new(
            wire,
            comm,
            len,
            r,
            D::recv_mem(len + HDR, r),
            kind,
            &world.requests,
        )?;
        let live = world.pair_live();
        live.borrow_mut().insert((s.peer, s.tag));
        core.hold(PairTag {
            live,
            key: (s.peer, s.tag),
        });
        world.ends_opened.set(world.ends_opened.get() + 1);
        if world.node.rank_of(s.peer).is_some() {
            world.ends_to_node.set(world.ends_to_node.get() + 1);
        }
        Ok(MpiEnd::two_sided(world, core))
    }
}
