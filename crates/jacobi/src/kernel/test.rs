//! The kernels against their reference forms and against each other.

use super::*;
use crate::tests::common::noise;

/// Recursive summation of n non-negative terms has relative error at most (n−1)·ε
/// (Higham, *Accuracy and Stability of Numerical Algorithms*, §4.2), so two orders differ
/// by at most 2(n−1)ε relative. The terms r² themselves are computed identically.
fn sum_bound(n: usize) -> f64 {
    2.0 * n as f64 * f64::EPSILON
}

fn shapes() -> Vec<Shape> {
    [
        Dims::new(1, 1, 1),
        Dims::new(7, 3, 2),
        Dims::new(8, 8, 8),
        Dims::new(17, 11, 9),
        Dims::new(50, 50, 5),
        Dims::new(3, 20, 4),
    ]
    .into_iter()
    .map(Shape::new)
    .collect()
}

#[test]
fn a_step_is_the_fused_sweep_without_the_residual() {
    for (k, sh) in shapes().into_iter().enumerate() {
        let src = noise(sh.len, k as u64 + 11);
        let f = noise(sh.len, k as u64 + 12);
        for rhs in [None, Some(&f[..])] {
            let mut a = noise(sh.len, 98);
            let (mut b, mut c) = (a.clone(), a.clone());
            sweep(&sh, &src, rhs, &mut a);
            step(&sh, &src, rhs, &mut b);
            assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()));
            // By regions, and on the portable build.
            let half = Region {
                x: 1..sh.n.x + 1,
                y: 1..sh.n.y / 2 + 1,
                z: 1..sh.n.z + 1,
            };
            let rest = Region {
                y: sh.n.y / 2 + 1..sh.n.y + 1,
                ..half.clone()
            };
            // Plane by plane into a destination that holds only the planes.
            let mut d = noise(sh.len, 98);
            for z in 1..sh.n.z + 1 {
                let planes = sh.planes(z..z + 1);
                step_planes(&sh, &src, rhs, &mut d[planes], z..z + 1);
            }
            assert!(a.iter().zip(&d).all(|(x, y)| x.to_bits() == y.to_bits()));
            step_region(&sh, &src, rhs, &mut c, &half);
            let mut l = Lanes::default();
            portable_build::<true, false>(Sweep::new(&sh, &src, rhs, &rest), &mut c, &mut l);
            assert_eq!(l, Lanes::default(), "no residual accumulated");
            assert!(a.iter().zip(&c).all(|(x, y)| x.to_bits() == y.to_bits()));
        }
    }
}

#[test]
fn fused_equals_reference() {
    for (k, sh) in shapes().into_iter().enumerate() {
        let src = noise(sh.len, k as u64 + 1);
        let mut a = noise(sh.len, 99);
        let mut b = a.clone();
        let ra = sweep(&sh, &src, None, &mut a);
        let rb = sweep_reference(&sh, &src, None, &mut b);
        // Same operations in the same order per point: the updates are bit-identical,
        // and points the sweep does not own are untouched.
        assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()));
        let n = sh.n.volume();
        assert!(
            (ra - rb).abs() <= sum_bound(n) * rb,
            "{sh:?}: fused {ra} vs reference {rb}"
        );
        let rr = residual_sq(&sh, &src, None);
        assert!((rr - ra).abs() <= sum_bound(n) * rb, "residual alone {rr}");
        let rref = residual_sq_reference(&sh, &src, None);
        assert_eq!(rref.to_bits(), rb.to_bits());
    }
}

#[test]
fn fused_equals_reference_with_a_source_term() {
    for (k, sh) in shapes().into_iter().enumerate() {
        let src = noise(sh.len, k as u64 + 11);
        let f: Vec<f64> = noise(sh.len, k as u64 + 12)
            .iter()
            .map(|v| v - 0.5)
            .collect();
        let mut a = vec![0.0; sh.len];
        let mut b = a.clone();
        let ra = sweep(&sh, &src, Some(&f), &mut a);
        let rb = sweep_reference(&sh, &src, Some(&f), &mut b);
        assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()));
        assert!((ra - rb).abs() <= sum_bound(sh.n.volume()) * rb);
        // The source term changes the update: it is not silently ignored.
        let mut c = vec![0.0; sh.len];
        sweep(&sh, &src, None, &mut c);
        assert_ne!(a, c);
        let rr = residual_sq(&sh, &src, Some(&f));
        assert_eq!(
            residual_sq_reference(&sh, &src, Some(&f)).to_bits(),
            rb.to_bits()
        );
        assert!((rr - rb).abs() <= sum_bound(sh.n.volume()) * rb);
    }
}

