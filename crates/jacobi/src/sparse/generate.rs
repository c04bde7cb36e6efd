//! Generated sparse systems for tests and benchmarks: finite-difference operators on the unit
//! square and cube with Dirichlet boundaries (the boundary values moved to the right-hand
//! side), numbered lexicographically with x fastest.

use super::csr::Csr;

/// The 7-point operator of `aiac run`'s stencil on an `nx × ny × nz` grid: `6` on the
/// diagonal, `−1` for each neighbour inside the grid (the matrix the Jacobi and Krylov solvers
/// apply matrix-free, scaled by h²).
pub fn laplace_3d(nx: usize, ny: usize, nz: usize) -> Csr {
    let id = |x: usize, y: usize, z: usize| ((z * ny + y) * nx + x) as u32;
    let mut t = Vec::with_capacity(7 * nx * ny * nz);
    for z in 0..nz {
        for y in 0..ny {
            for x in 0..nx {
                let i = id(x, y, z);
                t.push((i, i, 6.0));
                let neighbours = [
                    (x > 0, [x.wrapping_sub(1), y, z]),
                    (x + 1 < nx, [x + 1, y, z]),
                    (y > 0, [x, y.wrapping_sub(1), z]),
                    (y + 1 < ny, [x, y + 1, z]),
                    (z > 0, [x, y, z.wrapping_sub(1)]),
                    (z + 1 < nz, [x, y, z + 1]),
                ];
                for (ok, [a, b, c]) in neighbours {
                    if ok {
                        t.push((i, id(a, b, c), -1.0));
                    }
                }
            }
        }
    }
    Csr::from_triplets(nx * ny * nz, t)
}

/// The anisotropic 5-point operator `−u_xx − ε u_yy` on an `n × n` grid (scaled by h²):
/// `2 + 2ε` on the diagonal, `−1` to the x neighbours, `−ε` to the y neighbours. Symmetric
/// positive definite; small ε makes Jacobi and unpreconditioned CG slow.
pub fn anisotropic_2d(n: usize, eps: f64) -> Csr {
    let id = |x: usize, y: usize| (y * n + x) as u32;
    let mut t = Vec::with_capacity(5 * n * n);
    for y in 0..n {
        for x in 0..n {
            let i = id(x, y);
            t.push((i, i, 2.0 + 2.0 * eps));
            if x > 0 {
                t.push((i, id(x - 1, y), -1.0));
            }
            if x + 1 < n {
                t.push((i, id(x + 1, y), -1.0));
            }
            if y > 0 {
                t.push((i, id(x, y - 1), -eps));
            }
            if y + 1 < n {
                t.push((i, id(x, y + 1), -eps));
            }
        }
    }
    Csr::from_triplets(n * n, t)
}

/// `−∇·(k ∇u)` on an `n³` grid with `k = contrast` in the central cube of half the width and
/// `k = 1` outside: the coefficient of the face between two points is the harmonic mean of
/// theirs (the usual finite-volume choice at a jump), the diagonal the sum of a point's six
/// face coefficients (a face on the boundary takes the point's own k). Symmetric positive
/// definite, with a condition number that grows with the contrast.
pub fn jump_3d(n: usize, contrast: f64) -> Csr {
    let inside = |c: usize| 4 * c + 2 >= n && 4 * c + 2 < 3 * n;
    let k = |x: usize, y: usize, z: usize| {
        if inside(x) && inside(y) && inside(z) {
            contrast
        } else {
            1.0
        }
    };
    let face = |a: f64, b: f64| 2.0 * a * b / (a + b);
    let id = |x: usize, y: usize, z: usize| ((z * n + y) * n + x) as u32;
    let mut t = Vec::with_capacity(7 * n * n * n);
    for z in 0..n {
        for y in 0..n {
            for x in 0..n {
                let (i, ki) = (id(x, y, z), k(x, y, z));
                let mut diag = 0.0;
                let neighbours = [
                    (x > 0, [x.wrapping_sub(1), y, z]),
                    (x + 1 < n, [x + 1, y, z]),
                    (y > 0, [x, y.wrapping_sub(1), z]),
                    (y + 1 < n, [x, y + 1, z]),
                    (z > 0, [x, y, z.wrapping_sub(1)]),
                    (z + 1 < n, [x, y, z + 1]),
                ];
                for (ok, [a, b, c]) in neighbours {
                    if ok {
                        let f = face(ki, k(a, b, c));
                        t.push((i, id(a, b, c), -f));
                        diag += f;
                    } else {
                        diag += ki;
                    }
                }
                t.push((i, i, diag));
            }
        }
    }
    Csr::from_triplets(n * n * n, t)
}

