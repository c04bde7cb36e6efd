use super::*;

/// Pinned workers (one per CPU; unpinned beyond the CPUs) run the same solve as unpinned
/// ones: bit-identical solution, same iterations.
#[test]
fn pinned_workers_give_the_same_run() {
    let mut c = crate::tests::common::cfg(Dims::new(8, 9, 12), Variant::Sync);
    c.check_every = 5;
    let reference = {
        let plan = c.shared_plan(1).unwrap();
        solve_pinned(&c, &plan, None, false).unwrap()
    };
    for n in [1, 2, 3] {
        let plan = c.shared_plan(n).unwrap();
        let o = solve_pinned(&c, &plan, None, true).unwrap();
        assert_eq!(o.records.len(), n);
        for r in &o.records {
            assert_eq!(r.iterations, reference.records[0].iterations, "{n} pinned");
            assert!(r.converged, "{n} pinned");
        }
        assert!(
            o.solution
                .iter()
                .zip(&reference.solution)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "{n} pinned"
        );
    }
}
