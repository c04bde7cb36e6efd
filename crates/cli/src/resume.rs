//! Start and resume: `--x0 FILE` (the iterate a run starts from), `--checkpoint FILE
//! --checkpoint-every K` (the iterate every K iterations, with what resuming needs) and
//! `--resume FILE` (a run that goes on from a checkpoint).
//!
//! A checkpoint is a Matrix Market `array real general` vector, the format `--solution`
//! writes (so it is also an `--x0`), whose comment lines carry what resuming needs: the
//! format version, the iteration, the settings the iterate is bound to (problem, size, rank
//! count and decomposition, method and its settings, check period) and a checksum of the
//! values. The sync loop gathers the ranks' blocks to rank 0 at the same iteration, rank 0
//! assembles the global iterate and writes it atomically through the output module (a
//! temporary file renamed over the previous checkpoint: a kill leaves the previous one
//! whole). One file rather than one per rank and a manifest: it is complete or absent
//! (one rename publishes it), it reads back as an `--x0`, and the gather is the one
//! `--solution` already makes.

use crate::args::RunArgs;
use crate::error::Error;
use crate::matrix::Loaded;
use crate::output::write_atomically;
use jacobi::{Config, MatrixInfo, Plan, Start};
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// The checkpoint format this aiac writes and reads.
pub(crate) const FORMAT: u32 = 1;

/// The first line of a Matrix Market vector as `--solution` and checkpoints write it.
const HEADER: &str = "%%MatrixMarket matrix array real general";

/// A Matrix Market vector read back: its comment lines (without `%` and one space) and its
/// values.
#[derive(Debug)]
pub(crate) struct Vector {
    pub(crate) comments: Vec<String>,
    pub(crate) values: Vec<f64>,
}

/// Parse the text of a Matrix Market `array real general` vector (n × 1) as `--solution`
/// writes it: every entry finite, exactly n of them. The error says what is wrong (the
/// caller names the file).
pub(crate) fn parse_vector(text: &str) -> Result<Vector, String> {
    let mut lines = text.lines().enumerate();
    let first = lines.next().map(|(_, l)| l).unwrap_or("");
    let words: Vec<String> = first
        .split_whitespace()
        .map(str::to_ascii_lowercase)
        .collect();
    if words != ["%%matrixmarket", "matrix", "array", "real", "general"] {
        return Err(format!(
            "is not a Matrix Market vector: its first line should be `{HEADER}` (as \
             --solution writes)"
        ));
    }
    let mut comments = Vec::new();
    let mut n = None;
    let mut values = Vec::new();
    for (i, line) in lines {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(c) = line.strip_prefix('%') {
            if n.is_none() {
                comments.push(c.trim_start().to_string());
            }
            continue;
        }
        match n {
            None => {
                let dims: Vec<&str> = line.split_whitespace().collect();
                let parsed = match dims[..] {
                    [r, "1"] => r.parse::<usize>().ok(),
                    _ => None,
                };
                let Some(rows) = parsed else {
                    return Err(format!(
                        "line {}: `{line}` is not the size line `N 1` of an N × 1 vector",
                        i + 1
                    ));
                };
                n = Some(rows);
                values.reserve_exact(rows.min(1 << 28));
            }
            Some(rows) => {
                if values.len() == rows {
                    return Err(format!(
                        "line {}: more entries than the {rows} its size line announces",
                        i + 1
                    ));
                }
                let v: f64 = line
                    .parse()
                    .map_err(|_| format!("line {}: `{line}` is not a number", i + 1))?;
                if !v.is_finite() {
                    return Err(format!(
                        "line {}: entry {} is {v}, not a finite number",
                        i + 1,
                        values.len() + 1
                    ));
                }
                values.push(v);
            }
        }
    }
    match n {
        None => Err("has no size line (`N 1`)".into()),
        Some(rows) if values.len() != rows => Err(format!(
            "has {} entries where its size line announces {rows} (truncated?)",
            values.len()
        )),
        Some(_) => Ok(Vector { comments, values }),
    }
}

