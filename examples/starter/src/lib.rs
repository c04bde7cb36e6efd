//! # aiac-starter: your own code on aiac's channels
//!
//! Two small programs written against chan-core's traits alone ([`Context`], [`Channel`],
//! [`Reduction`]), so the same function runs on a world of threads (chan-threads) or one MPI
//! rank per process (chan-mpi): copy this crate to start your own.
//!
//! * [`heat2d`]: the 2-D heat equation run to its steady state, the domain split into strips
//!   of rows, one rank each, with **asynchronous** halos (each step takes the newest whole row
//!   a neighbour sent and never waits for one) and a non-blocking reduction that says when
//!   every rank's last step changed nothing above the tolerance, or that a rank has taken
//!   all its steps (every rank then stops on that same round).
//! * [`ring`]: a pipeline around a ring with **synchronous** channels: a token goes round
//!   `laps` times and each rank adds its rank to it.
//! * [`particles`]: particles bouncing in a box shared by a pair of ranks, the ones that cross
//!   sent to the partner as **structs** ([`Particle`], deriving `bytemuck::Pod`) and the
//!   counts as **`f32`**, over channels each pair opens **pairwise**.

#![warn(missing_docs)]

use bytemuck::{Pod, Zeroable};
use chan_core::traits::*;
use chan_core::{close_all, Async, Channel, ChannelConfig, ChannelSpec, ReduceOp, Sync};

/// Any failure of the examples, as text.
pub type Error = Box<dyn std::error::Error + Send + std::marker::Sync>;

/// The heat problem: `cols` × (`rows` per rank) interior points; the bottom edge (y = 0) held
/// at 0, the top edge (y = 1) at 1, the sides insulated. Its steady state is u = y, exactly
/// also for the discrete 5-point operator, which is what [`heat2d`]'s result is checked with.
#[derive(Debug, Clone, Copy)]
pub struct Heat {
    /// Points per row.
    pub cols: usize,
    /// Rows per rank.
    pub rows: usize,
    /// Stop when no point of the last step changed by more than this.
    pub tol: f64,
    /// A rank takes at most this many steps; once one has, every rank stops, unconverged, at
    /// the reduction round that says so.
    pub max_steps: u64,
}

/// What one rank of [`heat2d`] found.
#[derive(Debug, Clone, Copy)]
pub struct HeatResult {
    /// Steps this rank took.
    pub steps: u64,
    /// Converged (the global change fell below the tolerance) before `max_steps`.
    pub converged: bool,
    /// The largest |u − y| over this rank's points: the distance to the steady state.
    pub error: f64,
    /// Halo rows this rank received.
    pub received: u64,
}

