//! [`LongMerge`]: the merge loop for long pre-tokens, in O(n log n) where the short loop is quadratic.
//!
//! A pre-token can be a megabyte of one letter, one digit or spaces, and tiktoken's loop (find the
//! lowest-ranked pair, merge it, repeat) took two minutes on 512 KiB of "x". This one makes the same
//! merges in the same order:
//!
//! - Symbols are a linked list over fixed positions; `pair[i]` is the (rank, merged id) of the pair
//!   position `i` starts now.
//! - Candidates wait in one bucket of positions per rank, and a small heap holds the ranks that have
//!   a bucket. The lowest rank's bucket is sorted and merged left to right, which is tiktoken's (rank,
//!   leftmost) order because a merge at rank `r` never creates a pair of rank `r` (the new pairs hold
//!   the merged token, so they spell longer tokens). When a merge creates a pair of a lower rank, the
//!   rest of the bucket waits and the lower rank goes first. Entries whose pair has changed since are
//!   skipped.
//!
//! A binary heap of (rank, position) did the same work with a cache miss per level: 1 MB of one letter
//! took about 150 ns per byte. Buckets in a hash map, with one array per field of a position, took 59
//! ns (310 instructions per byte under callgrind); finding a rank's bucket by indexing (`slot_of`), one
//! [`Node`] per position, asking the pair cache instead of the pair table, and not sorting buckets
//! that were filled in order take it to 24 ns, against 10 ns for prose (`benchmarks/worst_case.py`).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::encode::table::{RecentPairs, NO_MERGE};
use crate::encode::Encoder;
use crate::error::{try_push, try_reserve, AllocError};

/// The end of the list.
const NONE: u32 = u32::MAX;

/// Buffers kept between long pieces are freed past this many positions (20 bytes each), so that one
/// huge piece does not hold its memory for the rest of a file.
const KEEP_POSITIONS: usize = 1 << 16;

/// One position of the piece: the symbol that starts there (while it is alive), its neighbours in the
/// list, and the pair it starts. One struct rather than an array per field, so that a merge touches
/// one cache line per position instead of four.
#[derive(Clone, Copy)]
struct Node {
    symbol: u32,
    prev: u32,
    next: u32,
    /// The rank of the pair this symbol starts ([`NO_MERGE`]'s when none, or when merged away).
    rank: u32,
    merged: u32,
}

/// The positions whose pair had one rank when they were pushed.
struct Bucket {
    rank: u32,
    positions: Vec<u32>,
    /// Pushed in increasing order since the bucket was last emptied, so no sort is needed: the merges
    /// of one rank run left to right, and so do the pushes they make.
    sorted: bool,
}

/// How many positions a bucket merges between two looks at [`LongMerge::cancel`].
const CANCEL_CHECK: usize = 1 << 16;

/// The buffers of the long-piece merge loop, reused from piece to piece.
#[derive(Default)]
pub(crate) struct LongMerge {
    /// When set, the loop gives up and its output is garbage: one piece of 100 MB of one letter takes
    /// seconds, and Ctrl-C must not wait for it ([`Encoder::encode_cancellable`]).
    pub(crate) cancel: Option<Arc<AtomicBool>>,
    nodes: Vec<Node>,
    /// Rank to 1 + its index in `buckets` (0: no bucket yet); all zero between pieces.
    slot_of: Vec<u32>,
    buckets: Vec<Bucket>,
    /// The ranks whose bucket is not empty (and stale duplicates, skipped when popped).
    ranks: BinaryHeap<Reverse<u32>>,
}

impl LongMerge {
    /// Appends the ids of `piece` (as [`Encoder`]'s short merge loop would) to `out`, which must have
    /// room for them (at most one per byte). Fails when the buffers cannot grow (20 bytes per byte of
    /// the piece), with nothing appended and the buffers ready for the next piece.
    pub(crate) fn merge(
        &mut self,
        encoder: &Encoder,
        pairs: &mut RecentPairs,
        piece: &[u8],
        out: &mut Vec<u32>,
    ) -> Result<(), AllocError> {
        let merged = self.merge_positions(encoder, pairs, piece);
        if merged.is_ok() {
            let mut i = 0;
            while i != NONE {
                out.push(self.nodes[i as usize].symbol);
                i = self.nodes[i as usize].next;
            }
        }
        for bucket in &self.buckets {
            self.slot_of[bucket.rank as usize] = 0;
        }
        self.buckets.clear();
        self.ranks.clear();
        self.nodes.shrink_to(KEEP_POSITIONS);
        merged
    }

