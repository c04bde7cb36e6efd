//! A rank's view of its world: the trait every backend's context implements, and that solvers
//! are written against.

use crate::channel::Channel;
use crate::config::ChannelSpec;
use crate::error::{CommError, CreateError};
use crate::mode::{Mode, ModeKind};
use crate::reduce::{ReduceOp, Reduction};
use crate::transport::Backend;

/// One rank of a world of `size()` ranks, over some backend. Solvers are written once against
/// this trait and run over threads, MPI or SHMEM.
///
/// Creation calls ([`Context::open`], [`Context::reduction`]) are **collective**: every rank
/// calls them, in the same order, and each fails on every rank if it fails anywhere.
pub trait Context {
    /// The backend.
    type Backend: Backend;
    /// The non-blocking reduction this backend provides.
    type Reduction: Reduction;

    /// This rank, `0..size()`.
    fn rank(&self) -> usize;
    /// Number of ranks.
    fn size(&self) -> usize;

    /// Collectively create this rank's channels of mode `M`, one per spec; the peer must
    /// create the matching end (same tag) in the same collective call. Two ends that disagree
    /// on length, R or mode both get [`CreateError::Mismatch`] naming both values; every other
    /// rank gets [`CreateError::FailedElsewhere`].
    fn open<M: Mode>(
        &mut self,
        specs: &[ChannelSpec],
    ) -> Result<Vec<Channel<Self::Backend, M>>, CreateError> {
        let transports = M::open_transports(self, specs)?;
        Ok(transports
            .into_iter()
            .zip(specs)
            .map(|(t, s)| Channel::from_transport(t, s))
            .collect())
    }

    /// Backend primitive behind [`Context::open`] for Sync and Async channels.
    fn open_mailboxes(
        &mut self,
        mode: ModeKind,
        specs: &[ChannelSpec],
    ) -> Result<Vec<<Self::Backend as Backend>::Mailbox>, CreateError>;

    /// Backend primitive behind [`Context::open`] for Racy channels.
    fn open_racy(
        &mut self,
        specs: &[ChannelSpec],
    ) -> Result<Vec<<Self::Backend as Backend>::Racy>, CreateError>;

    /// Collectively create a non-blocking reduction of `len` values with `op`.
    fn reduction(&mut self, len: usize, op: ReduceOp) -> Result<Self::Reduction, CreateError>;

    /// A fresh tag for aiac's own channels; every rank gets the same sequence of tags from
    /// the same sequence of collective calls.
    fn next_reserved_tag(&mut self) -> u32;

    /// Blocking barrier.
    fn barrier(&mut self) -> Result<(), CommError>;

    /// Blocking all-reduce in place: every rank gets the same result.
    fn all_reduce(&mut self, data: &mut [f64], op: ReduceOp) -> Result<(), CommError>;

    /// Collective: every rank's bytes at rank 0 (`Some`, in rank order), `None` elsewhere.
    // PLACEHOLDER until the core redesign lands: each backend will gather for real
    // (MPI_Gatherv, shmem collect, a threads gather). Meanwhile this is written with
    // `all_reduce` only, so it works on every backend: each rank's bytes are packed 6 per f64
    // (integers below 2⁴⁸, exact) into its own segment of a zeroed vector, and a sum (of zeros
    // and one value per element, exact) assembles them, on every rank.
    fn gather_bytes(&mut self, mine: &[u8]) -> Result<Option<Vec<Vec<u8>>>, CommError> {
        const BYTES_PER_F64: usize = 6;
        let (rank, size) = (self.rank(), self.size());
        let mut lens = vec![0.0; size];
        lens[rank] = mine.len() as f64;
        self.all_reduce(&mut lens, ReduceOp::Sum)?;
        let words: Vec<usize> = lens
            .iter()
            .map(|&l| (l as usize).div_ceil(BYTES_PER_F64))
            .collect();
        let offsets: Vec<usize> = words
            .iter()
            .scan(0, |acc, &w| {
                let o = *acc;
                *acc += w;
                Some(o)
            })
            .collect();
        let mut buf = vec![0.0; words.iter().sum()];
        for (k, chunk) in mine.chunks(BYTES_PER_F64).enumerate() {
            let mut v = 0u64;
            for (j, &b) in chunk.iter().enumerate() {
                v |= u64::from(b) << (8 * j);
            }
            buf[offsets[rank] + k] = v as f64;
        }
        self.all_reduce(&mut buf, ReduceOp::Sum)?;
        if rank != 0 {
            return Ok(None);
        }
        let out = (0..size)
            .map(|r| {
                let mut b = Vec::with_capacity(words[r] * BYTES_PER_F64);
                for &w in &buf[offsets[r]..offsets[r] + words[r]] {
                    let v = w as u64;
                    for j in 0..BYTES_PER_F64 {
                        b.push((v >> (8 * j)) as u8);
                    }
                }
                b.truncate(lens[r] as usize);
                b
            })
            .collect();
        Ok(Some(out))
    }
}