/// The interior and the boundary shell of a block (the overlapped exchange's two sweeps)
/// give the whole-block update bit for bit, and a residual within the summation bound.
#[test]
fn regions_partition_the_sweep() {
    for (k, sh) in shapes().into_iter().enumerate() {
        let n = sh.n;
        let src = noise(sh.len, k as u64 + 21);
        let f = noise(sh.len, k as u64 + 22);
        let mut whole = vec![0.0; sh.len];
        let rw = sweep(&sh, &src, Some(&f), &mut whole);
        // Shell of width 1 on the low x, high y and both z sides, as for a block with
        // neighbours there; the rest is the interior.
        let inner = Region {
            x: 2.min(n.x + 1)..n.x + 1,
            y: 1..n.y.max(1),
            z: 2.min(n.z + 1)..n.z.max(2),
        };
        let mut parts = vec![0.0; sh.len];
        let mut sum = 0.0;
        let mut covered = 0;
        let zs = [
            1..inner.z.start,
            inner.z.clone(),
            inner.z.end.max(inner.z.start)..n.z + 1,
        ];
        for (zi, z) in zs.into_iter().enumerate() {
            let boxes = if zi == 1 {
                vec![
                    Region {
                        x: 1..inner.x.start,
                        y: 1..n.y + 1,
                        z: z.clone(),
                    },
                    Region {
                        x: inner.x.clone(),
                        y: inner.y.end..n.y + 1,
                        z: z.clone(),
                    },
                    Region {
                        x: inner.x.clone(),
                        y: inner.y.clone(),
                        z: z.clone(),
                    },
                ]
            } else {
                vec![Region::planes(n, z)]
            };
            for b in boxes {
                covered += b.volume();
                sum += sweep_region(&sh, &src, Some(&f), &mut parts, &b);
            }
        }
        assert_eq!(
            covered,
            n.volume(),
            "{n:?}: the regions cover the block once"
        );
        assert!(
            whole
                .iter()
                .zip(&parts)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "{n:?}"
        );
        assert!((sum - rw).abs() <= sum_bound(n.volume()) * rw);
    }
}

#[test]
fn the_generic_path_matches_the_dispatched_one() {
    // On an AVX2 machine `sweep` runs the AVX2 build; the portable build must give the
    // same bits (same operations, same accumulation order).
    for (k, sh) in shapes().into_iter().enumerate() {
        let src = noise(sh.len, k as u64 + 7);
        let mut a = vec![0.0; sh.len];
        let mut b = vec![0.0; sh.len];
        let zs = sh.owned_planes();
        let all = Region::all(sh.n);
        let ra = sweep(&sh, &src, None, &mut a);
        // Plane by plane, the planes' totals summed in z order (module docs).
        let port = |upd: bool, f: &[f64], dst: &mut [f64], reg: &Region| {
            let mut sum = 0.0;
            for z in reg.z.clone() {
                let plane = Region {
                    z: z..z + 1,
                    ..reg.clone()
                };
                let mut l = Lanes::default();
                let sweep = Sweep::new(&sh, &src, (!f.is_empty()).then_some(f), &plane);
                match upd {
                    true => portable_build::<true, true>(sweep, dst, &mut l),
                    false => portable_build::<false, true>(sweep, dst, &mut l),
                }
                sum += l.total();
            }
            sum
        };
        let rb = port(true, &[], &mut b, &all);
        assert_eq!(a, b);
        assert_eq!(ra.to_bits(), rb.to_bits());
        let rc = port(false, &[], &mut [], &all);
        assert_eq!(rb.to_bits(), rc.to_bits());
        assert_eq!(residual_sq(&sh, &src, None).to_bits(), rc.to_bits());
        // With a source term, on a region that is not row-aligned.
        let f = noise(sh.len, k as u64 + 8);
        let reg = Region {
            x: 1.min(sh.n.x)..sh.n.x + 1,
            y: 1..sh.n.y + 1,
            z: zs,
        };
        let (mut c, mut d) = (vec![0.0; sh.len], vec![0.0; sh.len]);
        let rc = sweep_region(&sh, &src, Some(&f), &mut c, &reg);
        let rd = port(true, &f, &mut d, &reg);
        assert_eq!(c, d);
        assert_eq!(rc.to_bits(), rd.to_bits());
    }
}

/// A region swept with its rows extended along x computes the extension's points as a
/// region of their own does, and the region's own points and r² as without the
/// extension, bit for bit, on the dispatched (AVX2) and the portable build, for every
/// extension width 0 to 5 below and above (masked and whole chunks), with and without a
/// source term.
#[test]
fn an_x_extension_is_swept_as_its_own_region() {
    for (k, sh) in shapes().into_iter().enumerate() {
        let n = sh.n;
        let src = noise(sh.len, k as u64 + 31);
        let f = noise(sh.len, k as u64 + 32);
        for lo in 0..=5usize.min(n.x - 1) {
            for hi in 0..=5usize.min(n.x - 1 - lo) {
                let own = Region {
                    x: 1 + lo..n.x + 1 - hi,
                    y: 1..n.y + 1,
                    z: 1..n.z + 1,
                };
                for rhs in [None, Some(&f[..])] {
                    let what = format!("{n:?} ext [{lo}, {hi}] rhs {}", rhs.is_some());
                    // The statement: three regions, the extensions updated only.
                    let mut want = noise(sh.len, 99);
                    let mut lw = Lanes::default();
                    sweep_region_into(&sh, &src, rhs, &mut want, &own, &mut lw);
                    for x in [1..1 + lo, n.x + 1 - hi..n.x + 1] {
                        step_region(&sh, &src, rhs, &mut want, &Region { x, ..own.clone() });
                    }
                    let mut got = noise(sh.len, 99);
                    let mut lg = Lanes::default();
                    sweep_region_ext_x_into(&sh, &src, rhs, &mut got, &own, [lo, hi], &mut lg);
                    let same =
                        |v: &[f64]| v.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same(&got), "{what}");
                    assert_eq!(lg, lw, "{what}: r² lanes");
                    let mut port = noise(sh.len, 99);
                    let mut lp = Lanes::default();
                    let sweep = Sweep::new(&sh, &src, rhs, &own);
                    portable_build::<true, true>(
                        Sweep {
                            ext: [lo, hi],
                            ..sweep
                        },
                        &mut port,
                        &mut lp,
                    );
                    assert!(same(&port), "{what}: portable");
                    assert_eq!(lp, lw, "{what}: portable r² lanes");
                }
            }
        }
    }
}