/// Run the heat equation to its steady state on every rank of `ctx` (collective).
///
/// Each step is the explicit update with the largest stable time step, `u ← mean of the four
/// neighbours` (a Jacobi sweep of Laplace's equation). A rank's halo rows are the newest its
/// neighbours sent; a neighbour that is behind is not waited for.
pub fn heat2d<C: Context>(ctx: &mut C, heat: &Heat) -> Result<HeatResult, Error> {
    let (rank, size) = (ctx.rank(), ctx.size());
    let (cols, rows) = (heat.cols, heat.rows);
    let global_rows = rows * size;
    let h = 1.0 / (global_rows + 1) as f64;
    // Rows 0 and rows + 1 are halos (or the fixed edges); row i is global row rank·rows + i.
    let width = cols;
    let mut u = vec![0.0; (rows + 2) * width];
    if rank + 1 == size {
        u[(rows + 1) * width..].fill(1.0); // the top edge
    }
    let mut next = u.clone();

    // One channel per neighbour; both ends name the edge between them (the lower rank).
    let config = ChannelConfig::new(cols, 2)?;
    let mut specs = Vec::new();
    if rank > 0 {
        specs.push(ChannelSpec::new(rank - 1, (rank - 1) as u32, config)?);
    }
    if rank + 1 < size {
        specs.push(ChannelSpec::new(rank + 1, rank as u32, config)?);
    }
    let mut chans: Vec<Channel<C::Backend, Async>> = ctx.open(&specs)?;
    let below = (rank > 0).then_some(0);
    let above = (rank + 1 < size).then(|| specs.len() - 1);

    // Each round reduces [the last step's change, 1 if this rank has taken all its steps],
    // by their maxima. Every rank sees the same rounds, so every rank stops on the same one:
    // a rank that ran out of steps takes no more but goes on reducing until a round has
    // told everyone (one that left the loop alone would leave the others waiting for it).
    let mut done = ctx.reduction(2, ReduceOp::Max)?;
    let (mut steps, mut converged, mut certifications) = (0u64, false, 0u64);
    let (mut change, mut spins) = (f64::INFINITY, 0u32);
    loop {
        if steps < heat.max_steps {
            // The newest halo rows, if any arrived.
            for (side, row) in [(below, 0), (above, rows + 1)] {
                if let Some(i) = side {
                    if let Some(m) = chans[i].recv()? {
                        u[row * width..(row + 1) * width].copy_from_slice(&m);
                    }
                }
            }
            change = step(&mut u, &mut next, cols, rows);
            steps += 1;
            for ch in &mut chans {
                ch.set_iteration(steps);
            }
            // Offer the boundary rows; all R in flight means the neighbour is behind: carry
            // on.
            for (side, row) in [(below, 1), (above, rows)] {
                if let Some(i) = side {
                    let _ = chans[i].try_send(&u[row * width..(row + 1) * width]);
                }
            }
        } else if let Some(ch) = chans.first_mut() {
            // Out of steps: only the rounds are left to wait for.
            ch.relax(spins);
            spins = spins.saturating_add(1);
        }
        // The global change: start a round, test it while stepping.
        if !done.in_progress() {
            let out_of_steps = f64::from(u8::from(steps >= heat.max_steps));
            done.start(&[change, out_of_steps])?;
        }
        let Some(global) = done.test()? else {
            continue;
        };
        if global[0] <= heat.tol {
            // Every rank got the same round's value, so every rank is here. Halos may have
            // been stale when the changes were measured: certify with one step on the
            // neighbours' current rows, exchanged and waited for, and a blocking reduction.
            certifications += 1;
            let change = certify(
                ctx,
                &mut chans,
                (below, above),
                &mut u,
                &mut next,
                heat,
                certifications,
            )?;
            steps += 1;
            if change <= heat.tol {
                converged = true;
                break;
            }
        }
        if global[1] > 0.0 {
            break; // some rank took all its steps
        }
    }
    // Every rank left on the same round's result: none is in progress.
    let received = chans.iter().map(|c| c.stats().received).sum();
    close_all(chans)?;
    let mut error = 0.0f64;
    for r in 1..=rows {
        let y = (rank * rows + r) as f64 * h;
        for c in 0..cols {
            error = error.max((u[r * width + c] - y).abs());
        }
    }
    Ok(HeatResult {
        steps,
        converged,
        error,
        received,
    })
}

/// One step of `u` into `next` (then swapped), the sides mirrored (insulated), keeping the
/// halo rows; the largest change of a point.
fn step(u: &mut Vec<f64>, next: &mut Vec<f64>, cols: usize, rows: usize) -> f64 {
    let w = cols;
    let mut change = 0.0f64;
    for r in 1..=rows {
        for c in 0..cols {
            let left = u[r * w + c.saturating_sub(1)];
            let right = u[r * w + (c + 1).min(cols - 1)];
            let v = 0.25 * (u[(r - 1) * w + c] + u[(r + 1) * w + c] + left + right);
            change = change.max((v - u[r * w + c]).abs());
            next[r * w + c] = v;
        }
    }
    // The halo rows (or fixed edges) carry over.
    next[..w].copy_from_slice(&u[..w]);
    next[(rows + 1) * w..].copy_from_slice(&u[(rows + 1) * w..]);
    std::mem::swap(u, next);
    change
}