    /// Makes every merge of `piece` in `nodes`, whose list then holds its tokens from position 0.
    fn merge_positions(
        &mut self,
        encoder: &Encoder,
        pairs: &mut RecentPairs,
        piece: &[u8],
    ) -> Result<(), AllocError> {
        let n = piece.len();
        assert!(n < NONE as usize, "pieces are shorter than 4 GiB");
        if self.slot_of.len() < encoder.rank_limit() {
            let missing = encoder.rank_limit() - self.slot_of.len();
            try_reserve(&mut self.slot_of, missing)?;
            self.slot_of.resize(encoder.rank_limit(), 0);
        }
        self.nodes.clear();
        try_reserve(&mut self.nodes, n)?;
        self.nodes.extend(piece.iter().enumerate().map(|(i, &b)| {
            let (rank, merged) = match piece.get(i + 1) {
                Some(&b1) => encoder.byte_pair(b, b1),
                None => NO_MERGE,
            };
            Node {
                symbol: encoder.byte_id(b),
                prev: (i as u32).wrapping_sub(1),
                next: if i + 1 == n { NONE } else { i as u32 + 1 },
                rank,
                merged,
            }
        }));
        for i in 0..n {
            let rank = self.nodes[i].rank;
            if rank != NO_MERGE.0 {
                self.push(rank, i as u32)?;
            }
        }
        while let Some(Reverse(rank)) = self.ranks.pop() {
            let slot = self.slot_of[rank as usize] as usize - 1;
            let bucket = &mut self.buckets[slot];
            let mut positions = std::mem::take(&mut bucket.positions);
            if positions.is_empty() {
                continue;
            }
            if !std::mem::replace(&mut bucket.sorted, true) {
                positions.sort_unstable();
                positions.dedup();
            }
            for (k, &i) in positions.iter().enumerate() {
                if k % CANCEL_CHECK == 0 && self.cancelled() {
                    self.ranks.clear();
                    break;
                }
                if self.nodes[i as usize].rank != rank {
                    continue;
                }
                if self.merge_at(encoder, pairs, i)? < rank {
                    // A lower rank goes first; the rest of this bucket waits behind it.
                    for &later in &positions[k + 1..] {
                        self.push(rank, later)?;
                    }
                    break;
                }
            }
            positions.clear();
            let bucket = &mut self.buckets[slot];
            if bucket.positions.capacity() == 0 {
                bucket.positions = positions;
            }
        }
        Ok(())
    }

    fn cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(|cancel| cancel.load(Ordering::Relaxed))
    }

    /// Merges the pair at position `i` with the symbol after it, pushes the two pairs that changed,
    /// and returns the lower of their ranks.
    #[inline]
    fn merge_at(
        &mut self,
        encoder: &Encoder,
        pairs: &mut RecentPairs,
        i: u32,
    ) -> Result<u32, AllocError> {
        let node = self.nodes[i as usize];
        let gone = self.nodes[node.next as usize];
        // The right symbol's position is merged away: its pair is never valid again.
        self.nodes[node.next as usize].rank = NO_MERGE.0;
        let mut lowest = NO_MERGE.0;
        if node.prev != NONE {
            let left = &mut self.nodes[node.prev as usize];
            (left.rank, left.merged) = pairs.get(encoder, left.symbol, node.merged);
            if left.rank != NO_MERGE.0 {
                lowest = left.rank;
                self.push(lowest, node.prev)?;
            }
        }
        let (rank, merged) = match gone.next {
            NONE => NO_MERGE,
            right => {
                self.nodes[right as usize].prev = i;
                pairs.get(encoder, node.merged, self.nodes[right as usize].symbol)
            }
        };
        self.nodes[i as usize] = Node {
            symbol: node.merged,
            prev: node.prev,
            next: gone.next,
            rank,
            merged,
        };
        if rank != NO_MERGE.0 {
            lowest = lowest.min(rank);
            self.push(rank, i)?;
        }
        Ok(lowest)
    }

    /// Adds position `at` to the bucket of `rank`, and the rank to the heap if its bucket was empty.
    /// Always inlined: the loop's most frequent call (a call per push cost 10% of long pieces' time).
    #[inline(always)]
    fn push(&mut self, rank: u32, at: u32) -> Result<(), AllocError> {
        let slot = &mut self.slot_of[rank as usize];
        if *slot == 0 {
            let bucket = Bucket {
                rank,
                positions: Vec::new(),
                sorted: true,
            };
            try_push(&mut self.buckets, bucket)?;
            *slot = self.buckets.len() as u32;
        }
        let bucket = &mut self.buckets[*slot as usize - 1];
        match bucket.positions.last() {
            None => {
                if self.ranks.len() == self.ranks.capacity() {
                    grow_heap(&mut self.ranks)?;
                }
                self.ranks.push(Reverse(rank))
            }
            Some(&last) if last >= at => bucket.sorted = false,
            Some(_) => {}
        }
        try_push(&mut bucket.positions, at)
    }
}

#[cold]
#[inline(never)]
fn grow_heap(ranks: &mut BinaryHeap<Reverse<u32>>) -> Result<(), AllocError> {
    let wanted = (ranks.len() + 1).max(ranks.capacity() * 2);
    ranks
        .try_reserve(1)
        .map_err(|_| AllocError::of::<u32>(wanted))
}
