use super::*;
use crate::config::{Config, HaloDepth};
use crate::geometry::{Dims, Plan, ProcGrid};
use crate::record::{RankRecord, StopReason};
use crate::tests::common::{cfg, noise, run_threads};
use crate::{Jacobi, SizeSpec, Variant};

/// A run's residual history, bit for bit.
fn history_bits(r: &RankRecord) -> Vec<(u64, u64)> {
    r.history
        .points()
        .iter()
        .map(|p| (p.0, p.1.to_bits()))
        .collect()
}

/// A block of sweeps in tiles along y (any tile height, any k, with and without ghost
/// zones below and above in y, with a source term) computes every point of both arrays
/// bit for bit as the untiled wavefront does.
#[test]
fn tiles_along_y_change_no_bit() {
    for (global, procs, rank) in [
        (Dims::new(7, 23, 9), ProcGrid(Dims::new(1, 1, 1)), 0),
        (Dims::new(8, 39, 9), ProcGrid(Dims::new(2, 3, 1)), 3), // y neighbours both sides
        (Dims::new(6, 30, 12), ProcGrid(Dims::new(1, 3, 2)), 2),
    ] {
        let plan = Plan::split(global, procs).unwrap();
        let geom = plan.geometry(rank);
        for p in [Problem::Laplace { offset: 0.0 }, Problem::Poisson] {
            for k in 1..=4usize {
                let fresh = || {
                    let mut d = DeepField::new(&geom, &p, k, false);
                    let v = noise(d.u.len(), k as u64 + 40);
                    d.u.copy_from_slice(&v);
                    d.next.copy_from_slice(&v);
                    d
                };
                for m in [k, 1.max(k - 1)] {
                    let mut plain = fresh();
                    plain.tile_rows = None;
                    plain.sweep_block(m, false);
                    for rows in [1, 2, 3, 5, 8] {
                        let mut tiled = fresh();
                        tiled.tile_rows = Some(rows);
                        tiled.sweep_block(m, false);
                        let same = |a: &[f64], b: &[f64]| {
                            a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
                        };
                        let what = format!("{global:?} rank {rank} k={k} m={m} rows={rows}");
                        assert!(same(&plain.u, &tiled.u), "{what}: current iterate");
                        assert!(same(&plain.next, &tiled.next), "{what}: other array");
                    }
                }
            }
        }
    }
}

#[test]
fn tiles_only_when_the_planes_do_not_fit() {
    // A 1 MiB L2: 50³ per rank (52-value rows), k + 2 planes of both arrays fit half of
    // it; 100³ do not, and their tiles do.
    let half = DEFAULT_L2_BYTES / 2;
    assert_eq!(tile_rows_within(half, 4, 52, 56), None);
    let r = tile_rows_within(half, 4, 106, 108).expect("100³ planes are tiled");
    assert!((8..106).contains(&r));
    assert!(2 * (4 + 2) * r * 108 * 8 <= half);
    assert_eq!(parse_cache_size("1024K"), Some(1 << 20));
    assert_eq!(parse_cache_size("2M"), Some(2 << 20));
    assert_eq!(parse_cache_size("4096"), Some(4096));
    assert_eq!(parse_cache_size("K"), None);
    assert_eq!(parse_cache_size("0K"), None);
    assert!(wavefront_bytes() > 0);
}

