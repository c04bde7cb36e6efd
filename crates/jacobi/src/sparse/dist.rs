//! One rank's block of rows of a distributed sparse matrix, and the ghost exchange it needs.
//!
//! Rank `p` owns the contiguous rows `bounds[p]..bounds[p + 1]` and the same entries of every
//! vector. Its rows reference columns of other ranks' rows: those values are **ghosts**, found
//! from the sparsity pattern at set-up and received every exchange from their owners. A
//! block's vector is extended: its own values `0..rows`, then the ghosts, grouped by owner
//! (in rank order) and by global column inside a group, so that each neighbour's message is one
//! contiguous run of the ghost part. The owner sends its values of those columns in the same
//! (increasing) order.
//!
//! Each row keeps its entries in the order of the global matrix (increasing global column),
//! only renumbered, so that a product sums in the order a serial product over the whole
//! matrix does: the same bits.
//!
//! The links say what each exchange carries: the values `q` needs from `p` (`p`'s send link to
//! `q`, `q`'s receive link from `p`). The solvers carry both directions between two blocks
//! on one channel (`iterate.rs`).

use super::csr::Csr;

/// The values one neighbour sends or receives in one exchange.
#[derive(Debug, Clone, PartialEq)]
pub struct Link {
    /// The other rank.
    pub peer: usize,
    /// Sending: the block's own rows whose values go out, in the message's order. Receiving:
    /// the ghost slots (indices into the extended vector) the message fills, in order.
    pub indices: Vec<u32>,
}

/// One rank's rows of a distributed sparse matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct RowBlock {
    /// The first global row.
    first: usize,
    /// Rows owned.
    rows: usize,
    ptr: Vec<usize>,
    /// Columns renumbered into the extended vector: `< rows` own, `≥ rows` ghosts.
    cols: Vec<u32>,
    vals: Vec<f64>,
    /// The global column of each ghost slot (`rows + g`).
    ghosts: Vec<usize>,
    /// Where the ghosts come from, one link per owner, in rank order.
    recv: Vec<Link>,
    /// Where this block's values go, one link per rank that needs some, in rank order.
    send: Vec<Link>,
}

/// The rank owning global row `row` of the partition `bounds`.
fn owner(bounds: &[usize], row: usize) -> usize {
    bounds.partition_point(|&b| b <= row) - 1
}

impl RowBlock {
    /// Rank `rank`'s block of `a` split by `bounds` (from [`super::row_blocks`]: `p + 1`
    /// increasing boundaries from 0 to the order), every rank building its own from the whole
    /// matrix (generated, or read by each).
    pub fn from_global(a: &Csr, bounds: &[usize], rank: usize) -> RowBlock {
        let (first, end) = (bounds[rank], bounds[rank + 1]);
        let own = |c: usize| (first..end).contains(&c);
        let base = a.row_ptr()[first];
        let ptr = a.row_ptr()[first..=end].iter().map(|&k| k - base).collect();
        let (mut cols, mut vals) = (Vec::new(), Vec::new());
        for i in first..end {
            let (c, v) = a.row(i);
            cols.extend_from_slice(c);
            vals.extend_from_slice(v);
        }
        // Every other rank's entries in this block's columns.
        let needed = (0..a.n()).filter(|&i| !own(i)).flat_map(|i| {
            a.row(i)
                .0
                .iter()
                .map(|&c| c as usize)
                .filter(|&c| own(c))
                .map(move |c| (i, c))
        });
        RowBlock::from_rows(bounds, rank, ptr, cols, vals, needed)
    }

