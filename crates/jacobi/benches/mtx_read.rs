//! Reading a Matrix Market file: the whole matrix (`read_matrix`, one pass) against one rank's
//! row block of four (`read_block`, two passes over the whole file). Writes a ~50 MB
//! `general` file of the 3-D coefficient-jump operator (its values divided by 3, so that each
//! is written with every digit, as a file from another tool has them), reads it three times
//! each way and prints the best rate in MB of file per second; the file is removed at the end.
//!
//! `cargo bench -p jacobi --bench mtx_read`

use jacobi::sparse::{generate, read_block, read_matrix, write_matrix, Csr};
use std::time::Instant;

fn main() {
    let dir = std::env::temp_dir().join(format!("aiac-mtx-read-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let path = dir.join("jump.mtx");
    // Every value divided by 3: all seventeen digits written, as a file from another tool.
    let g = generate::jump_3d(62, 1000.0);
    let t = (0..g.n())
        .flat_map(|i| {
            let (cols, vals) = g.row(i);
            cols.iter()
                .zip(vals)
                .map(move |(&c, &v)| (i as u32, c, v / 3.0))
        })
        .collect();
    let a = Csr::from_triplets(g.n(), t);
    drop(g);
    // A bench writes its own input file.
    #[allow(clippy::disallowed_methods)]
    let file = std::fs::File::create(&path).expect("create the matrix file");
    write_matrix(file, &a, false).expect("write the matrix");
    let mb = std::fs::metadata(&path).expect("the file").len() as f64 / 1e6;
    println!(
        "{}: {mb:.1} MB, n = {}, {} entries",
        path.display(),
        a.n(),
        a.nnz()
    );
    drop(a);
    let memory = 8 << 30;
    let best = |f: &dyn Fn()| {
        (0..3)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64()
            })
            .fold(f64::INFINITY, f64::min)
    };
    let t = best(&|| {
        std::hint::black_box(read_matrix(&path, memory).expect("read_matrix"));
    });
    println!(
        "read_matrix (one pass, whole matrix):  {t:.3} s, {:.0} MB/s",
        mb / t
    );
    let t = best(&|| {
        std::hint::black_box(read_block(&path, memory, 4, 1).expect("read_block"));
    });
    println!(
        "read_block (two passes, rank 1 of 4):   {t:.3} s, {:.0} MB/s of file, {:.0} MB/s per pass",
        mb / t,
        2.0 * mb / t
    );
    std::fs::remove_dir_all(&dir).expect("remove the scratch directory");
}