/// A convergence claim's certificate: send the boundary rows stamped as certification
/// `round`, wait for each neighbour's rows of the same round (newer ones win, older ones are
/// skipped), take one step on them and return the global largest change (blocking).
fn certify<C: Context>(
    ctx: &mut C,
    chans: &mut [Channel<C::Backend, Async>],
    (below, above): (Option<usize>, Option<usize>),
    u: &mut Vec<f64>,
    next: &mut Vec<f64>,
    heat: &Heat,
    round: u64,
) -> Result<f64, Error> {
    let (cols, rows) = (heat.cols, heat.rows);
    // Stamps above every step count mark the certification's messages.
    let stamp = (1 << 62) + round;
    // (channel, row sent, halo row filled): sent yet, received yet.
    let mut todo: Vec<(usize, usize, usize, bool, bool)> = [(below, 1, 0), (above, rows, rows + 1)]
        .into_iter()
        .filter_map(|(side, out, halo)| side.map(|i| (i, out, halo, false, false)))
        .collect();
    for (i, _, halo, _, got) in todo.iter_mut() {
        chans[*i].set_iteration(stamp);
        // A neighbour that got here first sent its rows already, and the last step may have
        // taken them as a plain halo: the channel still lends that message.
        if let Some(m) = chans[*i].latest().filter(|m| m.stamp() >= stamp) {
            u[*halo * cols..(*halo + 1) * cols].copy_from_slice(&m);
            *got = true;
        }
    }
    let mut spins = 0u32;
    // Send and receive in one loop: waiting in a send while the neighbour waits in its own
    // would leave both slots unacknowledged.
    while todo.iter().any(|t| !(t.3 && t.4)) {
        for (i, out, halo, sent, got) in todo.iter_mut() {
            let ch = &mut chans[*i];
            if !*sent {
                match ch.try_send(&u[*out * cols..(*out + 1) * cols]) {
                    Ok(()) => *sent = true,
                    Err(chan_core::TrySendError::Full(_)) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            if !*got {
                if let Some(m) = ch.recv()? {
                    if m.stamp() >= stamp {
                        u[*halo * cols..(*halo + 1) * cols].copy_from_slice(&m);
                        *got = true;
                    }
                }
            }
        }
        if let Some(&(i, ..)) = todo.first() {
            chans[i].relax(spins);
        }
        spins = spins.saturating_add(1);
    }
    let mut change = [step(u, next, cols, rows)];
    ctx.all_reduce(&mut change, ReduceOp::Max)?;
    Ok(change[0])
}

/// Pass a token round the ring `laps` times over Sync channels; each rank adds its rank as the
/// token passes. Returns the token as rank 0 received it last: `laps · size·(size−1)/2`.
/// Collective; needs at least 2 ranks.
pub fn ring<C: Context>(ctx: &mut C, laps: u64) -> Result<f64, Error> {
    let (rank, size) = (ctx.rank(), ctx.size());
    let config = ChannelConfig::new(1, 1)?;
    if size < 2 {
        return Err("a ring needs at least 2 ranks".into());
    }
    // Edge r joins r and r + 1 (mod size), tag r: this rank's edge to the next rank, then the
    // previous rank's edge to this one (with 2 ranks, two channels between the pair).
    let prev = (rank + size - 1) % size;
    let specs = [
        ChannelSpec::new((rank + 1) % size, rank as u32, config)?,
        ChannelSpec::new(prev, prev as u32, config)?,
    ];
    let mut chans: Vec<Channel<C::Backend, Sync>> = ctx.open(&specs)?;
    let (to_next, from_prev) = (0, 1);
    let mut token = 0.0;
    for _ in 0..laps {
        if rank == 0 {
            chans[to_next].send(&[token])?;
            token = chans[from_prev].recv()?[0];
        } else {
            let t = chans[from_prev].recv()?[0] + rank as f64;
            chans[to_next].send(&[t])?;
        }
    }
    close_all(chans)?;
    Ok(token)
}

/// A particle of [`particles`]: position, velocity, identifier, and whether the slot holds
/// one (a message has room for every particle of the pair; the rest of it is empty slots).
/// `#[repr(C)]` with no padding, so it derives `Pod` and a channel can carry it.
#[derive(Debug, Clone, Copy, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct Particle {
    /// Position in the pair's box [0, 2) × [0, 1).
    pub pos: [f32; 2],
    /// Velocity.
    pub vel: [f32; 2],
    /// Identifier, unique over the pair.
    pub id: u32,
    /// 1 for a particle, 0 for an empty slot.
    pub live: u32,
}

/// What one rank of [`particles`] ends with.
#[derive(Debug, Clone)]
pub struct ParticlesResult {
    /// The identifiers of the particles this rank holds at the end, sorted.
    pub ids: Vec<u32>,
    /// Particles that crossed to this rank from its partner.
    pub arrived: u64,
}

/// Particles bouncing in a box [0, 2) × [0, 1) shared by a pair of ranks (0, 1), (2, 3), …:
/// the lower rank owns x < 1, the upper x ≥ 1, each starts with `per_rank` particles. Each
/// step every particle moves and reflects off the walls, and the ones that crossed x = 1 go to
/// the partner over a channel of [`Particle`] structs; an `f32` channel carries each rank's
/// count, which both check against the pair's total (no particle lost or doubled). Both
/// channels are opened **pairwise**: only the two ranks of a pair take part, so pairs start
/// and finish on their own. Fails for the last rank of an odd world (it has no partner).
pub fn particles<C: Context>(
    ctx: &mut C,
    per_rank: usize,
    steps: u64,
) -> Result<ParticlesResult, Error> {
    let rank = ctx.rank();
    let peer = rank ^ 1;
    if peer >= ctx.size() {
        return Err(format!("rank {rank} has no partner: run an even number of ranks").into());
    }
    let (low, cap) = (rank < peer, 2 * per_rank);
    let wait = std::time::Duration::from_secs(60);
    let cfg = |len| ChannelConfig::new(len, 1);
    let mut moved =
        ctx.open_pair_typed::<Sync, Particle>(ChannelSpec::new(peer, 0, cfg(cap)?)?, wait)?;
    let mut counts = ctx.open_pair_typed::<Sync, f32>(ChannelSpec::new(peer, 1, cfg(1)?)?, wait)?;

    // Deterministic starting particles: this rank's half of the box, ids unique in the pair.
    let x0 = if low { 0.0 } else { 1.0 };
    let first = if low { 0 } else { per_rank as u32 };
    let mut mine: Vec<Particle> = (0..per_rank)
        .map(|i| {
            let t = (i as f32 + 0.5) / per_rank as f32;
            Particle {
                pos: [x0 + t, 1.0 - t],
                vel: [0.37 * (1.0 - 2.0 * t), 0.11],
                id: first + i as u32,
                live: 1,
            }
        })
        .collect();
    let mut out = vec![Particle::zeroed(); cap];
    let mut arrived = 0;
    for _ in 0..steps {
        // Move and reflect, then take out what crossed to the partner's half.
        let mut n = 0;
        mine.retain_mut(|p| {
            for (x, (v, hi)) in p.pos.iter_mut().zip(p.vel.iter_mut().zip([2.0, 1.0])) {
                *x += 0.05 * *v;
                if *x < 0.0 || *x >= hi {
                    *v = -*v;
                    *x = x.clamp(0.0, hi - f32::EPSILON * hi);
                }
            }
            let stays = (p.pos[0] < 1.0) == low;
            if !stays {
                out[n] = *p;
                n += 1;
            }
            stays
        });
        out[n..].fill(Particle::zeroed());
        moved.send(&out)?;
        let came = moved.recv()?;
        let new = came.iter().filter(|p| p.live == 1);
        arrived += new.clone().count() as u64;
        mine.extend(new);
        // The pair's total is conserved.
        counts.send(&[mine.len() as f32])?;
        let theirs = counts.recv()?[0];
        if mine.len() as f32 + theirs != cap as f32 {
            return Err(format!(
                "rank {rank}: {} + {theirs} particles, not {cap}",
                mine.len()
            )
            .into());
        }
    }
    moved.close()?;
    counts.close()?;
    let mut ids: Vec<u32> = mine.iter().map(|p| p.id).collect();
    ids.sort_unstable();
    Ok(ParticlesResult { ids, arrived })
}
