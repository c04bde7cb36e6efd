//! Every output flag of every subcommand, tried with what a hostile user gives it: /dev/null,
//! /dev/full, a FIFO, a symlink, a read-only directory, and two flags naming one file. A file
//! output is written in place into a device or FIFO (never replaced by a regular file),
//! through a symlink (the link stays), and refused with one message naming the flag when it
//! cannot be written; a directory output (`--out`) must be a directory. `aiac dht --json`
//! once replaced /dev/null with a regular file: this walks every flag so that no subcommand
//! writes another way (crates/cli/clippy.toml keeps file writes in src/output.rs).

// Tests write their fixtures and hostile files directly, not through aiac's output module.
#![allow(clippy::disallowed_methods)]

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;

use common::{scratch, text, within, AIAC};

/// What an output flag names.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    /// A file written whole.
    File,
    /// A stem: STEM.svg and STEM.png are written.
    Stem,
    /// A directory files are written into.
    Dir,
}

/// One output flag of one subcommand.
struct Flag {
    command: &'static str,
    flag: &'static str,
    kind: Kind,
}

const FLAGS: &[Flag] = &[
    Flag {
        command: "run",
        flag: "--json",
        kind: Kind::File,
    },
    Flag {
        command: "run",
        flag: "--csv",
        kind: Kind::File,
    },
    Flag {
        command: "run",
        flag: "--history",
        kind: Kind::File,
    },
    Flag {
        command: "dht",
        flag: "--json",
        kind: Kind::File,
    },
    Flag {
        command: "dht",
        flag: "--plot",
        kind: Kind::Stem,
    },
    Flag {
        command: "sweep",
        flag: "--out",
        kind: Kind::Dir,
    },
    Flag {
        command: "report",
        flag: "--out",
        kind: Kind::Dir,
    },
    Flag {
        command: "probe",
        flag: "--out",
        kind: Kind::Dir,
    },
];

/// A small, quick invocation of `command` with `extra` (its output flags) appended.
fn invoke(command: &str, extra: &[&str], saved: &Path) -> Output {
    let mut c = match command {
        "probe" => {
            let mut c = Command::new("mpirun");
            c.args(["-np", "2", AIAC, "probe", "--sizes", "1K"]).args([
                "--compute-ms",
                "0.1",
                "--reps",
                "2",
            ]);
            c
        }
        _ => Command::new(AIAC),
    };
    match command {
        "run" => c.args(["run", "--local", "4", "--quiet"]),
        "dht" => c.args(["dht", "--ranks", "1", "--local-volume", "100"]),
        "sweep" => c.args(["sweep", "--local", "4", "--quiet"]),
        "report" => c.args(["report"]).arg(saved),
        _ => &mut c,
    };
    c.args(extra);
    within(c, 120)
}

/// A run's saved report, for `aiac report` to read.
fn saved_report(dir: &Path) -> PathBuf {
    let p = dir.join("saved.json");
    let out = invoke("run", &["--json", p.to_str().unwrap()], &p);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    p
}

fn is_char_device(p: &str) -> bool {
    std::fs::symlink_metadata(p)
        .unwrap()
        .file_type()
        .is_char_device()
}

fn mkfifo(p: &Path) {
    assert!(Command::new("mkfifo").arg(p).status().unwrap().success());
}

/// Refused with one message naming the flag, exit non-zero.
fn assert_refused(out: &Output, f: &Flag, case: &str) {
    let err = text(&out.stderr);
    assert_ne!(
        out.status.code(),
        Some(0),
        "{} {} {case}: {err}",
        f.command,
        f.flag
    );
    assert!(
        err.contains(f.flag),
        "{} {} {case}: the message does not name the flag: {err}",
        f.command,
        f.flag
    );
    assert_eq!(
        err.matches("aiac: error").count(),
        1,
        "{} {} {case}: one message: {err}",
        f.command,
        f.flag
    );
}

fn assert_ok(out: &Output, f: &Flag, case: &str) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{} {} {case}: {}",
        f.command,
        f.flag,
        text(&out.stderr)
    );
}

/// A directory nothing can be created in, even by root: a fresh directory without write
/// permission for others, and sysfs (which creates no files) for root, whom permissions do
/// not stop.
fn read_only_dir(dir: &Path) -> PathBuf {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return PathBuf::from("/sys");
    }
    use std::os::unix::fs::PermissionsExt;
    let ro = dir.join("read-only");
    std::fs::create_dir(&ro).unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    ro
}