    /// Rank `rank`'s block from its own rows alone: `ptr`, `cols` and `vals` hold rows
    /// `bounds[rank]..bounds[rank + 1]` in compressed form with **global** columns, each row
    /// sorted by column without duplicates; `needed` yields `(row, col)` for every entry of
    /// another rank's rows in this block's columns (in any order, repeats allowed): what the
    /// block sends. [`RowBlock::from_global`] is this with both taken from the whole matrix.
    pub(super) fn from_rows(
        bounds: &[usize],
        rank: usize,
        ptr: Vec<usize>,
        mut cols: Vec<u32>,
        vals: Vec<f64>,
        needed: impl IntoIterator<Item = (usize, usize)>,
    ) -> RowBlock {
        let (first, end) = (bounds[rank], bounds[rank + 1]);
        let rows = end - first;
        debug_assert_eq!(ptr.len(), rows + 1);
        debug_assert_eq!(ptr[rows], cols.len());
        let own = |c: usize| (first..end).contains(&c);
        // The ghosts: every column outside the block that its rows reference, by owner then
        // column (owners are contiguous ranges of columns, so sorting by column does both).
        let mut ghosts: Vec<usize> = cols
            .iter()
            .map(|&c| c as usize)
            .filter(|&c| !own(c))
            .collect();
        ghosts.sort_unstable();
        ghosts.dedup();
        for c in cols.iter_mut() {
            let g = *c as usize;
            *c = if own(g) {
                (g - first) as u32
            } else {
                let k = ghosts.binary_search(&g).expect("every ghost was collected");
                (rows + k) as u32
            };
        }
        let mut recv: Vec<Link> = Vec::new();
        for (g, &c) in ghosts.iter().enumerate() {
            let peer = owner(bounds, c);
            if recv.last().map(|l| l.peer) != Some(peer) {
                recv.push(Link {
                    peer,
                    indices: Vec::new(),
                });
            }
            recv.last_mut()
                .expect("pushed above")
                .indices
                .push((rows + g) as u32);
        }
        // What each other rank's rows reference of this block, in increasing column order.
        let mut want: Vec<Vec<u32>> = vec![Vec::new(); bounds.len() - 1];
        for (i, c) in needed {
            debug_assert!(!own(i) && own(c), "({i}, {c}) is not another rank's need");
            want[owner(bounds, i)].push((c - first) as u32);
        }
        let mut send = Vec::new();
        for (peer, mut indices) in want.into_iter().enumerate() {
            indices.sort_unstable();
            indices.dedup();
            if !indices.is_empty() {
                send.push(Link { peer, indices });
            }
        }
        RowBlock {
            first,
            rows,
            ptr,
            cols,
            vals,
            ghosts,
            recv,
            send,
        }
    }

    /// The first global row of the block whose diagonal entry is zero or missing, if any
    /// (Jacobi divides by it).
    pub fn zero_diagonal(&self) -> Option<usize> {
        (0..self.rows)
            .find(|&i| self.diagonal(i) == 0.0)
            .map(|i| self.first + i)
    }

    /// The first global row whose diagonal entry Jacobi cannot divide by, and that entry:
    /// zero (or not stored), or subnormal (below `f64::MIN_POSITIVE`, about 2.2e-308: it
    /// holds too few significant bits, and its inverse overflows to infinity below 5.6e-309).
    pub fn unusable_diagonal(&self) -> Option<(usize, f64)> {
        (0..self.rows)
            .map(|i| (i, self.diagonal(i)))
            .find(|&(_, d)| !d.is_normal())
            .map(|(i, d)| (self.first + i, d))
    }

    /// The block's part of [`Csr::diagonally_dominant`]: whether every row is weakly
    /// dominant (`|a_ii| ≥ Σ_{j≠i} |a_ij|`), and whether one is strictly. The matrix is
    /// dominant when every block's rows are weakly and one block has a strict row.
    pub fn dominance(&self) -> (bool, bool) {
        super::csr::dominance((0..self.rows).map(|i| (i, self.row(i))))
    }

    /// Row `i`'s diagonal entry (0 when not stored).
    fn diagonal(&self, i: usize) -> f64 {
        let (cols, vals) = self.row(i);
        cols.iter()
            .position(|&c| c as usize == i)
            .map_or(0.0, |k| vals[k])
    }

    /// The first global row owned.
    pub fn first_row(&self) -> usize {
        self.first
    }

    /// Rows owned.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The length of the extended vector: own values and ghosts.
    pub fn extended_len(&self) -> usize {
        self.rows + self.ghosts.len()
    }

