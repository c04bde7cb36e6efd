//! Channels of every element type: each round-trips bit for bit in each mode it may take,
//! a struct keeps its fields, and two ends that name different types fail on both ranks.

use crate::ends::expect_mismatch;
use crate::{pair_specs, Check};
use chan_core::bytemuck::{self, Pod, Zeroable};
use chan_core::traits::*;
use chan_core::{
    close_all, Async, Carries, ChannelConfig, ChannelSpec, Element, Racy, RacyElement, SpecField,
    Sync, TrySendError,
};

/// A struct payload: three coordinates, an id and a mass (24 bytes, no padding).
#[derive(Debug, Clone, Copy, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct Particle {
    /// Position.
    pub pos: [f32; 3],
    /// Identifier.
    pub id: u32,
    /// Mass.
    pub mass: f64,
}

impl Particle {
    /// The particle element `j` of message `seq` carries: every field distinct and exact.
    pub fn of(seq: u64, j: usize) -> Self {
        Particle {
            pos: [seq as f32, j as f32, -0.5 * j as f32],
            id: (seq * 1000 + j as u64) as u32,
            mass: seq as f64 + j as f64 / 1024.0,
        }
    }
}

/// Element `j` of message `seq` as `T`: bytes drawn from (seq, j, byte) by a mixing hash, so
/// floating types get every bit pattern class (NaNs with payloads, subnormals, −0) and a
/// changed, dropped or reordered byte shows.
pub fn pattern<T: Element>(seq: u64, j: usize) -> T {
    let mut t = T::zeroed();
    for (k, b) in bytemuck::bytes_of_mut(&mut t).iter_mut().enumerate() {
        let mut x = seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ ((j as u64) << 20) ^ k as u64;
        x ^= x >> 31;
        x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        *b = (x >> 56) as u8;
    }
    t
}

fn same<T: Element>(a: &[T], b: &[T]) -> bool {
    bytemuck::cast_slice::<T, u8>(a) == bytemuck::cast_slice::<T, u8>(b)
}

/// Lengths that make each type's message whole words, and not (the last word part-used).
const LENS: [usize; 3] = [1, 3, 8];

/// Messages of `T` in Sync and Async between partners (0, 1), (2, 3), …: every Sync message
/// arrives bit for bit in order, and an Async receive after the last send gets the last.
fn mailbox<C: Context, T: Element + std::fmt::Debug>(ctx: &mut C, rounds: u64) -> Check {
    let what = std::any::type_name::<T>();
    for len in LENS {
        let specs = pair_specs(ctx, len, 2, 11)?;
        let mut sync = ctx
            .open_typed::<Sync, T>(&specs)
            .map_err(|e| format!("{what}: open sync: {e}"))?;
        let mut msg = vec![T::zeroed(); len];
        for ch in &mut sync {
            for seq in 1..=rounds {
                ch.send_with(|b| {
                    for (j, v) in b.iter_mut().enumerate() {
                        *v = pattern(seq, j);
                    }
                })
                .map_err(|e| format!("{what}: send: {e}"))?;
                ch.recv_into(&mut msg)
                    .map_err(|e| format!("{what}: recv: {e}"))?;
                let want: Vec<T> = (0..len).map(|j| pattern(seq, j)).collect();
                ensure!(
                    same(&msg, &want),
                    "{what}, {len} elements, sync message {seq}: got {msg:?}, sent {want:?}"
                );
            }
        }
        close_all(sync).map_err(|e| format!("{what}: close: {e}"))?;

        let mut asy = ctx
            .open_typed::<Async, T>(&specs)
            .map_err(|e| format!("{what}: open async: {e}"))?;
        for ch in &mut asy {
            // Both partners send first: a full channel is drained (its peer's slots freed)
            // until the send fits, so neither waits for the other.
            let mut spins = 0u32;
            for seq in 1..=rounds {
                let m: Vec<T> = (0..len).map(|j| pattern(seq, j)).collect();
                loop {
                    match ch.try_send(&m) {
                        Ok(()) => break,
                        Err(TrySendError::Full(_)) => {
                            ch.recv().map_err(|e| format!("{what}: recv: {e}"))?;
                            ch.relax(spins);
                            spins = spins.saturating_add(1);
                        }
                        Err(e) => return Err(format!("{what}: send: {e}")),
                    }
                }
            }
            while ch.latest().map(|m| m.seq()) != Some(rounds) {
                ch.recv().map_err(|e| format!("{what}: recv: {e}"))?;
                ch.relax(spins);
                spins = spins.saturating_add(1);
            }
            let last: Vec<T> = (0..len).map(|j| pattern(rounds, j)).collect();
            let m = ch.latest().expect("the last message is held");
            ensure!(
                same(m.data(), &last),
                "{what}, {len} elements, async: the last message arrived as {:?}, sent {last:?}",
                m.data()
            );
        }
        close_all(asy).map_err(|e| format!("{what}: close: {e}"))?;
    }
    Ok(())
}

