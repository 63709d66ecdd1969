//! [`MergeHeap`]: the max-heap that picks training's next merge.
//!
//! The order is the reference's: the greatest count, then the greatest pair compared as a tuple of byte
//! strings (`max((left, right))` on Python `bytes`: left first, and a proper prefix is smaller). The
//! standard library's `BinaryHeap` cannot compare through the token table, which grows while the heap is
//! alive, so this is a plain binary heap whose operations take the table as an argument.
//!
//! Entries go stale when a pair's count drops; the trainer checks each popped entry against the live
//! count and pushes it back with the right one (lazy invalidation). That is correct because a pair's
//! count never rises after the merge step that created it: a stale entry is too high, never too low, so
//! the first entry that pops with its live count is the true maximum.

use std::cmp::Ordering;

use crate::error::{try_push, AllocError};

/// A token pair, as token ids.
pub(super) type Pair = (u32, u32);

/// A pair and its count when it was pushed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Candidate {
    pub(super) count: i64,
    pub(super) pair: Pair,
}

/// Orders candidates by count, then by the byte strings of the pair, then by ids (which only matters if
/// two tokens had the same bytes, and makes the order total).
fn compare(a: &Candidate, b: &Candidate, tokens: &[Vec<u8>]) -> Ordering {
    a.count
        .cmp(&b.count)
        .then_with(|| {
            let ta = (&tokens[a.pair.0 as usize], &tokens[a.pair.1 as usize]);
            let tb = (&tokens[b.pair.0 as usize], &tokens[b.pair.1 as usize]);
            ta.cmp(&tb)
        })
        .then_with(|| a.pair.cmp(&b.pair))
}

/// A max-heap of [`Candidate`]s under the reference's order.
pub(super) struct MergeHeap {
    heap: Vec<Candidate>,
}

impl MergeHeap {
    /// Builds the heap from unordered candidates in linear time.
    pub(super) fn from_vec(heap: Vec<Candidate>, tokens: &[Vec<u8>]) -> MergeHeap {
        let mut merges = MergeHeap { heap };
        for i in (0..merges.heap.len() / 2).rev() {
            merges.sift_down(i, tokens);
        }
        merges
    }

    /// Adds `c`; fails, leaving the heap as it was, when the heap cannot grow.
    pub(super) fn push(&mut self, c: Candidate, tokens: &[Vec<u8>]) -> Result<(), AllocError> {
        try_push(&mut self.heap, c)?;
        self.sift_up(self.heap.len() - 1, tokens);
        Ok(())
    }

    /// Removes and returns the greatest candidate.
    ///
    /// The last candidate, which takes the root's place, nearly always belongs near the bottom, so the
    /// hole it fills is first moved down to a leaf along the greater children (one comparison a level,
    /// where sifting the candidate down compares both children with it), and the candidate then sifted
    /// up from there, which is rarely more than a level or two.
    pub(super) fn pop(&mut self, tokens: &[Vec<u8>]) -> Option<Candidate> {
        let last = self.heap.pop()?;
        if self.heap.is_empty() {
            return Some(last);
        }
        let top = self.heap[0];
        let n = self.heap.len();
        let mut hole = 0;
        loop {
            let l = 2 * hole + 1;
            if l >= n {
                break;
            }
            let r = l + 1;
            let child =
                match r < n && compare(&self.heap[r], &self.heap[l], tokens) == Ordering::Greater {
                    true => r,
                    false => l,
                };
            self.heap[hole] = self.heap[child];
            hole = child;
        }
        self.heap[hole] = last;
        self.sift_up(hole, tokens);
        Some(top)
    }

    /// Moves the candidate at `i` up while it is greater than its parent.
    fn sift_up(&mut self, mut i: usize, tokens: &[Vec<u8>]) {
        while i > 0 {
            let parent = (i - 1) / 2;
            if compare(&self.heap[i], &self.heap[parent], tokens) != Ordering::Greater {
                break;
            }
            self.heap.swap(i, parent);
            i = parent;
        }
    }

    fn sift_down(&mut self, mut i: usize, tokens: &[Vec<u8>]) {
        let n = self.heap.len();
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut best = i;
            if l < n && compare(&self.heap[l], &self.heap[best], tokens) == Ordering::Greater {
                best = l;
            }
            if r < n && compare(&self.heap[r], &self.heap[best], tokens) == Ordering::Greater {
                best = r;
            }
            if best == i {
                return;
            }
            self.heap.swap(i, best);
            i = best;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_by_count_then_by_byte_tuple() {
        let tokens: Vec<Vec<u8>> =
            vec![b" ".to_vec(), b" a".to_vec(), b"d".to_vec(), b"nd".to_vec()];
        let c = |count, l, r| Candidate {
            count,
            pair: (l, r),
        };
        // The corpus.en case: (" a", "nd") beats (" ", "d") although " d" > " and" as concatenations.
        let mut heap = MergeHeap::from_vec(
            vec![c(5, 0, 2), c(5, 1, 3), c(3, 2, 2), c(9, 3, 0)],
            &tokens,
        );
        heap.push(c(5, 0, 3), &tokens).unwrap();
        let order: Vec<Pair> = std::iter::from_fn(|| heap.pop(&tokens))
            .map(|c| c.pair)
            .collect();
        assert_eq!(order, [(3, 0), (1, 3), (0, 3), (0, 2), (2, 2)]);
    }
}
