//! The flags that set the library's settings: jacobi speaks settings ([`jacobi::Setting`]),
//! `aiac` speaks flags. Every message of a [`jacobi::ConfigError`] reaches the user through
//! [`Flags`], which names each setting by the flag that sets it.

use jacobi::{ConfigError, Names, Setting};
use std::borrow::Cow;

/// Settings named by their flags of `aiac run`.
pub(crate) struct Flags;

/// The flag of `aiac run` that sets `setting` (the stopping criterion has none: the problem
/// chooses it).
pub(crate) fn flag(setting: Setting) -> &'static str {
    match setting {
        Setting::Solver => "--solver",
        Setting::Pc => "--pc",
        Setting::PcSub => "--pc-sub",
        Setting::Restart => "--restart",
        Setting::Inner => "--inner",
        Setting::InnerTol => "--inner-tol",
        Setting::InnerMax => "--inner-max",
        Setting::Variant => "--variant",
        Setting::Backend => "--backend",
        Setting::Ranks => "-t/--threads",
        Setting::ThreadsPerRank => "--threads-per-rank",
        Setting::Problem => "--problem",
        Setting::Matrix => "--matrix",
        Setting::Local => "--local",
        Setting::Global => "--global",
        Setting::Grid => "--grid",
        Setting::Decomp => "--decomp",
        Setting::Exchange => "--exchange",
        Setting::Tol => "--tol",
        Setting::Criterion => "the stopping criterion",
        Setting::CheckEvery => "--check-every",
        Setting::HaloEvery => "--halo-every",
        Setting::HaloDepth => "--halo-depth",
        Setting::MaxInFlight => "--max-in-flight",
        Setting::Reduction => "--reduction",
        Setting::RacyRead => "--racy-read",
        Setting::Detect => "--detect",
        Setting::MaxIters => "--max-iters",
        Setting::Offset => "--offset",
        Setting::Confirm => "--confirm",
        Setting::SlowRank => "--slow-rank",
        Setting::Slowdown => "--slowdown",
    }
}

impl Names for Flags {
    fn name(&self, setting: Setting) -> Cow<'static, str> {
        Cow::Borrowed(flag(setting))
    }

    fn given(&self, setting: Setting, value: &str) -> String {
        match (setting, value) {
            // A flag of each value.
            (Setting::Confirm, "false") => "--no-confirm".into(),
            (Setting::Confirm, _) => "--confirm".into(),
            _ => format!("{} {value}", flag(setting)),
        }
    }
}

/// `e`'s message as `aiac` prints it: its settings named by their flags.
pub(crate) fn config_error(e: &ConfigError) -> String {
    e.named(&Flags).to_string()
}

/// `e`'s message as `aiac` prints it ([`config_error`] for bad input).
pub(crate) fn solver_error(e: &jacobi::Error) -> String {
    match e {
        jacobi::Error::Config(c) => config_error(c),
        e => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every setting's flag is one `aiac run` has (the criterion, which has none, aside).
    #[test]
    fn every_flag_is_a_flag_of_run() {
        let cmd = crate::Cli::command();
        let run = cmd.find_subcommand("run").expect("aiac run");
        let longs: Vec<String> = run
            .get_arguments()
            .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
            .collect();
        for s in Setting::ALL {
            let f = flag(s);
            if s == Setting::Criterion {
                assert!(!f.starts_with('-'));
                continue;
            }
            let long = f.rsplit('/').next().unwrap();
            assert!(
                longs.iter().any(|l| l == long),
                "{s:?}: {f} is not a flag of run"
            );
        }
        assert!(longs.iter().any(|l| l == "--no-confirm"));
    }
}