/// Every grown point's value, after k one-plane sweeps of the whole global grid, equals
/// the deep block's after one block of k sweeps, bit for bit: the ghost-zone computation is
/// the owner's computation.
#[test]
fn a_block_of_sweeps_equals_sweeps_of_the_global_grid() {
    for (global, procs) in [
        (Dims::new(9, 7, 8), ProcGrid(Dims::new(1, 1, 1))),
        (Dims::new(9, 8, 9), ProcGrid(Dims::new(3, 2, 3))),
        (Dims::new(8, 10, 6), ProcGrid(Dims::new(2, 2, 2))),
    ] {
        let plan = Plan::split(global, procs).unwrap();
        let p = Problem::Poisson;
        for k in 1..=3usize {
            if plan.local.to_array().iter().any(|&n| n < k) {
                continue;
            }
            // The serial truth: the global grid as one block, randomised interior.
            let whole = Plan::split(global, ProcGrid(Dims::cube(1))).unwrap();
            let mut serial = Field::new(&whole.geometry(0), &p);
            let start = noise(global.volume(), k as u64);
            serial.set_owned(&start);
            let mut r_serial = 0.0;
            for _ in 0..k {
                r_serial = serial.sweep();
            }
            let truth = serial.owned_values();
            let mut r_sum = 0.0;
            for rank in 0..procs.size() {
                let geom = plan.geometry(rank);
                let mut d = DeepField::new(&geom, &p, k, false);
                // Load the random start into the whole grown block, ghosts included
                // (not the Dirichlet planes).
                let g = d.shape.n.to_array();
                for z in 0..=g[2] + 1 {
                    for y in 0..=g[1] + 1 {
                        for x in 0..=g[0] + 1 {
                            let gl = [x, y, z]
                                .iter()
                                .enumerate()
                                .map(|(a, &v)| geom.origin[a] + v - d.off[a] - 1)
                                .collect::<Vec<_>>();
                            let gd = global.to_array();
                            if (0..3).any(|a| gl[a] == 0 || gl[a] == gd[a] + 1) {
                                continue;
                            }
                            let i = d.shape.index(x, y, z);
                            let v = start
                                [(gl[0] - 1) + global.x * ((gl[1] - 1) + global.y * (gl[2] - 1))];
                            d.u[i] = v;
                        }
                    }
                }
                r_sum += d.sweep_block(k, true);
                let own = d.owned_values();
                let n = geom.local;
                let mut i = 0;
                for z in 0..n.z {
                    for y in 0..n.y {
                        for x in 0..n.x {
                            let gz = geom.origin[2] + z - 1;
                            let gy = geom.origin[1] + y - 1;
                            let gx = geom.origin[0] + x - 1;
                            let want = truth[gx + global.x * (gy + global.y * gz)];
                            assert_eq!(
                                own[i].to_bits(),
                                want.to_bits(),
                                "k {k} grid {procs} rank {rank} point ({x},{y},{z})"
                            );
                            i += 1;
                        }
                    }
                }
            }
            if procs.size() == 1 {
                assert_eq!(r_sum.to_bits(), r_serial.to_bits(), "k {k}");
            }
        }
    }
}

/// Whole runs on the threads backend: the same iteration count, the same residual
/// history and the same final iterate, bit for bit, for k = 1 and k = 2, 3, 4, 6, on odd
/// grids and 1-, 2- and 3-D process grids.
#[test]
fn deep_equals_shallow() {
    let g = |x, y, z| Some(ProcGrid(Dims::new(x, y, z)));
    let laplace = Problem::Laplace { offset: 0.0 };
    for (local, n, grid, problem) in [
        (SizeSpec::Local(Dims::new(13, 11, 9)), 1, None, laplace),
        (SizeSpec::Local(Dims::new(7, 11, 9)), 2, None, laplace),
        (SizeSpec::Local(Dims::new(9, 7, 5)), 3, g(1, 1, 3), laplace),
        (
            SizeSpec::Local(Dims::new(7, 5, 9)),
            4,
            None,
            Problem::Laplace { offset: 0.25 },
        ),
        (SizeSpec::Global(Dims::cube(10)), 8, None, Problem::Poisson),
        (SizeSpec::Local(Dims::new(5, 9, 7)), 6, g(3, 1, 2), laplace),
    ] {
        let mut c = cfg(Dims::cube(1), Variant::Sync);
        c.size = local;
        c.grid = grid;
        c.problem = problem;
        c.criterion = problem.default_criterion();
        c.check_every = 12;
        c.max_iters = 100_000;
        let (r1, s1, plan) = run_threads(&c, n);
        let it1 = r1[0].iterations;
        assert!(it1 > 24, "the run should take some blocks");
        // k = 6: the rows of sweeps 5 and 6 beyond a low x face begin at x = 5.
        for k in [2, 3, 4, 6u64] {
            if plan.local.to_array().iter().any(|&e| e < k as usize) {
                continue;
            }
            let what = format!("{} on {}, k {k}", plan.global, plan.procs);
            let mut d = c.clone();
            d.method.jacobi_mut().unwrap().halo_depth = HaloDepth::Fixed(k);
            let (rk, sk, _) = run_threads(&d, n);
            for (a, b) in r1.iter().zip(&rk) {
                assert_eq!(a.iterations, b.iterations, "{what}");
                assert_eq!(a.stop, b.stop, "{what}");
                assert_eq!(history_bits(a), history_bits(b), "{what}: residual history");
                assert_eq!(
                    a.residual.true_residual.to_bits(),
                    b.residual.true_residual.to_bits(),
                    "{what}"
                );
            }
            assert_eq!(s1.len(), sk.len());
            for (i, (a, b)) in s1.iter().zip(&sk).enumerate() {
                assert_eq!(a.to_bits(), b.to_bits(), "{what}: point {i}");
            }
            // k times fewer exchanges: messages per face per rank, give or take the
            // certification's exchange (k times more than its share, one exchange's
            // messages being sent(r1) / it1).
            let sent = |r: &[RankRecord]| r.iter().map(|x| x.messages.sent).sum::<u64>();
            if n > 1 {
                let (a, b) = (sent(&rk), sent(&r1));
                assert!(a * k < b + (k + 1) * b / it1, "{what}: {a} · {k} vs {b}");
            }
        }
        // A run cut by --max-iters at a point that is not a multiple of k.
        let mut cut = c.clone();
        cut.max_iters = 23;
        let (a, sa, _) = run_threads(&cut, n);
        cut.method.jacobi_mut().unwrap().halo_depth = HaloDepth::Fixed(3);
        let (b, sb, _) = run_threads(&cut, n);
        assert_eq!(a[0].iterations, 23);
        assert_eq!(b[0].iterations, 23);
        assert!(sa.iter().zip(&sb).all(|(x, y)| x.to_bits() == y.to_bits()));
    }
}