    /// The global column of each ghost slot.
    pub fn ghost_columns(&self) -> &[usize] {
        &self.ghosts
    }

    /// The links ghosts arrive on.
    pub fn recv_links(&self) -> &[Link] {
        &self.recv
    }

    /// The links this block's values leave on.
    pub fn send_links(&self) -> &[Link] {
        &self.send
    }

    /// The block's rows in CSR: row pointers, extended-vector columns, values.
    pub(crate) fn csr(&self) -> (&[usize], &[u32], &[f64]) {
        (&self.ptr, &self.cols, &self.vals)
    }

    /// Row `i` of the block: its extended-vector columns and values.
    fn row(&self, i: usize) -> (&[u32], &[f64]) {
        let (a, b) = (self.ptr[i], self.ptr[i + 1]);
        (&self.cols[a..b], &self.vals[a..b])
    }

    /// `y = A x` for the owned rows, `x` extended (ghosts current).
    pub fn mul(&self, x: &[f64], y: &mut [f64]) {
        for (i, yi) in y.iter_mut().enumerate().take(self.rows) {
            let (cols, vals) = self.row(i);
            *yi = cols
                .iter()
                .zip(vals)
                .map(|(&c, &v)| v * x[c as usize])
                .sum();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{generate, row_blocks};
    use super::*;

    /// The ghost lists of every block agree with the senders', and with the pattern.
    #[test]
    fn every_ghost_has_one_sender_and_the_lists_match() {
        let a = generate::convection_diffusion_2d(9, 1.5);
        for p in [1, 2, 3, 5] {
            let bounds = row_blocks(a.row_ptr(), p);
            let blocks: Vec<RowBlock> = (0..p)
                .map(|r| RowBlock::from_global(&a, &bounds, r))
                .collect();
            for (r, blk) in blocks.iter().enumerate() {
                for l in blk.recv_links() {
                    let sender = &blocks[l.peer];
                    let out = sender
                        .send_links()
                        .iter()
                        .find(|s| s.peer == r)
                        .expect("the owner sends to every rank that needs its values");
                    assert_eq!(
                        out.indices.len(),
                        l.indices.len(),
                        "{p}: {r} from {}",
                        l.peer
                    );
                    // The same global columns, in the same order.
                    for (&s, &g) in out.indices.iter().zip(&l.indices) {
                        let col = blk.ghost_columns()[g as usize - blk.rows()];
                        assert_eq!(sender.first_row() + s as usize, col);
                    }
                }
                let sends: usize = blk.send_links().len();
                let wanted = blocks
                    .iter()
                    .filter(|o| o.recv_links().iter().any(|l| l.peer == r))
                    .count();
                assert_eq!(sends, wanted, "{p}: {r}");
            }
        }
    }

    /// The distributed product over 1 to 4 blocks, each block's ghosts filled from the whole
    /// vector, is the serial product to the bit (the same sums in the same order).
    #[test]
    fn distributed_product_is_the_serial_one_to_the_bit() {
        let a = generate::convection_diffusion_2d(12, 2.0);
        let n = a.n();
        let x: Vec<f64> = (0..n)
            .map(|i| 1.0 + (i % 7) as f64 * 0.25 - 0.3 * (i % 3) as f64)
            .collect();
        let mut ax = vec![0.0; n];
        a.mul(&x, &mut ax);
        for p in 1..=4 {
            let bounds = row_blocks(a.row_ptr(), p);
            for r in 0..p {
                let blk = RowBlock::from_global(&a, &bounds, r);
                let first = blk.first_row();
                let mut ext = x[first..first + blk.rows()].to_vec();
                ext.extend(blk.ghost_columns().iter().map(|&c| x[c]));
                let mut y = vec![0.0; blk.rows()];
                blk.mul(&ext, &mut y);
                for (k, v) in y.iter().enumerate() {
                    assert_eq!(
                        v.to_bits(),
                        ax[first + k].to_bits(),
                        "{p} ranks: row {}",
                        first + k
                    );
                }
            }
        }
    }
}