/// The checksum of a checkpoint's values: FNV-1a over their bits (a truncated or altered
/// value is refused).
fn checksum(x: &[f64]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for v in x {
        for b in v.to_bits().to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// The settings a checkpoint's iterate is bound to, as (name, value): a resumed run must
/// have the same ones.
fn bound_to(
    cfg: &Config,
    plan: &Plan,
    ranks: usize,
    matrix: Option<&MatrixInfo>,
) -> Vec<(&'static str, String)> {
    let (problem, size, decomposition) = match matrix {
        None => (
            format!("{:?}", cfg.problem),
            plan.global.to_string(),
            plan.procs.to_string(),
        ),
        Some(m) => (
            format!(
                "matrix with {} nonzeros, b {}",
                m.nnz,
                if m.rhs.is_some() { "given" } else { "= A·1" }
            ),
            format!("{} rows", m.n),
            format!("row blocks from {:?}", m.row_bounds),
        ),
    };
    vec![
        ("problem", problem),
        ("size", size),
        ("ranks", ranks.to_string()),
        ("decomposition", decomposition),
        ("method", format!("{:?}", cfg.method)),
        ("check every", cfg.check_every.to_string()),
        ("confirm", cfg.confirm.to_string()),
    ]
}

/// A run's start and checkpoints, from its flags: read, checked and ready before the run.
#[derive(Debug, Default)]
pub(crate) struct Restart {
    pub(crate) start: Option<Start>,
    pub(crate) checkpoint: Option<CheckpointFile>,
}

impl Restart {
    /// `--x0`, `--resume` and `--checkpoint` of `args` for `cfg` over `plan` on `ranks`
    /// ranks: the files read and checked (one message naming the file when one is wrong).
    pub(crate) fn load(
        args: &RunArgs,
        cfg: &Config,
        plan: &Plan,
        ranks: usize,
        matrix: Option<&Loaded>,
    ) -> Result<Self, Error> {
        let given = args.x0.is_some() || args.resume.is_some() || args.checkpoint.is_some();
        let deep = matches!(cfg.method, jacobi::Method::Jacobi(j)
            if j.halo_depth != jacobi::HaloDepth::Fixed(1));
        if given && (deep || args.threads_per_rank() > 1) {
            return Err(Error::Invalid(
                "--x0, --resume and --checkpoint run with one-plane halos and one thread per \
                 rank (not with --halo-depth above 1 or auto, nor --threads-per-rank above 1)"
                    .into(),
            ));
        }
        let info = matrix.map(Loaded::info);
        let bound = bound_to(cfg, plan, ranks, info);
        // The unknowns: the grid's interior points, or the matrix's rows.
        let unknowns = info.map_or((plan.global.volume(), plan.global.to_string()), |m| {
            (m.n, format!("{} × {}", m.n, m.n))
        });
        let checkpoint = match (&args.checkpoint, args.checkpoint_every) {
            (Some(path), Some(every)) => {
                check_checkpointable(cfg, every)?;
                Some(CheckpointFile::new(path, every, &bound))
            }
            _ => None,
        };
        let start = match (&args.x0, &args.resume) {
            (Some(path), _) => Some(read_x0(path, unknowns)?),
            (None, Some(path)) => Some(read_checkpoint(path, &bound)?),
            (None, None) => None,
        };
        Ok(Restart { start, checkpoint })
    }

    /// Give `solve` this start and these checkpoints.
    pub(crate) fn apply<'a>(&'a self, solve: jacobi::Solve<'a>) -> jacobi::Solve<'a> {
        let solve = match &self.start {
            Some(s) => solve.start(s),
            None => solve,
        };
        match &self.checkpoint {
            Some(c) => solve.checkpoint(c),
            None => solve,
        }
    }
}

/// Checkpoints are taken by Jacobi and multisplitting: sync every K iterations, K a
/// multiple of the halo period (a resumed run then swaps the halo where the interrupted one
/// did); async and racy every K completed rounds of the convergence detection.
fn check_checkpointable(cfg: &Config, every: u64) -> Result<(), Error> {
    let Some(it) = cfg.method.iteration() else {
        return Err(Error::Invalid(
            "--checkpoint: the Krylov solvers take no checkpoint (--solver jacobi or \
             multisplit)"
                .into(),
        ));
    };
    let sync = it.variant == jacobi::Variant::Sync;
    if every == 0 || (sync && !every.is_multiple_of(it.halo_every)) {
        return Err(Error::Invalid(format!(
            "--checkpoint-every {every}: must be a positive multiple of --halo-every {}",
            it.halo_every
        )));
    }
    Ok(())
}

/// `--x0 FILE`: the grid's interior points, x fastest, or the matrix's rows: `unknowns`
/// of them (and the system, for the message).
fn read_x0(path: &Path, (points, of): (usize, String)) -> Result<Start, Error> {
    let bad = |why: String| Error::Input {
        flag: "--x0",
        path: path.to_path_buf(),
        why,
    };
    let v = read(path).map_err(bad)?;
    if v.values.len() != points {
        return Err(bad(format!(
            "has {} entries, the system ({of}) has {points} unknowns",
            v.values.len(),
        )));
    }
    Ok(Start {
        x: v.values,
        iteration: 0,
    })
}

/// The text of the vector file `path` (through the input module), parsed.
fn read(path: &Path) -> Result<Vector, String> {
    let bytes = crate::input::read_json(path, crate::input::MAX_JSON)?;
    let text = String::from_utf8(bytes).map_err(|_| "is not text".to_string())?;
    parse_vector(&text)
}

/// `--resume FILE`: a checkpoint of this configuration.
fn read_checkpoint(path: &Path, bound: &[(&'static str, String)]) -> Result<Start, Error> {
    let bad = |why: String| Error::Input {
        flag: "--resume",
        path: path.to_path_buf(),
        why,
    };
    let v = read(path).map_err(bad)?;
    let field = |key: &str| {
        v.comments.iter().find_map(|c| {
            c.strip_prefix(key)
                .and_then(|rest| rest.strip_prefix(": "))
                .map(str::to_string)
        })
    };
    let format = field("aiac checkpoint")
        .and_then(|f| f.strip_prefix("format ").map(str::to_string))
        .ok_or_else(|| bad("is not a checkpoint of aiac (no `% aiac checkpoint` line)".into()))?;
    if format != FORMAT.to_string() {
        return Err(bad(format!(
            "is a checkpoint of format {format}; this aiac reads format {FORMAT}"
        )));
    }
    let sum = field("checksum").ok_or_else(|| bad("has no checksum line".into()))?;
    if sum != format!("{:016x}", checksum(&v.values)) {
        return Err(bad(
            "its values do not match its checksum (truncated or altered)".into(),
        ));
    }
    let differ: Vec<String> = bound
        .iter()
        .filter_map(|(k, here)| match field(k) {
            Some(there) if there == *here => None,
            there => Some(format!(
                "{k} {} there, {here} here",
                there.as_deref().unwrap_or("(none)")
            )),
        })
        .collect();
    if !differ.is_empty() {
        return Err(bad(format!(
            "is a checkpoint of another configuration: {}",
            differ.join("; ")
        )));
    }
    let iteration = field("iteration")
        .and_then(|i| i.parse::<u64>().ok())
        .ok_or_else(|| bad("has no iteration line".into()))?;
    Ok(Start {
        x: v.values,
        iteration,
    })
}

/// `--checkpoint FILE --checkpoint-every K`: where rank 0 writes the checkpoints.
#[derive(Debug)]
pub(crate) struct CheckpointFile {
    path: PathBuf,
    every: u64,
    /// The comment lines of the settings it is bound to.
    bound: String,
    /// The text of the last checkpoint: its room is kept for the next.
    text: std::sync::Mutex<String>,
}

impl CheckpointFile {
    fn new(path: &Path, every: u64, bound: &[(&'static str, String)]) -> Self {
        let mut s = String::new();
        for (k, v) in bound {
            let _ = writeln!(s, "% {k}: {v}");
        }
        CheckpointFile {
            path: path.to_path_buf(),
            every,
            bound: s,
            text: std::sync::Mutex::new(String::new()),
        }
    }

    /// The checkpoint's text, into `s` (cleared).
    fn text(&self, saved: &jacobi::Saved<'_>, s: &mut String) {
        let x = saved.x;
        s.clear();
        s.reserve(512 + 25 * x.len());
        s.push_str(HEADER);
        s.push('\n');
        let _ = writeln!(s, "% aiac checkpoint: format {FORMAT}");
        let _ = writeln!(s, "% iteration: {}", saved.iteration);
        s.push_str(&self.bound);
        let _ = writeln!(s, "% checksum: {:016x}", checksum(x));
        let _ = writeln!(s, "{} 1", x.len());
        for v in x {
            let _ = writeln!(s, "{v:.16e}");
        }
    }
}

impl jacobi::Checkpoint for CheckpointFile {
    fn every(&self) -> u64 {
        self.every
    }

    fn save(&self, saved: &jacobi::Saved<'_>) -> Result<(), String> {
        // Rank 0 alone saves: the lock is never contended.
        let mut text = self
            .text
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.text(saved, &mut text);
        write_atomically(&self.path, text.as_bytes())
            .map_err(|e| format!("--checkpoint {}: {e}", self.path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_solution_reads_back_bit_for_bit() {
        let x = [1.0, -0.1, 1e-300, std::f64::consts::PI];
        let v = parse_vector(&crate::matrix::solution_text(&x)).unwrap();
        assert_eq!(v.values.len(), 4);
        for (a, b) in x.iter().zip(&v.values) {
            assert_eq!(a.to_bits(), b.to_bits());
        }
    }

    #[test]
    fn bad_vectors_are_refused() {
        let h = HEADER;
        for (text, says) in [
            ("hello\n", "first line"),
            (&*format!("{h}\n2 1\n1.0\n"), "has 1 entries"),
            (&*format!("{h}\n1 1\n1.0\n2.0\n"), "more entries"),
            (&*format!("{h}\n2 1\n1.0\nNaN\n"), "not a finite"),
            (&*format!("{h}\n2 1\n1.0\ninf\n"), "not a finite"),
            (&*format!("{h}\n2 2\n1.0\n"), "size line"),
        ] {
            let e = parse_vector(text).unwrap_err();
            assert!(e.contains(says), "{text:?}: {e}");
        }
    }
}