#[test]
fn planes_split_the_sweep() {
    let sh = Shape::new(Dims::new(9, 6, 7));
    let src = noise(sh.len, 3);
    let mut whole = vec![0.0; sh.len];
    let r = sweep(&sh, &src, None, &mut whole);
    let mut parts = vec![0.0; sh.len];
    let mut sum = 0.0;
    for zs in [1..3, 3..4, 4..8] {
        let range = sh.planes(zs.clone());
        sum += sweep_planes(&sh, &src, None, &mut parts[range], zs);
    }
    assert_eq!(whole, parts);
    assert!((sum - r).abs() <= sum_bound(sh.n.volume()) * r);
    // Each plane's total kept apart and the totals added in z order: the bits of the
    // whole sweep (what a rank's workers do), for the sweep and the residual alone.
    let mut per_plane = 0.0;
    let mut resid = 0.0;
    for z in sh.owned_planes() {
        let range = sh.planes(z..z + 1);
        per_plane += sweep_planes(&sh, &src, None, &mut parts[range], z..z + 1);
        resid += residual_sq_planes(&sh, &src, None, z..z + 1);
    }
    assert_eq!(per_plane.to_bits(), r.to_bits());
    assert_eq!(resid.to_bits(), residual_sq(&sh, &src, None).to_bits());
    assert_eq!(sweep_planes(&sh, &src, None, &mut [], 3..3), 0.0);
}

#[test]
fn paper_structure_matches() {
    let sh = Shape::new(Dims::new(6, 5, 4));
    let mut u = noise(sh.len, 5);
    let mut unew = u.clone();
    let mut fused = vec![0.0; sh.len];
    let rf = sweep(&sh, &u, None, &mut fused);
    let rp = sweep_then_copy(&sh, &mut u, None, &mut unew);
    assert!((rf - rp).abs() <= sum_bound(sh.n.volume()) * rp);
    for z in 1..=4 {
        for y in 1..=5 {
            for x in 1..=6 {
                let i = sh.index(x, y, z);
                assert_eq!(u[i], fused[i]);
            }
        }
    }
}

#[test]
fn residual_is_b_minus_a_u() {
    // One interior point: r = (sum of the six halo values) − 6u.
    let sh = Shape::new(Dims::cube(1));
    let mut u = vec![0.0; sh.len];
    let c = sh.index(1, 1, 1);
    u[c] = 2.0;
    for (k, d) in [1, sh.sx, sh.plane].into_iter().enumerate() {
        u[c - d] = k as f64;
        u[c + d] = 1.0;
    }
    let s = 0.0 + 1.0 + 1.0 + 1.0 + 2.0 + 1.0;
    assert_eq!(residual_sq(&sh, &u, None), (s - 12.0) * (s - 12.0));
    let mut out = vec![0.0; sh.len];
    sweep(&sh, &u, None, &mut out);
    assert_eq!(out[c], s * SIXTH);
}

#[test]
fn grids_align_every_row() {
    for n in [Dims::cube(50), Dims::new(7, 3, 2), Dims::new(1, 1, 1)] {
        let sh = Shape::new(n);
        assert_eq!(sh.sx % ROW_ALIGN, 0);
        assert!(sh.sx >= n.x + 2);
        for _ in 0..4 {
            let g = Grid::new(sh.len, 1.5);
            assert_eq!(g.len(), sh.len);
            assert!(g.iter().all(|&v| v == 1.5));
            for (y, z) in [(0, 0), (1, 1), (n.y, n.z + 1)] {
                let p = &g[sh.index(1, y, z)] as *const f64 as usize;
                assert_eq!(p % 32, 0, "row ({y}, {z}) of {n:?}");
            }
            let c = g.clone();
            assert_eq!(&c[..], &g[..]);
            assert_eq!(&c[1] as *const f64 as usize % 32, 0);
        }
    }
}

#[test]
#[should_panic(expected = "destination")]
fn wrong_destination_is_refused() {
    let sh = Shape::new(Dims::cube(3));
    let src = vec![0.0; sh.len];
    sweep_planes(&sh, &src, None, &mut [0.0; 4], 1..2);
}
