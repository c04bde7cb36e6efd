use super::*;
use crate::geometry::Dims;
use crate::tests::common::noise;

/// The operator against the obvious loop, on blocks whose rows have tails.
#[test]
fn apply_is_diag_minus_adjacency() {
    for n in [Dims::new(1, 1, 1), Dims::new(7, 3, 2), Dims::new(9, 5, 6)] {
        let sh = Shape::new(n);
        let p = noise(sh.len, 3);
        let mut y = vec![0.0; sh.len];
        let pap = apply(&sh, 6.0, &p, &mut y, &Region::all(n));
        let mut want = 0.0;
        for z in 1..=n.z {
            for yy in 1..=n.y {
                for x in 1..=n.x {
                    let i = sh.index(x, yy, z);
                    let s = p[i - 1]
                        + p[i + 1]
                        + p[i - sh.sx]
                        + p[i + sh.sx]
                        + p[i - sh.plane]
                        + p[i + sh.plane];
                    assert_eq!(y[i], 6.0 * p[i] - s);
                    want += p[i] * y[i];
                }
            }
        }
        assert!((pap - want).abs() <= 1e-12 * want.abs().max(1.0));
        // b − A u with no source: the negated operator.
        let mut r = vec![0.0; sh.len];
        let [rr, gap] = residual(&sh, 6.0, &p, None, &mut r, Some(&y));
        for (a, b) in r.iter().zip(&y) {
            assert!(*a == -*b || (*a == 0.0 && *b == 0.0));
        }
        assert!((gap - 4.0 * rr).abs() <= 1e-12 * rr.max(1.0));
    }
}

/// The AVX2 kernels give the portable bodies' bits: same values, same dot products, on
/// blocks whose rows have no tail, a tail, and only a tail; with and without a source
/// term and a recorded residual. (Where the CPU lacks AVX2 both sides are portable.)
#[test]
fn avx2_kernels_match_the_portable_ones() {
    if !std::is_x86_feature_detected!("avx2") {
        return;
    }
    for n in [Dims::new(8, 3, 2), Dims::new(9, 5, 6), Dims::new(3, 4, 2)] {
        let sh = Shape::new(n);
        let (a, b, c, d) = (
            noise(sh.len, 1),
            noise(sh.len, 2),
            noise(sh.len, 3),
            noise(sh.len, 4),
        );
        let part = Region {
            x: 2..n.x + 1,
            y: 1..n.y,
            z: 1..n.z + 1,
        };
        for region in [Region::all(n), part] {
            let (mut y1, mut y2) = (vec![0.0; sh.len], vec![0.0; sh.len]);
            // SAFETY: AVX2 was detected above.
            let fast = unsafe { avx2::apply(&sh, 6.0, &a, &mut y1, &region) };
            let slow = apply_body(&sh, 6.0, &a, &mut y2, &region);
            assert_eq!((fast.to_bits(), &y1), (slow.to_bits(), &y2), "apply {n:?}");
        }
        for (rhs, rec) in [(None, None), (Some(&b[..]), Some(&c[..]))] {
            let (mut r1, mut r2) = (vec![0.0; sh.len], vec![0.0; sh.len]);
            // SAFETY: AVX2 was detected above.
            let fast = unsafe { avx2::residual(&sh, 6.0, &a, rhs, &mut r1, rec) };
            let slow = residual_body(&sh, 6.0, &a, rhs, &mut r2, rec);
            assert_eq!((fast.map(f64::to_bits), &r1), (slow.map(f64::to_bits), &r2));
        }
        let (mut p1, mut p2) = (b.clone(), b.clone());
        // SAFETY: AVX2 was detected above.
        unsafe { avx2::direction_planes(&sh, 1..n.z + 1, &a, 0.7, &mut p1) };
        for (bb, m) in rows(&sh) {
            for i in bb..bb + m {
                p2[i] = a[i] + 0.7 * p2[i];
            }
        }
        assert_eq!(p1, p2, "direction {n:?}");
        let (mut p1, mut y1, mut p2, mut y2) = (b.clone(), c.clone(), b.clone(), c.clone());
        // SAFETY: AVX2 was detected above.
        let fast = unsafe { avx2::direction_apply(&sh, 6.0, &a, 0.7, &mut p1, &mut y1) };
        let slow = direction_apply_body(&sh, 6.0, &a, 0.7, &mut p2, &mut y2);
        assert_eq!((fast.to_bits(), &p1, &y1), (slow.to_bits(), &p2, &y2));
        let (mut x1, mut r1, mut x2, mut r2) = (a.clone(), b.clone(), a.clone(), b.clone());
        // SAFETY: AVX2 was detected above.
        let fast = unsafe { avx2::update(&sh, 0.3, 1.0, &mut x1, &mut r1, &c, &d) };
        let slow = update_body(&sh, 0.3, 1.0, &mut x2, &mut r2, &c, &d);
        assert_eq!((fast.to_bits(), &x1, &r1), (slow.to_bits(), &x2, &r2));
        // κ = 1 is CG's `x += α p` to the bit.
        for (bb, m) in rows(&sh) {
            for i in bb..bb + m {
                assert_eq!(x1[i], a[i] + 0.3 * c[i]);
            }
        }
        let mut one = [
            a.clone(),
            b.clone(),
            c.clone(),
            d.clone(),
            a.clone(),
            b.clone(),
        ];
        let mut two = one.clone();
        let pipe = |v: &mut [Vec<f64>; 6], fast: bool| {
            let [x, r, w, z, s, p] = v;
            let v = PipeVectors {
                x,
                r,
                w,
                n: &d,
                z,
                s,
                p,
                pc: None,
            };
            if fast {
                // SAFETY: AVX2 was detected above.
                unsafe { avx2::pipe_update(&sh, 0.3, 0.6, v) }
            } else {
                pipe_update_body(&sh, 0.3, 0.6, v)
            }
        };
        let (fast, slow) = (pipe(&mut one, true), pipe(&mut two, false));
        assert_eq!(
            (fast.map(f64::to_bits), &one),
            (slow.map(f64::to_bits), &two)
        );
    }
}

