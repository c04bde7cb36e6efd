//! Validated channel parameters.

use crate::error::{ConfigError, CreateError};
use serde::Serialize;

/// Tags with this bit set are reserved for aiac's own channels (the tree reduction).
pub const RESERVED_TAG_BIT: u32 = 1 << 31;

/// The largest R accepted: the paper varies R from 1 to 512.
pub const MAX_IN_FLIGHT_LIMIT: usize = 1 << 16;

/// Parameters both ends of a channel must agree on: message length and max in flight R.
///
/// Built with [`ChannelConfig::new`], which rejects a zero length or a zero R, so every
/// `ChannelConfig` in existence is valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct ChannelConfig {
    len: usize,
    max_in_flight: usize,
}

impl ChannelConfig {
    /// A channel carrying messages of `len` f64 with at most `max_in_flight` (R) messages in
    /// flight per direction.
    pub fn new(len: usize, max_in_flight: usize) -> Result<Self, ConfigError> {
        if len == 0 {
            return Err(ConfigError::ZeroLength);
        }
        if max_in_flight == 0 {
            return Err(ConfigError::ZeroInFlight);
        }
        if max_in_flight > MAX_IN_FLIGHT_LIMIT {
            return Err(ConfigError::TooManyInFlight {
                requested: max_in_flight,
                limit: MAX_IN_FLIGHT_LIMIT,
            });
        }
        // Slots hold R+1 messages of len f64 each; refuse sizes whose byte count overflows.
        let bytes = len
            .checked_mul(max_in_flight + 1)
            .and_then(|n| n.checked_mul(std::mem::size_of::<f64>()));
        if bytes.is_none_or(|b| b > isize::MAX as usize) {
            return Err(ConfigError::TooLarge { len, max_in_flight });
        }
        Ok(ChannelConfig { len, max_in_flight })
    }

    /// Message length in f64 elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: a zero length is rejected by [`ChannelConfig::new`].
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// R: the most messages in flight per direction.
    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight
    }
}

/// One channel of a collectively created set: the peer, a tag telling apart several channels
/// between the same pair, and the parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct ChannelSpec {
    /// The rank at the other end.
    pub peer: usize,
    /// Both ends name the same tag; tags with [`RESERVED_TAG_BIT`] are aiac's own.
    pub tag: u32,
    /// Length and R.
    pub config: ChannelConfig,
}

impl ChannelSpec {
    /// A user channel to `peer` with `tag` (which must not have [`RESERVED_TAG_BIT`]).
    pub fn new(peer: usize, tag: u32, config: ChannelConfig) -> Result<Self, ConfigError> {
        if tag & RESERVED_TAG_BIT != 0 {
            return Err(ConfigError::ReservedTag(tag));
        }
        Ok(ChannelSpec { peer, tag, config })
    }

    /// Check one rank's specs for a collective creation in a world of `size` ranks: every peer
    /// in `0..size` and not `rank` itself, no (peer, tag) twice. Returns which specs are valid
    /// and the first error; a backend still joins the collective with the valid ones, so that
    /// the creation fails on every rank instead of leaving the others waiting.
    pub fn check_set(
        rank: usize,
        size: usize,
        specs: &[ChannelSpec],
    ) -> (Vec<bool>, Option<CreateError>) {
        let mut first = None;
        let mut seen = std::collections::HashSet::with_capacity(specs.len());
        let valid = specs
            .iter()
            .map(|s| {
                let bad = if s.peer >= size || s.peer == rank {
                    Some(CreateError::BadPeer {
                        rank,
                        peer: s.peer,
                        size,
                    })
                } else if !seen.insert((s.peer, s.tag)) {
                    Some(CreateError::Duplicate {
                        rank,
                        peer: s.peer,
                        tag: s.tag,
                    })
                } else {
                    None
                };
                let ok = bad.is_none();
                if let Some(e) = bad {
                    first.get_or_insert(e);
                }
                ok
            })
            .collect();
        (valid, first)
    }

    pub(crate) fn reserved(peer: usize, tag: u32, config: ChannelConfig) -> Self {
        ChannelSpec {
            peer,
            tag: tag | RESERVED_TAG_BIT,
            config,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_length_and_zero_r_are_errors() {
        assert_eq!(ChannelConfig::new(0, 1), Err(ConfigError::ZeroLength));
        assert_eq!(ChannelConfig::new(1, 0), Err(ConfigError::ZeroInFlight));
        assert!(ChannelConfig::new(1, MAX_IN_FLIGHT_LIMIT + 1).is_err());
        assert!(ChannelConfig::new(usize::MAX / 2, 4).is_err());
        let c = ChannelConfig::new(2500, 512).unwrap();
        assert_eq!((c.len(), c.max_in_flight()), (2500, 512));
    }

    #[test]
    fn set_checks_peers_and_duplicates() {
        let c = ChannelConfig::new(1, 1).unwrap();
        let specs = [
            ChannelSpec::new(1, 0, c).unwrap(),
            ChannelSpec::new(2, 0, c).unwrap(),
            ChannelSpec::new(1, 0, c).unwrap(),
            ChannelSpec::new(0, 5, c).unwrap(),
            ChannelSpec::new(1, 1, c).unwrap(),
        ];
        let (valid, err) = ChannelSpec::check_set(0, 2, &specs);
        assert_eq!(valid, [true, false, false, false, true]);
        assert_eq!(
            err,
            Some(CreateError::BadPeer {
                rank: 0,
                peer: 2,
                size: 2
            })
        );
        let (valid, err) = ChannelSpec::check_set(0, 3, &specs[..3]);
        assert_eq!(valid, [true, true, false]);
        assert_eq!(
            err,
            Some(CreateError::Duplicate {
                rank: 0,
                peer: 1,
                tag: 0
            })
        );
    }

    #[test]
    fn reserved_tags_refused_for_users() {
        let c = ChannelConfig::new(1, 1).unwrap();
        assert!(ChannelSpec::new(0, RESERVED_TAG_BIT | 3, c).is_err());
        assert_eq!(ChannelSpec::new(0, 3, c).unwrap().tag, 3);
    }
}
