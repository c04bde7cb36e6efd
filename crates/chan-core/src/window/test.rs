use super::*;

/// A span is in range or the error that says why: the end may reach the window's length
/// but not pass it, an end that overflows is out of range, and the target is checked first.
#[test]
fn a_span_is_checked_against_the_world_and_the_length() {
    let (size, len) = (3, 16);
    let span = Span::checked(2, 12, 4, size, len).unwrap();
    assert_eq!((span.target(), span.offset(), span.count()), (2, 12, 4));
    assert_eq!(span.bytes(), 32);
    assert!(Span::checked(0, len, 0, size, len).is_ok());
    let oor = |offset, count| WindowError::OutOfRange { offset, count, len };
    assert_eq!(Span::checked(1, 13, 4, size, len), Err(oor(13, 4)));
    assert_eq!(Span::checked(1, len, 1, size, len), Err(oor(len, 1)));
    assert_eq!(
        Span::checked(1, usize::MAX, 2, size, len),
        Err(oor(usize::MAX, 2))
    );
    let bad = WindowError::BadTarget { target: 3, size };
    assert_eq!(Span::checked(3, 0, 1, size, len), Err(bad.clone()));
    assert_eq!(Span::checked(3, len, 1, size, len), Err(bad));
    assert_eq!(checked_target(2, size), Ok(2));
}
