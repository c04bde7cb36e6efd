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

#[cfg(test)]
mod tests {
    use crate::field::Field;
    use crate::geometry::{Dims, Geometry, Plan, ProcGrid};
    use crate::iterate::Iterate;
    use crate::problem::Problem;
    use chan_core::backend::Lists;

    /// Every rank's block of a global iterate, gathered in rank order and assembled, is that
    /// iterate (blocks of 3 × 2 × 2 points, the process grid split along every axis).
    #[test]
    fn blocks_of_a_start_assemble_back_to_it() {
        let global = Dims::new(6, 4, 6);
        let procs = ProcGrid(Dims::new(2, 2, 3));
        let plan = Plan::split(global, procs).unwrap();
        let x: Vec<f64> = (0..global.volume()).map(|i| i as f64 * 0.5 - 7.0).collect();
        let mut lists = Lists::default();
        let mut bits = Vec::new();
        let mut fields = Vec::new();
        for r in 0..procs.size() {
            let mut f = Field::new(&Geometry::new(&plan, r), &Problem::default());
            f.start_from(&x).unwrap();
            f.owned_bits_into(&mut bits);
            lists.push(&bits);
            fields.push(f);
        }
        let mut back = Vec::new();
        fields[0].assemble_into(&lists, &mut back);
        assert_eq!(back, x);
        assert!(
            fields[1].start_from(&x[1..]).is_err(),
            "a wrong length is refused"
        );
    }
}
