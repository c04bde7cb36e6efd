//! The grid's 7-point operator for the Krylov solvers, and their run on a grid block.

use super::{solve_op, Operator, Part, Pipe};
use crate::config::Config;
use crate::field::Field;
use crate::geometry::{Dims, Face, Plan};
use crate::halo::{self, Halo};
use crate::kernel::{Region, Shape};
use crate::linalg::{self, CgVectors, PipeVectors, Vector};
use crate::method::Krylov as Settings;
use crate::precond::LocalCsr;
use crate::progress::Progress;
use crate::record::RankRecord;
use crate::solver::Block;
use crate::Error;
use chan_core::traits::*;
use chan_core::ChannelSpec;

/// Run the configured Krylov solver on this rank (collective), from `start` when given (x₀): its record and final iterate,
/// on the operator with diagonal `diag` (6 for the Laplacian; the crate's tests shift it to make the problem
/// indefinite).
pub(crate) fn solve_rank<C: Context>(
    ctx: &mut C,
    cfg: &Config,
    settings: &Settings,
    plan: &Plan,
    progress: Option<&dyn Progress>,
    diag: f64,
    start: Option<&[f64]>,
) -> Result<(RankRecord, Field), Error> {
    let mut block = Block::of_rank(ctx, cfg, plan)?;
    // A given start: x₀ (r₀ = b − A x₀).
    if let Some(x) = start {
        crate::iterate::Iterate::start_from(&mut block.field, x)?;
    }
    let op = GridOp {
        shape: *block.field.shape(),
        diag,
        interior: block.interior,
        shell: block.shell,
        faces: block.faces,
        field: block.field,
    };
    // The record's error_max left the final iterate in the field.
    let (record, _, op) = solve_op(ctx, cfg, settings, op, progress)?;
    Ok((record, op.field))
}

/// The grid's operator `A = diag·I − adjacency` (the 7-point stencil) on a block: its
/// vectors are arrays of the block's shape with a one-cell halo, `b` is the problem's `h² f`
/// plus the Dirichlet values the starting iterate's halo holds.
pub(crate) struct GridOp {
    shape: Shape,
    diag: f64,
    /// The points of the block whose product reads no neighbour's halo, and the rest.
    interior: Region,
    shell: Vec<Region>,
    /// Faces with a neighbour; channel k serves `faces[k]`.
    faces: Vec<Face>,
    /// The starting iterate (its halo holds the Dirichlet values) and the problem's `h² f`.
    field: Field,
}

