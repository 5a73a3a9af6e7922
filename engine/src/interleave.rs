//! Stereo frames between planar channels and the interleaved runs of the stream's ring buffers
//! (which hand out their room as up to two slices where they wrap).

use std::mem::MaybeUninit;

/// Writes `left[i], right[i]` pairs into `first`, then `second`, until the channels end: every
/// slot of the first `2 × left.len()` is initialised. The room may be uninitialised (a ring
/// buffer's free slots, which need no clearing first). Realtime-safe.
///
/// # Panics
/// If the slices have room for fewer frames than the channels hold, or the channels differ in
/// length.
#[inline]
pub fn interleave_stereo(
    left: &[f32],
    right: &[f32],
    first: &mut [MaybeUninit<f32>],
    second: &mut [MaybeUninit<f32>],
) {
    assert_eq!(
        left.len(),
        right.len(),
        "stereo channels of different lengths"
    );
    let split = (first.len() / 2).min(left.len());
    let parts = [(0..split, first), (split..left.len(), second)];
    for (frames, part) in parts {
        let (pairs, _) = part.as_chunks_mut::<2>();
        assert!(pairs.len() >= frames.len(), "no room for the frames");
        for ((pair, &l), &r) in pairs
            .iter_mut()
            .zip(&left[frames.clone()])
            .zip(&right[frames])
        {
            *pair = [MaybeUninit::new(l), MaybeUninit::new(r)];
        }
    }
}

/// Splits the pairs of `first`, then `second`, into `left` and `right` (as long as there are
/// pairs). Realtime-safe.
///
/// # Panics
/// If the channels are shorter than the pairs.
#[inline]
pub fn deinterleave_stereo(first: &[f32], second: &[f32], left: &mut [f32], right: &mut [f32]) {
    let mut offset = 0;
    for part in [first, second] {
        let (pairs, _) = part.as_chunks::<2>();
        let end = offset + pairs.len();
        for ((&[l, r], left), right) in pairs
            .iter()
            .zip(&mut left[offset..end])
            .zip(&mut right[offset..end])
        {
            *left = l;
            *right = r;
        }
        offset = end;
    }
}

/// Room of `len` slots, each initialised to `value`, for tests of writers into uninitialised
/// room.
#[cfg(test)]
pub(crate) fn initialised_room(len: usize, value: f32) -> Vec<MaybeUninit<f32>> {
    vec![MaybeUninit::new(value); len]
}

/// The values of room made by [`initialised_room`] (and written since).
#[cfg(test)]
pub(crate) fn room_values(room: &[MaybeUninit<f32>]) -> Vec<f32> {
    room.iter()
        // SAFETY: `initialised_room` initialised every slot, and writers only store values.
        .map(|slot| unsafe { slot.assume_init() })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_go_through_a_wrapped_ring_and_come_back_the_same() {
        let left: Vec<f32> = (0..7).map(|i| i as f32).collect();
        let right: Vec<f32> = (0..7).map(|i| -(i as f32) - 0.5).collect();
        for split in 0..=7 {
            let mut first = initialised_room(split * 2, 9.0);
            let mut second = initialised_room((7 - split) * 2 + 2, 9.0);
            interleave_stereo(&left, &right, &mut first, &mut second);
            let (first, second) = (room_values(&first), room_values(&second));
            let mut ring = first.clone();
            ring.extend_from_slice(&second);
            let expected: Vec<f32> = (0..7)
                .flat_map(|i| [left[i], right[i]])
                .chain([9.0, 9.0])
                .collect();
            assert_eq!(ring, expected, "split after {split} frames");

            let (mut back_left, mut back_right) = (vec![0.0; 7], vec![0.0; 7]);
            deinterleave_stereo(
                &first,
                &second[..(7 - split) * 2],
                &mut back_left,
                &mut back_right,
            );
            assert_eq!((back_left, back_right), (left.clone(), right.clone()));
        }
    }

    #[test]
    #[should_panic(expected = "no room")]
    fn frames_that_do_not_fit_are_refused() {
        let (mut first, mut second) = (initialised_room(2, 0.0), initialised_room(2, 0.0));
        interleave_stereo(&[1.0; 3], &[1.0; 3], &mut first, &mut second);
    }
}