#[test]
fn every_output_flag_takes_special_files_links_and_bad_places_alike() {
    let dir = scratch("outputs");
    let saved = saved_report(&dir);
    let ro = read_only_dir(&dir);
    for f in FLAGS {
        let case_dir = dir.join(format!("{}{}", f.command, f.flag));
        std::fs::create_dir(&case_dir).unwrap();
        let run = |path: &Path| invoke(f.command, &[f.flag, path.to_str().unwrap()], &saved);

        // /dev/null: written in place (a file) or refused as not a directory; a device
        // either way.
        if f.kind != Kind::Stem {
            let out = run(Path::new("/dev/null"));
            match f.kind {
                Kind::File => assert_ok(&out, f, "/dev/null"),
                _ => assert_refused(&out, f, "/dev/null"),
            }
            assert!(is_char_device("/dev/null"), "{} {}", f.command, f.flag);
        }

        // /dev/full: a write error is an error, and the device stays.
        if f.kind == Kind::File {
            let out = run(Path::new("/dev/full"));
            assert_refused(&out, f, "/dev/full");
            assert!(
                text(&out.stderr).contains("No space left"),
                "{}",
                text(&out.stderr)
            );
            assert!(is_char_device("/dev/full"));
        }

        // A FIFO: a file output is written through it to its reader; a directory output
        // refuses it without opening it.
        let fifo = case_dir.join(match f.kind {
            Kind::Stem => "pipe.svg",
            _ => "pipe",
        });
        mkfifo(&fifo);
        match f.kind {
            Kind::Dir => {
                let out = run(&fifo);
                assert_refused(&out, f, "a FIFO");
            }
            _ => {
                let path = fifo.clone();
                let reader = std::thread::spawn(move || std::fs::read(path).unwrap());
                let out = match f.kind {
                    Kind::Stem => run(&case_dir.join("pipe")),
                    _ => run(&fifo),
                };
                assert_ok(&out, f, "a FIFO");
                let got = reader.join().unwrap();
                assert!(
                    !got.is_empty(),
                    "{} {}: nothing came through",
                    f.command,
                    f.flag
                );
            }
        }
        assert!(
            std::fs::symlink_metadata(&fifo)
                .unwrap()
                .file_type()
                .is_fifo(),
            "{} {}: still a FIFO",
            f.command,
            f.flag
        );
        std::fs::remove_file(&fifo).unwrap();

        // A symlink: the file (or directory) it names is written, the link stays.
        let (link, target) = match f.kind {
            Kind::File => (case_dir.join("link"), case_dir.join("real")),
            Kind::Stem => (case_dir.join("link.svg"), case_dir.join("real.svg")),
            Kind::Dir => (case_dir.join("link"), case_dir.join("real")),
        };
        match f.kind {
            Kind::Dir => std::fs::create_dir(&target).unwrap(),
            _ => std::fs::write(&target, "old").unwrap(),
        }
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let out = match f.kind {
            Kind::Stem => run(&case_dir.join("link")),
            _ => run(&link),
        };
        assert_ok(&out, f, "a symlink");
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
        match f.kind {
            Kind::Dir => assert!(
                std::fs::read_dir(&target).unwrap().next().is_some(),
                "{} {}: nothing written through the link",
                f.command,
                f.flag
            ),
            _ => assert_ne!(
                std::fs::read(&target).unwrap(),
                b"old",
                "{} {}: the link's target was not written",
                f.command,
                f.flag
            ),
        }

        // A read-only directory: refused before any work, with the flag named.
        let out = run(&ro.join(match f.kind {
            Kind::Dir => "out",
            _ => "out.json",
        }));
        assert_refused(&out, f, "a read-only directory");
    }

    // Two flags of one command naming one file, spelled differently: refused before any
    // work, nothing written.
    let same = dir.join("same");
    std::fs::create_dir(&same).unwrap();
    let json = same.join("r.json");
    let dotted = format!("{}/./r.json", same.display());
    let svg = same.join("p.svg");
    for (command, extra) in [
        (
            "run",
            vec!["--json", json.to_str().unwrap(), "--csv", dotted.as_str()],
        ),
        (
            "run",
            vec![
                "--csv",
                json.to_str().unwrap(),
                "--history",
                dotted.as_str(),
            ],
        ),
        (
            "dht",
            vec![
                "--json",
                svg.to_str().unwrap(),
                "--plot",
                same.join("p").to_str().unwrap(),
            ],
        ),
    ] {
        let out = invoke(command, &extra, &saved);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{command} {extra:?}: {err}");
        assert!(err.contains("name the same file"), "{command}: {err}");
        assert_eq!(
            std::fs::read_dir(&same).unwrap().count(),
            0,
            "{command} {extra:?}: nothing written"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