impl Operator for GridOp {
    type Link = Face;
    type Vector = Vector;
    fn links(&self) -> &[Face] {
        &self.faces
    }
    fn specs(&self) -> Result<Vec<ChannelSpec>, Error> {
        halo::specs(&self.field, &self.faces, 0, 1, 0)
    }
    fn zeros(&self) -> Vector {
        Vector::zeros(&self.shape)
    }
    fn inv_diag(&self) -> Vector {
        Vector::filled(&self.shape, 1.0 / self.diag)
    }
    fn x0(&self) -> Vector {
        let mut x = Vector::zeros(&self.shape);
        x.v.copy_from_slice(self.field.iterate());
        x
    }
    /// b: the residual of x = 0 with the Dirichlet values in the halo (and nothing from the
    /// neighbours: their faces are interior points, zero too).
    fn b_sq(&self, (zero, r): (&mut Vector, &mut Vector)) -> f64 {
        let shape = self.shape;
        zero.v.copy_from_slice(self.field.iterate());
        for (z, y) in (1..=shape.n.z).flat_map(|z| (1..=shape.n.y).map(move |y| (z, y))) {
            let b = shape.index(1, y, z);
            zero.v[b..b + shape.n.x].fill(0.0);
        }
        for &f in &self.faces {
            let nothing = vec![0.0; self.field.face_len(f)];
            zero.unpack(f, &nothing);
        }
        linalg::residual(&shape, self.diag, &zero.v, self.field.rhs(), &mut r.v, None)[0]
    }
    /// The interior's planes.
    fn interior_parts(&self) -> usize {
        self.interior.z.len()
    }
    fn apply(&self, src: &Vector, dst: &mut Vector, part: Part) -> f64 {
        let (shape, diag) = (&self.shape, self.diag);
        match part {
            Part::All => linalg::apply(shape, diag, &src.v, &mut dst.v, &Region::all(shape.n)),
            Part::Interior(k) => {
                let z = self.interior.z.start + k;
                let plane = Region {
                    z: z..z + 1,
                    ..self.interior.clone()
                };
                linalg::apply(shape, diag, &src.v, &mut dst.v, &plane)
            }
            Part::Shell => self
                .shell
                .iter()
                .map(|reg| linalg::apply(shape, diag, &src.v, &mut dst.v, reg))
                .sum(),
        }
    }
    fn residual(&self, x: &Vector, r: &mut Vector, rec: Option<&Vector>) -> [f64; 2] {
        let rec = rec.map(|v| &v.v[..]);
        linalg::residual(
            &self.shape,
            self.diag,
            &x.v,
            self.field.rhs(),
            &mut r.v,
            rec,
        )
    }
    fn dot(&self, a: &Vector, b: &Vector) -> f64 {
        linalg::dot(&self.shape, &a.v, &b.v)
    }
    fn dot3(&self, a: &Vector, d: &Vector, b: &Vector) -> f64 {
        linalg::dot3(&self.shape, &a.v, &d.v, &b.v)
    }
    fn scale(&self, d: &Vector, src: &Vector, dst: &mut Vector) -> f64 {
        linalg::scale(&self.shape, &d.v, &src.v, &mut dst.v)
    }
    fn direction(&self, z: &Vector, beta: f64, p: &mut Vector) {
        linalg::direction(&self.shape, &z.v, beta, &mut p.v);
    }
    fn cg_update(
        &self,
        alpha: f64,
        x: &mut Vector,
        r: &mut Vector,
        (p, q): (&Vector, &Vector),
        pc: Option<(&Vector, &mut Vector)>,
    ) -> [f64; 2] {
        linalg::cg_update(
            &self.shape,
            alpha,
            CgVectors {
                x: &mut x.v,
                r: &mut r.v,
                p: &p.v,
                q: &q.v,
                pc: pc.map(|(d, z)| (&d.v[..], &mut z.v[..])),
            },
        )
    }
    fn pipe_update(&self, alpha: f64, beta: f64, x: &mut Vector, v: &mut Pipe<Vector>) -> [f64; 3] {
        let vectors = PipeVectors {
            x: &mut x.v,
            r: &mut v.r.v,
            w: &mut v.w.v,
            n: &v.n.v,
            z: &mut v.z.v,
            s: &mut v.s.v,
            p: &mut v.p.v,
            pc: v.pc.as_mut().map(|pm| (&pm.d.v[..], &mut pm.m.v[..])),
        };
        linalg::pipe_update(&self.shape, alpha, beta, vectors)
    }
    fn place(&self) -> ([usize; 3], Dims) {
        let g = self.field.geometry();
        (g.coords, g.local)
    }
    fn runs(&self) -> Vec<(usize, usize)> {
        linalg::rows(&self.shape).collect()
    }
    fn data<'v>(&self, v: &'v Vector) -> &'v [f64] {
        &v.v
    }
    fn data_mut<'v>(&self, v: &'v mut Vector) -> &'v mut [f64] {
        &mut v.v
    }
    /// The 7-point operator restricted to the block: `diag` on the diagonal, −1 to each
    /// owned neighbour.
    fn local_block(&self) -> LocalCsr {
        let n = self.shape.n;
        let at = |x: usize, y: usize, z: usize| x + n.x * (y + n.y * z);
        let mut a = LocalCsr::with_rows(n.x * n.y * n.z);
        for z in 0..n.z {
            for y in 0..n.y {
                for x in 0..n.x {
                    // Columns ascending: z − 1, y − 1, x − 1, the point, x + 1, y + 1, z + 1.
                    if z > 0 {
                        a.push(at(x, y, z - 1), -1.0);
                    }
                    if y > 0 {
                        a.push(at(x, y - 1, z), -1.0);
                    }
                    if x > 0 {
                        a.push(at(x - 1, y, z), -1.0);
                    }
                    a.push(at(x, y, z), self.diag);
                    if x + 1 < n.x {
                        a.push(at(x + 1, y, z), -1.0);
                    }
                    if y + 1 < n.y {
                        a.push(at(x, y + 1, z), -1.0);
                    }
                    if z + 1 < n.z {
                        a.push(at(x, y, z + 1), -1.0);
                    }
                    a.end_row();
                }
            }
        }
        a
    }
    /// (Leaves `x` in the field: the final iterate.)
    fn error_max(&mut self, x: &Vector, cfg: &Config) -> Option<f64> {
        self.field.iterate_mut().copy_from_slice(&x.v);
        self.field.error_max(&cfg.problem)
    }
}