/// Convection–diffusion `−Δu + β·∇u` with `β = (peclet, peclet/2)` on an `n × n` grid (scaled
/// by h², `peclet` the cell Péclet number βh), first-order upwind for the convection: not
/// symmetric, and for every `peclet ≥ 0` an M-matrix that is diagonally dominant, strictly in
/// the rows next to the boundary, so Jacobi converges, synchronous and asynchronous.
pub fn convection_diffusion_2d(n: usize, peclet: f64) -> Csr {
    assert!(
        peclet >= 0.0,
        "upwinding here assumes a flow towards +x and +y"
    );
    let (bx, by) = (peclet, peclet / 2.0);
    let id = |x: usize, y: usize| (y * n + x) as u32;
    let mut t = Vec::with_capacity(5 * n * n);
    for y in 0..n {
        for x in 0..n {
            let i = id(x, y);
            // Upwind: the flow comes from −x and −y, so those neighbours carry the convection.
            t.push((i, i, 4.0 + bx + by));
            if x > 0 {
                t.push((i, id(x - 1, y), -1.0 - bx));
            }
            if x + 1 < n {
                t.push((i, id(x + 1, y), -1.0));
            }
            if y > 0 {
                t.push((i, id(x, y - 1), -1.0 - by));
            }
            if y + 1 < n {
                t.push((i, id(x, y + 1), -1.0));
            }
        }
    }
    Csr::from_triplets(n * n, t)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Row sums: zero inside (a constant is in the kernel of the continuous operator), the
    /// boundary's share at the boundary.
    #[test]
    fn laplace_3d_is_the_stencil() {
        let a = laplace_3d(4, 3, 2);
        assert_eq!(a.n(), 24);
        assert!(a.is_symmetric());
        // Interior points of a 4×3×2 grid have 5 neighbours (z has two planes): 6 − 5.
        let mut y = vec![0.0; 24];
        a.mul(&[1.0; 24], &mut y);
        // Point (1, 1, 0): neighbours x±1, y±1, z+1.
        assert_eq!(y[4 + 1], 1.0);
        // Corner (0, 0, 0): three neighbours.
        assert_eq!(y[0], 3.0);
        assert_eq!(a.nnz(), 24 + 2 * (3 * 3 * 2 + 4 * 2 * 2 + 4 * 3));
    }

    #[test]
    fn generated_operators_have_their_properties() {
        let a = anisotropic_2d(6, 0.01);
        assert!(a.is_symmetric() && a.zero_diagonal().is_none());
        let j = jump_3d(6, 1000.0);
        assert!(j.is_symmetric());
        // Some faces cross the jump: their coefficient is the harmonic mean, about 2.
        let (_, vals) = j.row((2 * 6 + 2) * 6 + 1);
        assert!(vals
            .iter()
            .any(|&v| (v + 2.0 * 1000.0 / 1001.0).abs() < 1e-12));
        // Diagonally dominant (weakly; strictly at the boundary): a row sum is ≥ 0.
        let mut y = vec![0.0; 216];
        j.mul(&[1.0; 216], &mut y);
        assert!(y.iter().all(|&v| v >= -1e-9));
        let c = convection_diffusion_2d(6, 2.0);
        assert!(!c.is_symmetric());
        let mut y = vec![0.0; 36];
        c.mul(&[1.0; 36], &mut y);
        assert!(y.iter().all(|&v| v >= -1e-12), "{y:?}");
        assert!(y[0] > 0.0);
    }
}