/// The async sweep as its docs state it, with one region per box: the owned points
/// (their r² summed), then each ghost slab beyond a face, all read from the current
/// iterate; then every swept ghost point copied to both arrays.
fn reference_async_sweep(d: &mut DeepField) -> f64 {
    let k = d.depth as u64;
    let n = d.geom.local.to_array();
    let parts: [[Range<usize>; 3]; 3] = [0, 1, 2].map(|a| {
        let axis = Axis::ALL[a];
        let ext = |high: bool| {
            let f = Face::new(axis, high);
            let has = if high { d.hi[a] } else { d.lo[a] };
            if has {
                (k - 1).saturating_sub(d.age[f.index()]) as usize
            } else {
                0
            }
        };
        let (o0, o1) = (d.off[a] + 1, d.off[a] + n[a] + 1);
        [o0 - ext(false)..o0, o0..o1, o1..o1 + ext(true)]
    });
    let whole = |a: usize| parts[a][0].start..parts[a][2].end;
    let own = Region {
        x: parts[0][1].clone(),
        y: parts[1][1].clone(),
        z: parts[2][1].clone(),
    };
    let rhs = d.rhs.as_deref();
    // The owned points' residual summed plane by plane (kernel.rs, "Plane-ordered sums").
    let resid = kernel::sweep_region(&d.shape, &d.u, rhs, &mut d.next, &own);
    let mut shell = Vec::new();
    for side in [0, 2] {
        shell.push(Region {
            x: whole(0),
            y: whole(1),
            z: parts[2][side].clone(),
        });
        shell.push(Region {
            x: whole(0),
            y: parts[1][side].clone(),
            z: own.z.clone(),
        });
        shell.push(Region {
            x: parts[0][side].clone(),
            ..own.clone()
        });
    }
    for reg in shell.iter().filter(|r| !r.is_empty()) {
        let mut scratch = Lanes::default();
        kernel::sweep_region_into(&d.shape, &d.u, rhs, &mut d.next, reg, &mut scratch);
    }
    for reg in &shell {
        for z in reg.z.clone() {
            for y in reg.y.clone() {
                for x in reg.x.clone() {
                    let i = d.shape.index(x, y, z);
                    d.u[i] = d.next[i];
                }
            }
        }
    }
    std::mem::swap(&mut d.u, &mut d.next);
    for a in &mut d.age {
        *a = a.saturating_add(1);
    }
    resid
}

