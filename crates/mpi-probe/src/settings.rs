//! What the probe runs with, its ranges and defaults: checked here, without MPI, so that a
//! caller can refuse its input before it starts MPI.

use crate::error::{SettingError, SizesError};
use std::ops::RangeInclusive;
use std::time::Duration;

/// The sender's computation per repetition, C: long enough to hide a transfer, short enough
/// that a size's repetitions take seconds, not minutes.
pub const COMPUTE: RangeInclusive<Duration> = Duration::from_micros(50)..=Duration::from_secs(1);

/// C when none is given.
pub const DEFAULT_COMPUTE: Duration = Duration::from_millis(5);

/// Repetitions per size and variant (the results are their medians).
pub const REPS: RangeInclusive<usize> = 1..=1000;

/// Repetitions when none is given.
pub const DEFAULT_REPS: usize = 7;

/// Messages in flight at once in the cumulative experiment.
pub const COUNT: RangeInclusive<usize> = 2..=64;

/// Messages in flight at once when none is given.
pub const DEFAULT_COUNT: usize = 3;

/// The largest message: MPI counts are C ints, and a rank holds a few buffers of it.
pub const MAX_SIZE: usize = 1 << 30;

/// The most sizes one run measures.
pub const MAX_SIZES: usize = 40;

/// The computation and the repetitions, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    compute: Duration,
    reps: usize,
}

impl Settings {
    /// C and the repetitions, each within its range ([`COMPUTE`], [`REPS`]).
    pub fn new(compute: Duration, reps: usize) -> Result<Self, SettingError> {
        check_compute(compute)?;
        check_reps(reps)?;
        Ok(Settings { compute, reps })
    }

    /// The sender's computation per repetition, C (the kernel's receiver computes 2C; in the
    /// experiments both ranks compute C).
    pub fn compute(&self) -> Duration {
        self.compute
    }

    /// Repetitions per size and variant.
    pub fn reps(&self) -> usize {
        self.reps
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            compute: DEFAULT_COMPUTE,
            reps: DEFAULT_REPS,
        }
    }
}

/// C within [`COMPUTE`].
pub fn check_compute(compute: Duration) -> Result<(), SettingError> {
    match COMPUTE.contains(&compute) {
        true => Ok(()),
        false => Err(SettingError::Compute(compute)),
    }
}

/// Repetitions within [`REPS`].
pub fn check_reps(reps: usize) -> Result<(), SettingError> {
    match REPS.contains(&reps) {
        true => Ok(()),
        false => Err(SettingError::Reps(reps)),
    }
}

/// Messages in flight at once within [`COUNT`].
pub fn check_count(count: usize) -> Result<(), SettingError> {
    match COUNT.contains(&count) {
        true => Ok(()),
        false => Err(SettingError::Count(count)),
    }
}

/// Message sizes in bytes: at least one and at most [`MAX_SIZES`], each from 1 to
/// [`MAX_SIZE`], strictly ascending.
pub fn check_sizes(sizes: &[usize]) -> Result<(), SettingError> {
    if sizes.is_empty() {
        return Err(SizesError::Empty.into());
    }
    if sizes.len() > MAX_SIZES {
        return Err(SizesError::TooMany(sizes.len()).into());
    }
    if let Some(&s) = sizes.iter().find(|&&s| !(1..=MAX_SIZE).contains(&s)) {
        return Err(SizesError::OutOfRange(s).into());
    }
    if let Some(w) = sizes.windows(2).find(|w| w[1] <= w[0]) {
        return Err(SizesError::NotAscending(w[1], w[0]).into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_hold_their_ends_and_refuse_beyond() {
        assert!(Settings::new(*COMPUTE.start(), 1).is_ok());
        assert!(Settings::new(*COMPUTE.end(), 1000).is_ok());
        let under = *COMPUTE.start() - Duration::from_nanos(1);
        assert_eq!(Settings::new(under, 7), Err(SettingError::Compute(under)));
        assert_eq!(
            Settings::new(DEFAULT_COMPUTE, 0),
            Err(SettingError::Reps(0))
        );
        assert_eq!(check_count(1), Err(SettingError::Count(1)));
        assert_eq!(check_count(65), Err(SettingError::Count(65)));
        assert!(check_count(DEFAULT_COUNT).is_ok());
        assert!(Settings::new(Settings::default().compute(), Settings::default().reps()).is_ok());
    }

    #[test]
    fn sizes_ascend_within_range() {
        assert!(check_sizes(&[1, 1024, MAX_SIZE]).is_ok());
        let refused = |s: &[usize]| match check_sizes(s) {
            Err(SettingError::Sizes(e)) => e,
            other => panic!("{s:?}: {other:?}"),
        };
        assert_eq!(refused(&[]), SizesError::Empty);
        assert_eq!(refused(&[0]), SizesError::OutOfRange(0));
        assert_eq!(
            refused(&[MAX_SIZE + 1]),
            SizesError::OutOfRange(MAX_SIZE + 1)
        );
        assert_eq!(refused(&[8, 4]), SizesError::NotAscending(4, 8));
        assert_eq!(refused(&[8, 8]), SizesError::NotAscending(8, 8));
        let many: Vec<usize> = (1..=MAX_SIZES + 1).collect();
        assert_eq!(refused(&many), SizesError::TooMany(MAX_SIZES + 1));
        // The messages name the setting, not a flag.
        let e = SettingError::from(SizesError::TooMany(41)).to_string();
        assert_eq!(e, "sizes: 41 sizes; at most 40");
        assert!(!SettingError::Reps(0).to_string().contains("--"));
    }
}
