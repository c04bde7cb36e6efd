//! Start and resume: the iterate a run starts from instead of the problem's, and the
//! checkpoints a run hands out every K iterations, from which a later run resumes.
//!
//! Both speak of the global iterate in one order: the grid's interior points x fastest, then
//! y, then z ([`crate::field::assemble`]'s order), or a sparse system's rows. A sync run resumed from its checkpoint at
//! iteration K computes the iterates and the iteration count of the run that was not
//! interrupted, bit for bit: the iterate is all of a Jacobi sync run's state between two
//! sweeps (the halo is swapped again from it, and ‖b − A u₀‖, the relative residual's
//! denominator, is that of the problem's own start, recomputed alike).

/// Where a run starts: an iterate, and the iterations already done to reach it (0 for a
/// guess, K for a checkpoint taken after iteration K).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Start {
    /// The global iterate: the grid's interior points x fastest, or the system's rows.
    pub x: Vec<f64>,
    /// Iterations already done (the run counts on from here).
    pub iteration: u64,
}

/// A checkpoint: the global iterate after `iteration` iterations.
#[derive(Debug, Clone, Copy)]
pub struct Saved<'a> {
    /// Iterations done.
    pub iteration: u64,
    /// The global iterate: the grid's interior points x fastest, or the system's rows.
    pub x: &'a [f64],
}

/// Where a run's checkpoints go: every [`Checkpoint::every`] = K iterations of a sync run
/// (at the same iteration on every rank), or every K completed rounds of an async or racy
/// run's convergence detection (which every rank sees alike), the ranks' blocks are
/// gathered to rank 0, which calls [`Checkpoint::save`] with its own iteration count;
/// every rank then learns whether it succeeded (a failed save stops the run on every rank
/// with its message).
pub trait Checkpoint: Sync {
    /// K: a checkpoint after every K iterations.
    fn every(&self) -> u64;
    /// Keep `saved` (rank 0 only). The error says why it could not.
    fn save(&self, saved: &Saved<'_>) -> Result<(), String>;
}