/// The kernels' single-precision form (`single.rs`): the AVX2 kernels give the portable
/// bodies' bits, on rows with no tail, a tail, and only a tail.
#[test]
fn avx2_kernels_match_the_portable_ones_in_single_precision() {
    if !std::is_x86_feature_detected!("avx2") {
        return;
    }
    let noise32 =
        |len, seed| -> Vec<f32> { noise(len, seed).into_iter().map(|v| v as f32).collect() };
    for n in [Dims::new(16, 3, 2), Dims::new(19, 5, 6), Dims::new(5, 4, 3)] {
        let sh = Shape::new(n);
        let u = noise(sh.len, 1);
        let f = noise(sh.len, 2);
        for rhs in [None, Some(&f[..])] {
            let (mut r1, mut r2) = (vec![0.0f32; sh.len], vec![0.0f32; sh.len]);
            // SAFETY: AVX2 was detected above.
            let fast = unsafe { avx2::residual(&sh, 6.0, &u, rhs, &mut r1, None) };
            let slow = residual_body(&sh, 6.0, &u, rhs, &mut r2, None);
            assert_eq!(
                (fast.map(f64::to_bits), &r1),
                (slow.map(f64::to_bits), &r2),
                "residual {n:?}"
            );
        }
        let r = noise32(sh.len, 3);
        let mut p0 = noise32(sh.len, 4);
        for (x, owned) in p0.iter_mut().zip(owned(&sh)) {
            if !owned {
                *x = 0.0;
            }
        }
        let (mut p1, mut q1) = (p0.clone(), vec![0.0f32; sh.len]);
        let (mut p2, mut q2) = (p0.clone(), vec![0.0f32; sh.len]);
        // SAFETY: AVX2 was detected above.
        let fast = unsafe { avx2::direction_apply(&sh, 6.0, &r, 0.3, &mut p1, &mut q1) };
        let slow = direction_apply_body(&sh, 6.0, &r, 0.3, &mut p2, &mut q2);
        assert_eq!(
            (fast.to_bits(), &p1, &q1),
            (slow.to_bits(), &p2, &q2),
            "{n:?}"
        );
        for keep in [0.0, 1.0] {
            let (mut d1, mut r1) = (noise32(sh.len, 5), noise32(sh.len, 6));
            let (mut d2, mut r2) = (d1.clone(), r1.clone());
            // SAFETY: AVX2 was detected above.
            let fast = unsafe { avx2::update(&sh, 0.7, keep, &mut d1, &mut r1, &p1, &q1) };
            let slow = update_body(&sh, 0.7, keep, &mut d2, &mut r2, &p1, &q1);
            assert_eq!(
                (fast.to_bits(), &d1, &r1),
                (slow.to_bits(), &d2, &r2),
                "{n:?}"
            );
        }
    }
}

/// Which points of the block's shape are owned (not halo or padding).
fn owned(sh: &Shape) -> Vec<bool> {
    let mut owned = vec![false; sh.len];
    for (b, m) in rows(sh) {
        owned[b..b + m].fill(true);
    }
    owned
}

/// The fused direction update and operator give the bits of the two done one after the
/// other, on blocks of one, two and six planes.
#[test]
fn direction_apply_is_direction_then_apply() {
    for n in [Dims::new(5, 3, 1), Dims::new(8, 3, 2), Dims::new(9, 5, 6)] {
        let sh = Shape::new(n);
        let (r, p0) = (noise(sh.len, 5), noise(sh.len, 6));
        let (mut p1, mut q1) = (p0.clone(), vec![0.0; sh.len]);
        let fused = direction_apply(&sh, 6.0, &r, 0.4, &mut p1, &mut q1);
        let (mut p2, mut q2) = (p0.clone(), vec![0.0; sh.len]);
        direction(&sh, &r, 0.4, &mut p2);
        let apart = apply(&sh, 6.0, &p2, &mut q2, &Region::all(n));
        assert_eq!(
            (fused.to_bits(), &p1, &q1),
            (apart.to_bits(), &p2, &q2),
            "{n:?}"
        );
    }
}