/// Racy messages of `T`: once the last send landed and nothing else is sent, the view holds
/// it bit for bit.
fn racy<C: Context, T: RacyElement + std::fmt::Debug>(
    ctx: &mut C,
    rounds: u64,
    read: impl Fn(&T::View<'_>, &mut [T]),
) -> Check
where
    Racy: Carries<T>,
{
    let what = std::any::type_name::<T>();
    for len in LENS {
        let specs = pair_specs(ctx, len, 2, 12)?;
        let mut chans = ctx
            .open_typed::<Racy, T>(&specs)
            .map_err(|e| format!("{what}: open racy: {e}"))?;
        for ch in &mut chans {
            for seq in 1..=rounds {
                ch.set_iteration(seq);
                let m: Vec<T> = (0..len).map(|j| pattern(seq, j)).collect();
                ch.send(&m).map_err(|e| format!("{what}: racy send: {e}"))?;
            }
            let mut spins = 0u32;
            while ch.last_stamp() < rounds {
                ch.can_recv().map_err(|e| e.to_string())?;
                ch.relax(spins);
                spins = spins.saturating_add(1);
            }
            let mut got = vec![T::zeroed(); len];
            read(&ch.recv().map_err(|e| e.to_string())?, &mut got);
            let want: Vec<T> = (0..len).map(|j| pattern(rounds, j)).collect();
            ensure!(
                same(&got, &want),
                "{what}, {len} elements, racy: the view holds {got:?} after the last send \
                 landed, which was {want:?}"
            );
        }
        // Both partners have read their view before either closes (a close drains it).
        ctx.barrier().map_err(|e| e.to_string())?;
        close_all(chans).map_err(|e| format!("{what}: close: {e}"))?;
    }
    Ok(())
}

/// Every element type over the pairs (0, 1), (2, 3), …: `f64`, `f32`, `i32`, `u32`, `i64`,
/// `u64`, an array and a struct round-trip bit for bit in Sync and Async, and the scalars in
/// Racy; a [`Particle`] keeps every field. `rounds` messages per channel.
pub fn element_types<C: Context>(ctx: &mut C, rounds: u64) -> Check {
    mailbox::<C, f64>(ctx, rounds)?;
    mailbox::<C, f32>(ctx, rounds)?;
    mailbox::<C, i32>(ctx, rounds)?;
    mailbox::<C, u32>(ctx, rounds)?;
    mailbox::<C, i64>(ctx, rounds)?;
    mailbox::<C, u64>(ctx, rounds)?;
    mailbox::<C, [u16; 3]>(ctx, rounds)?;
    mailbox::<C, Particle>(ctx, rounds)?;
    racy::<C, f64>(ctx, rounds, |v, out| v.load_into(out))?;
    racy::<C, f32>(ctx, rounds, |v, out| v.load_into(out))?;
    racy::<C, i32>(ctx, rounds, |v, out| {
        for (j, o) in out.iter_mut().enumerate() {
            *o = v.load(j);
        }
    })?;
    racy::<C, u32>(ctx, rounds, |v, out| v.load_into(out))?;
    racy::<C, i64>(ctx, rounds, |v, out| v.load_into(out))?;
    racy::<C, u64>(ctx, rounds, |v, out| {
        for (o, x) in out.iter_mut().zip(v.iter()) {
            *o = x;
        }
    })?;

    // A struct's fields, named: what a user's code reads.
    let specs = pair_specs(ctx, 5, 1, 13)?;
    let mut chans = ctx
        .open_typed::<Sync, Particle>(&specs)
        .map_err(|e| format!("particles: open: {e}"))?;
    for ch in &mut chans {
        let sent: Vec<Particle> = (0..5).map(|j| Particle::of(7, j)).collect();
        ch.send(&sent).map_err(|e| e.to_string())?;
        let m = ch.recv().map_err(|e| e.to_string())?;
        for (j, p) in m.data().iter().enumerate() {
            ensure!(
                p.pos == [7.0, j as f32, -0.5 * j as f32]
                    && p.id == 7000 + j as u32
                    && p.mass == 7.0 + j as f64 / 1024.0,
                "particle {j} arrived as {p:?}"
            );
        }
    }
    close_all(chans).map_err(|e| e.to_string())?;
    Ok(())
}

/// Ends that name different element types: ranks 0 and 1 both get [`chan_core::CreateError::
/// Mismatch`] on the element type, naming both types (also where the message's bytes are the
/// same, 4 `f32` against 2 `f64`, and where the sizes are, `u64` against `f64`); every other
/// rank [`chan_core::CreateError::FailedElsewhere`]. The world stays usable.
pub fn mismatched_element_types<C: Context>(ctx: &mut C) -> Check {
    let (rank, size) = (ctx.rank(), ctx.size());
    if size < 2 {
        return Ok(());
    }
    let peer = usize::from(rank == 0);
    let specs = |len| -> Vec<ChannelSpec> {
        let cfg = ChannelConfig::new(len, 2).expect("valid");
        match rank < 2 {
            true => vec![ChannelSpec::new(peer, 9, cfg).expect("valid")],
            false => Vec::new(),
        }
    };
    let e = match rank {
        0 => ctx.open_typed::<Sync, f32>(&specs(4)).err(),
        _ => ctx.open_typed::<Sync, i32>(&specs(4)).err(),
    };
    expect_mismatch(
        rank,
        e,
        SpecField::Element,
        ["f32 (4 bytes)", "i32 (4 bytes)"],
    )?;
    let e = match rank {
        0 => ctx.open_typed::<Async, f32>(&specs(4)).err(),
        _ => ctx.open_typed::<Async, f64>(&specs(2)).err(),
    };
    expect_mismatch(
        rank,
        e,
        SpecField::Element,
        ["f32 (4 bytes)", "f64 (8 bytes)"],
    )?;
    let e = match rank {
        0 => ctx.open_typed::<Racy, u64>(&specs(3)).err(),
        _ => ctx.open::<Racy>(&specs(3)).err(),
    };
    expect_mismatch(
        rank,
        e,
        SpecField::Element,
        ["u64 (8 bytes)", "f64 (8 bytes)"],
    )?;
    let mut chans = ctx
        .open_typed::<Sync, Particle>(&specs(1))
        .map_err(|e| format!("matching open after mismatches failed: {e}"))?;
    for ch in &mut chans {
        ch.send(&[Particle::of(1, 0)]).map_err(|e| e.to_string())?;
        let m = ch.recv().map_err(|e| e.to_string())?;
        ensure!(m[0] == Particle::of(1, 0), "after mismatch: got {:?}", m[0]);
    }
    close_all(chans).map_err(|e| e.to_string())?;
    Ok(())
}

/// Typed channels opened pairwise ([`Context::open_pair_typed`]) between partners (0, 1),
/// (2, 3), … only (an odd world's last rank computes meanwhile): an `f32` Sync channel, a
/// [`Particle`] Async one and a `u32` Racy one round-trip bit for bit; ends of different types
/// fail on both ranks, naming both; then every rank meets at a barrier.
pub fn pairwise_element_types<C: Context>(ctx: &mut C) -> Check {
    let (rank, size) = (ctx.rank(), ctx.size());
    let peer = rank ^ 1;
    if peer < size {
        let meet = std::time::Duration::from_secs(30);
        let spec = |tag, len| -> Result<ChannelSpec, String> {
            let cfg = ChannelConfig::new(len, 2).map_err(|e| e.to_string())?;
            ChannelSpec::new(peer, tag, cfg).map_err(|e| e.to_string())
        };
        let mut f = ctx
            .open_pair_typed::<Sync, f32>(spec(21, 3)?, meet)
            .map_err(|e| format!("pairwise f32: {e}"))?;
        let mut p = ctx
            .open_pair_typed::<Async, Particle>(spec(22, 2)?, meet)
            .map_err(|e| format!("pairwise particles: {e}"))?;
        let mut u = ctx
            .open_pair_typed::<Racy, u32>(spec(23, 5)?, meet)
            .map_err(|e| format!("pairwise u32: {e}"))?;
        let floats: Vec<f32> = (0..3).map(|j| pattern(rank as u64, j)).collect();
        f.send(&floats).map_err(|e| e.to_string())?;
        let m = f.recv().map_err(|e| e.to_string())?;
        let want: Vec<f32> = (0..3).map(|j| pattern(peer as u64, j)).collect();
        ensure!(same(m.data(), &want), "pairwise f32: got {:?}", m.data());

        let parts = [Particle::of(rank as u64, 0), Particle::of(rank as u64, 1)];
        p.send(&parts).map_err(|e| e.to_string())?;
        let mut spins = 0u32;
        while p.latest().is_none() {
            p.recv().map_err(|e| e.to_string())?;
            p.relax(spins);
            spins = spins.saturating_add(1);
        }
        let got = p.latest().expect("delivered");
        ensure!(
            got.data() == [Particle::of(peer as u64, 0), Particle::of(peer as u64, 1)],
            "pairwise particles: got {:?}",
            got.data()
        );

        let words: Vec<u32> = (0..5).map(|j| pattern(rank as u64 + 10, j)).collect();
        u.set_iteration(1);
        u.send(&words).map_err(|e| e.to_string())?;
        while u.last_stamp() < 1 {
            u.can_recv().map_err(|e| e.to_string())?;
            u.relax(spins);
            spins = spins.saturating_add(1);
        }
        let mut got = [0u32; 5];
        u.recv().map_err(|e| e.to_string())?.load_into(&mut got);
        let want: Vec<u32> = (0..5).map(|j| pattern(peer as u64 + 10, j)).collect();
        ensure!(
            got[..] == want[..],
            "pairwise u32 racy: got {got:?}, sent {want:?}"
        );

        // Different types at the two ends, pairwise: both fail, naming both.
        let e = match rank % 2 {
            0 => ctx.open_pair_typed::<Sync, f32>(spec(24, 4)?, meet).err(),
            _ => ctx.open_pair_typed::<Sync, i32>(spec(24, 4)?, meet).err(),
        };
        let (here, there) = match rank % 2 {
            0 => ("f32 (4 bytes)", "i32 (4 bytes)"),
            _ => ("i32 (4 bytes)", "f32 (4 bytes)"),
        };
        match e {
            Some(chan_core::CreateError::Mismatch {
                field: SpecField::Element,
                here: h,
                there: t,
                ..
            }) if h == here && t == there => {}
            other => {
                return Err(format!(
                    "rank {rank}: want an element type mismatch {here} / {there}, got {other:?}"
                ))
            }
        }
        // Both partners have read their racy view before either closes.
        let mut spins = 0u32;
        f.send(&floats).map_err(|e| e.to_string())?;
        while f.try_recv().map_err(|e| e.to_string())?.is_none() {
            f.relax(spins);
            spins = spins.saturating_add(1);
        }
        f.close().map_err(|e| e.to_string())?;
        p.close().map_err(|e| e.to_string())?;
        u.close().map_err(|e| e.to_string())?;
    }
    ctx.barrier().map_err(|e| e.to_string())
}