/// A value for every global point: the same data in every layout.
fn at_global(g: [usize; 3], salt: u64) -> f64 {
    let h = (g[0] as u64 * 73_856_093) ^ (g[1] as u64 * 19_349_663) ^ (g[2] as u64 * 83_492_791);
    let h = (h ^ salt).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// The async sweep (owned rows extended by the x ghost planes in one pass, rows of owned
/// points aligned by padding) computes what the one-region-per-box statement of it
/// computes, bit for bit: every point of both arrays and the residual, over sweeps of
/// every ghost-zone age and messages landing on some faces in between, on blocks with
/// neighbours on every side, below only and above only, with and without a source term.
#[test]
fn async_sweeps_match_their_statement_on_the_padded_layout() {
    for (global, procs, rank) in [
        (Dims::new(14, 7, 6), ProcGrid(Dims::new(2, 1, 1)), 1), // low x neighbour
        (Dims::new(14, 7, 6), ProcGrid(Dims::new(2, 1, 1)), 0), // high x neighbour
        (Dims::new(18, 15, 15), ProcGrid(Dims::new(3, 3, 3)), 13), // all six
        (Dims::new(14, 12, 10), ProcGrid(Dims::new(2, 2, 2)), 6),
    ] {
        let plan = Plan::split(global, procs).unwrap();
        let geom = plan.geometry(rank);
        for p in [Problem::Laplace { offset: 0.0 }, Problem::Poisson] {
            for k in 2..=5usize {
                if plan.local.to_array().iter().any(|&n| n < k) {
                    continue;
                }
                let load = |d: &mut DeepField| {
                    let g = d.shape.n.to_array();
                    let x0 = if d.lo[0] { d.off[0] + 1 - k } else { 0 };
                    for z in 0..=g[2] + 1 {
                        for y in 0..=g[1] + 1 {
                            for x in x0..=g[0] + 1 {
                                let gl = [x, y, z];
                                let gl = [0, 1, 2].map(|a| geom.origin[a] + gl[a] - d.off[a] - 1);
                                let i = d.shape.index(x, y, z);
                                let bound =
                                    (0..3).any(|a| gl[a] == 0 || gl[a] == global.to_array()[a] + 1);
                                if !bound {
                                    d.u[i] = at_global(gl, 7);
                                    d.next[i] = d.u[i];
                                }
                            }
                        }
                    }
                };
                let mut stated = DeepField::new(&geom, &p, k, false);
                let mut plain = DeepField::new(&geom, &p, k, false);
                let mut padded = DeepField::new(&geom, &p, k, true);
                assert_eq!(padded.off[0] % ROW_ALIGN, 0, "owned rows begin aligned");
                for d in [&mut stated, &mut plain, &mut padded] {
                    load(d);
                }
                let faces: Vec<Face> = Face::ALL
                    .into_iter()
                    .filter(|f| geom.neighbours[f.index()].is_some())
                    .collect();
                for step in 0..3 * k as u64 {
                    // A message on some faces now and then: the ages differ by face.
                    for (fi, &f) in faces.iter().enumerate() {
                        if (step + fi as u64).is_multiple_of(k as u64 + 1) {
                            let len = plain.face_len(f);
                            assert_eq!(padded.face_len(f), len);
                            let msg = noise(len, step * 10 + fi as u64);
                            for d in [&mut stated, &mut plain, &mut padded] {
                                d.unpack(f, &msg);
                            }
                        }
                    }
                    let what = format!("{procs} rank {rank} k {k} step {step}");
                    let r0 = reference_async_sweep(&mut stated);
                    let r1 = plain.sweep_async();
                    let r2 = padded.sweep_async();
                    assert_eq!(r0.to_bits(), r1.to_bits(), "{what}: residual");
                    assert_eq!(r0.to_bits(), r2.to_bits(), "{what}: padded residual");
                    let same = |a: &[f64], b: &[f64]| {
                        a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
                    };
                    assert!(same(&stated.u, &plain.u), "{what}: current iterate");
                    assert!(same(&stated.next, &plain.next), "{what}: other array");
                    // The padded block holds the same values at the same points, padding
                    // aside.
                    let pad = padded.off[0] - plain.off[0];
                    let g = plain.shape.n.to_array();
                    let x0 = if plain.lo[0] { plain.off[0] + 1 - k } else { 0 };
                    for z in 0..=g[2] + 1 {
                        for y in 0..=g[1] + 1 {
                            for x in x0..=g[0] + 1 {
                                let (i, j) = (
                                    plain.shape.index(x, y, z),
                                    padded.shape.index(x + pad, y, z),
                                );
                                assert_eq!(
                                    (plain.u[i].to_bits(), plain.next[i].to_bits()),
                                    (padded.u[j].to_bits(), padded.next[j].to_bits()),
                                    "{what}: point ({x},{y},{z})"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Async and racy with deep halos, oversubscribed (4 and 8 ranks on this 2-core
/// machine): every run stops on the criterion, certified, with a true residual below
/// the tolerance (the certification computes it from an exact exchange: an independent
/// check of the claim), for k = 2 and 3 and halo periods N = 1 and 3.
#[test]
fn async_and_racy_with_deep_halos_converge_below_tol() {
    let g = |x, y, z| Some(ProcGrid(Dims::new(x, y, z)));
    for (variant, n, grid) in [
        (Variant::Async, 4, None),
        (Variant::Racy, 4, None),
        (Variant::Async, 8, g(2, 2, 2)),
        (Variant::Racy, 8, g(2, 2, 2)),
    ] {
        for (k, every) in [(2, 1), (3, 3)] {
            let mut c = cfg(Dims::cube(1), variant);
            c.size = SizeSpec::Local(Dims::new(7, 6, 5));
            c.grid = grid;
            let j = c.method.jacobi_mut().unwrap();
            j.halo_depth = HaloDepth::Fixed(k);
            j.iteration.halo_every = every;
            let (recs, _, _) = run_threads(&c, n);
            let tol = c.criterion.tol();
            for r in &recs {
                let what = format!("{variant} on {n}, k {k}, N {every}, rank {}", r.rank);
                assert_eq!(r.stop, StopReason::Criterion, "{what}");
                assert!(r.converged, "{what}");
                assert!(r.residual.true_residual < tol, "{what}: {:?}", r.residual);
                assert!(r.messages.sent > 0, "{what}");
            }
        }
    }
}

/// `--halo-depth auto` on threads: on 1, 2 and 8 ranks (1-, 2- and 3-D process grids)
/// every rank measures the same candidates and runs with the same k, one of them; the
/// run equals k = 1's and the chosen fixed k's bit for bit (iterations, residual history,
/// every value), and the scratch blocks of the probe leave the iterate as it was.
#[test]
fn auto_chooses_one_valid_k_on_every_rank_and_changes_no_bit() {
    for (n, local) in [
        (1, Dims::new(12, 10, 9)),
        (2, Dims::new(9, 10, 8)),
        (8, Dims::new(6, 7, 5)),
    ] {
        let mut c = cfg(Dims::cube(1), Variant::Sync);
        c.size = SizeSpec::Local(local);
        c.check_every = 24;
        c.method.jacobi_mut().unwrap().halo_depth = HaloDepth::Auto;
        let plan = c.plan(n).unwrap();
        let candidates = c.auto_depth_candidates(&plan);
        let (ra, sa, _) = run_threads(&c, n);
        let auto = ra[0].halo_auto.clone().expect("auto records its choice");
        let what = format!("{n} ranks, {local}: {auto:?}");
        assert!(auto.reason.is_none(), "{what}");
        assert!(candidates.contains(&auto.chosen), "{what}");
        assert!(auto.candidates.len() >= 2, "{what}");
        assert_eq!(auto.candidates[0].k, 1, "{what}");
        for p in &auto.candidates {
            assert!(p.iteration_s > 0.0 && p.sweeps >= PROBE_SWEEPS, "{what}");
            assert!(p.work >= 1.0, "{what}");
        }
        for r in &ra {
            // The same values and choice on every rank; the probe's own time is each
            // rank's.
            let mut a = r.halo_auto.clone().expect("every rank records it");
            a.probe_s = auto.probe_s;
            assert_eq!(a, auto, "{what}: rank {}", r.rank);
        }
        let run_with = |k: u64| {
            let mut d = c.clone();
            d.method.jacobi_mut().unwrap().halo_depth = HaloDepth::Fixed(k);
            run_threads(&d, n)
        };
        for k in [1, auto.chosen] {
            let (rk, sk, _) = run_with(k);
            assert_eq!(rk[0].halo_auto, None);
            for (a, b) in ra.iter().zip(&rk) {
                assert_eq!(a.iterations, b.iterations, "{what}, k {k}");
                assert_eq!(
                    history_bits(a),
                    history_bits(b),
                    "{what}, k {k}: residual history"
                );
            }
            assert!(
                sa.iter().zip(&sk).all(|(x, y)| x.to_bits() == y.to_bits()),
                "{what}, k {k}: the solution"
            );
        }
    }
}

/// `auto` takes k = 1, saying why, where a probe of the cost per iteration cannot
/// choose: async and racy (their iterates depend on k), the sync variant with an
/// exchange of its own, and where no deeper k fits the check period.
#[test]
fn auto_takes_one_where_it_cannot_measure() {
    let base = |f: fn(&mut Config)| {
        let mut c = cfg(Dims::cube(1), Variant::Sync);
        c.size = SizeSpec::Local(Dims::new(7, 6, 5));
        c.method.jacobi_mut().unwrap().halo_depth = HaloDepth::Auto;
        f(&mut c);
        c
    };
    let cases: [(Config, &str); 4] = [
        (
            base(|c| c.method.iteration_mut().unwrap().variant = Variant::Async),
            "async and racy",
        ),
        (
            base(|c| c.method.iteration_mut().unwrap().variant = Variant::Racy),
            "async and racy",
        ),
        (
            base(|c| c.method.jacobi_mut().unwrap().exchange = crate::Exchange::Blocking),
            "not the blocking, overlapped or neighbourhood one",
        ),
        // 11 divides K but does not fit in the 7 points along the split x.
        (base(|c| c.check_every = 11), "no depth above 1"),
    ];
    for (c, why) in cases {
        let (recs, _, _) = run_threads(&c, 2);
        for r in &recs {
            let a = r.halo_auto.as_ref().expect("auto records its choice");
            assert_eq!(a.chosen, 1, "{why}");
            assert!(a.candidates.is_empty(), "{why}");
            let reason = a.reason.as_deref().unwrap_or_default();
            assert!(reason.contains(why), "{reason}");
            assert!(r.converged, "{why}");
        }
    }
}

/// What the deep exchange cannot do is refused, naming the setting.
#[test]
fn unsupported_combinations_are_refused() {
    let base = |f: fn(&mut Jacobi)| {
        let mut j = Jacobi {
            halo_depth: HaloDepth::Fixed(2),
            ..Jacobi::default()
        };
        f(&mut j);
        Config {
            method: j.into(),
            ..Config::default()
        }
    };
    let err = |c: Config| c.validate().unwrap_err().to_string();
    assert!(err(base(|j| j.halo_depth = HaloDepth::Fixed(0))).contains("the halo depth k"));
    assert!(err(base(|j| j.halo_depth = HaloDepth::Fixed(17))).contains("the halo depth k"));
    assert!(err(Config {
        check_every: 5,
        ..base(|_| {})
    })
    .contains("the halo depth k 2 needs the check period K to be a multiple of 2"));
    assert!(err(base(|j| j.iteration.halo_every = 2)).contains("the halo period N 1, got 2"));
    assert!(err(base(|j| j.exchange = crate::Exchange::Overlap))
        .contains("does not combine with the halo exchange overlap"));
    // The other methods have no deep halo: the flag is refused for them.
    let flags = crate::legacy::FlatMethod {
        halo_depth: HaloDepth::Fixed(2),
        ..Default::default()
    };
    let from = |solver| flags.method(solver).unwrap_err().to_string();
    assert!(from(crate::Solver::Cg).contains("applies to the solver jacobi, not to the solver cg"));
    // The deep loop sweeps: multisplit's inner solve has no deep form.
    for variant in [Variant::Sync, Variant::Async] {
        let flags = crate::legacy::FlatMethod { variant, ..flags };
        let e = flags.method(crate::Solver::Multisplit).unwrap_err();
        assert!(
            e.to_string().contains("not to the solver multisplit"),
            "{e}"
        );
    }
    assert!(Config {
        check_every: 5,
        ..base(|j| {
            j.iteration.variant = Variant::Racy;
            j.iteration.halo_every = 3;
        })
    }
    .validate()
    .is_ok());
    // A ghost zone deeper than the neighbour's block.
    let deep = Config {
        size: SizeSpec::Local(Dims::new(3, 8, 8)),
        ..base(|j| j.halo_depth = HaloDepth::Fixed(4))
    };
    let e = deep.plan(2).unwrap_err().to_string();
    assert!(
        e.contains("the halo depth k 4") && e.contains("along x"),
        "{e}"
    );
    assert!(deep.plan(1).is_ok());
}
