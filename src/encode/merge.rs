//! Where a merge happens: the two merge loops of the encoder, which turn a pre-token's bytes into ids.
//!
//! Both make tiktoken's merges (`byte_pair_merge`) in tiktoken's order: find the adjacent pair of the
//! lowest rank ([`MergeTable`]), leftmost among equals, merge it, repeat until no pair merges. So ids
//! equal tiktoken's for the same ranks. They differ in cost:
//!
//! - [`ShortMerge`], for pieces under [`LONG_PIECE`] bytes (nearly all): a scan over a small array of
//!   the pairs' ranks, quadratic in the piece but fastest for the usual few bytes.
//! - [`LongMerge`], for longer pieces: O(n log n), so that a megabyte of one letter (a pre-token can
//!   be that) does not take minutes as tiktoken's loop does.
//!
//! [`LongMerge`]'s structure: symbols are a linked list over fixed positions, and `Node::rank` is the
//! (rank, merged id) of the pair a position starts now. Candidates wait in one bucket of positions per
//! rank, and a small heap holds the ranks that have a bucket. The lowest rank's bucket is sorted and
//! merged left to right, which is the (rank, leftmost) order because a merge at rank `r` never creates
//! a pair of rank `r` (the new pairs hold the merged token, so they spell longer tokens). When a merge
//! creates a pair of a lower rank, the rest of the bucket waits and the lower rank goes first. Entries
//! whose pair has changed since are skipped. Buckets are found by indexing rather than hashing, and one
//! [`Node`] per position keeps a merge to one cache line per position: a binary heap of (rank,
//! position) had a cache miss per level.
//!
//! Both loops ask the [`MergeCache`] rather than the table: merging waits on memory otherwise.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::table::{MergeCache, MergeTable, NO_MERGE};
use crate::error::{try_push, try_reserve, try_vec, AllocError};

/// Pieces at least this long take [`LongMerge`].
pub(super) const LONG_PIECE: usize = 128;

/// The buffers of the short merge loop, allocated once at their largest so that merging never
/// allocates.
pub(super) struct ShortMerge {
    /// Room for the symbols of the longest piece, and for [`shift_down`]'s whole blocks past them.
    symbols: Vec<u32>,
    /// `ranks[i]` caches the (rank, merged id) of the pair starting at symbol `i`; as long.
    ranks: Vec<(u32, u32)>,
}

impl ShortMerge {
    /// Buffers for pieces shorter than [`LONG_PIECE`], or the error of their allocation.
    pub(super) fn new() -> Result<ShortMerge, AllocError> {
        Self::with_room(LONG_PIECE - 1)
    }

    /// Buffers for pieces of up to `longest` bytes (the tests check the long loop against this one on
    /// pieces of any length).
    fn with_room(longest: usize) -> Result<ShortMerge, AllocError> {
        Ok(ShortMerge {
            symbols: try_vec(0, longest + SHIFT_BLOCK)?,
            ranks: try_vec(NO_MERGE, longest + SHIFT_BLOCK)?,
        })
    }

    /// Appends the ids of `piece` (not empty, and no longer than the room) to `out`: find the lowest-ranked pair
    /// (leftmost among equals), merge it, repeat. A merge recomputes the two ranks around it.
    pub(super) fn merge(
        &mut self,
        table: &MergeTable,
        cache: &mut MergeCache,
        piece: &[u8],
        out: &mut Vec<u32>,
    ) {
        let ShortMerge { symbols, ranks } = self;
        let n = piece.len();
        debug_assert!(n >= 1 && n + SHIFT_BLOCK <= symbols.len());
        for (slot, &b) in symbols.iter_mut().zip(piece) {
            *slot = table.byte_id(b);
        }
        for (slot, w) in ranks.iter_mut().zip(piece.windows(2)) {
            *slot = table.byte_pair(w[0], w[1]);
        }
        // `pairs` pairs, and one more symbol.
        let mut pairs = n - 1;
        while pairs > 0 {
            // The leftmost of the lowest rank: a later pair replaces it only when strictly lower, which
            // is cheaper than `min_by_key` on (rank, index).
            let (mut i, mut rank) = (0, ranks[0].0);
            for (j, &(r, _)) in ranks[..pairs].iter().enumerate().skip(1) {
                if r < rank {
                    (i, rank) = (j, r);
                }
            }
            if rank == NO_MERGE.0 {
                break;
            }
            let merged = ranks[i].1;
            symbols[i] = merged;
            shift_down(symbols, i + 1, pairs + 1);
            shift_down(ranks, i, pairs);
            pairs -= 1;
            if i > 0 {
                ranks[i - 1] = cache.get(table, symbols[i - 1], merged);
            }
            if i < pairs {
                ranks[i] = cache.get(table, merged, symbols[i + 1]);
            }
        }
        for &id in &symbols[..pairs + 1] {
            out.push(id);
        }
    }
}

/// Elements [`shift_down`] moves at once.
const SHIFT_BLOCK: usize = 4;

/// Removes `v[at]` from `v[..len]`, moving the rest down by one; what lies past `len - 1` afterwards
/// is unspecified. `v` must have [`SHIFT_BLOCK`] elements of room past `len`. Moves whole blocks of a
/// fixed size, which compile to a few loads and stores: `Vec::remove` is a call to `memmove` per merge,
/// which cost more than the move itself for the few symbols of a short piece (11% of the instructions
/// of encoding CJK text).
#[inline(always)]
fn shift_down<T: Copy>(v: &mut [T], at: usize, len: usize) {
    assert!(len + SHIFT_BLOCK <= v.len());
    let mut k = at;
    while k + 1 < len {
        // SAFETY: `k + 1 < len`, so the block read, `v[k + 1..k + 1 + SHIFT_BLOCK]`, ends within the
        // room asserted above. Checked slices cost a third of the loop's instructions.
        unsafe {
            let block = v
                .as_ptr()
                .add(k + 1)
                .cast::<[T; SHIFT_BLOCK]>()
                .read_unaligned();
            v.as_mut_ptr()
                .add(k)
                .cast::<[T; SHIFT_BLOCK]>()
                .write_unaligned(block);
        }
        k += SHIFT_BLOCK;
    }
}

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
    /// seconds, and Ctrl-C must not wait for it ([`super::Encoder::encode_cancellable`]).
    pub(crate) cancel: Option<Arc<AtomicBool>>,
    nodes: Vec<Node>,
    /// Rank to 1 + its index in `buckets` (0: no bucket yet); all zero between pieces.
    slot_of: Vec<u32>,
    buckets: Vec<Bucket>,
    /// The ranks whose bucket is not empty (and stale duplicates, skipped when popped).
    ranks: BinaryHeap<Reverse<u32>>,
}

impl LongMerge {
    /// Appends the ids of `piece` (as [`ShortMerge`] would) to `out`, which must have
    /// room for them (at most one per byte). Fails when the buffers cannot grow (20 bytes per byte of
    /// the piece), with nothing appended and the buffers ready for the next piece.
    pub(crate) fn merge(
        &mut self,
        table: &MergeTable,
        cache: &mut MergeCache,
        piece: &[u8],
        out: &mut Vec<u32>,
    ) -> Result<(), AllocError> {
        let merged = self.merge_positions(table, cache, piece);
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
        table: &MergeTable,
        cache: &mut MergeCache,
        piece: &[u8],
    ) -> Result<(), AllocError> {
        let n = piece.len();
        assert!(n < NONE as usize, "pieces are shorter than 4 GiB");
        if self.slot_of.len() < table.rank_limit() {
            let missing = table.rank_limit() - self.slot_of.len();
            try_reserve(&mut self.slot_of, missing)?;
            self.slot_of.resize(table.rank_limit(), 0);
        }
        self.nodes.clear();
        try_reserve(&mut self.nodes, n)?;
        self.nodes.extend(piece.iter().enumerate().map(|(i, &b)| {
            let (rank, merged) = match piece.get(i + 1) {
                Some(&b1) => table.byte_pair(b, b1),
                None => NO_MERGE,
            };
            Node {
                symbol: table.byte_id(b),
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
                if self.merge_at(table, cache, i)? < rank {
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
        table: &MergeTable,
        cache: &mut MergeCache,
        i: u32,
    ) -> Result<u32, AllocError> {
        let node = self.nodes[i as usize];
        let gone = self.nodes[node.next as usize];
        // The right symbol's position is merged away: its pair is never valid again.
        self.nodes[node.next as usize].rank = NO_MERGE.0;
        let mut lowest = NO_MERGE.0;
        if node.prev != NONE {
            let left = &mut self.nodes[node.prev as usize];
            (left.rank, left.merged) = cache.get(table, left.symbol, node.merged);
            if left.rank != NO_MERGE.0 {
                lowest = left.rank;
                self.push(lowest, node.prev)?;
            }
        }
        let (rank, merged) = match gone.next {
            NONE => NO_MERGE,
            right => {
                self.nodes[right as usize].prev = i;
                cache.get(table, node.merged, self.nodes[right as usize].symbol)
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
    /// Always inlined: the loop's most frequent call, where a call costs as much as the push.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::table::SizedByText;
    use crate::encode::tests::{encoder, trained_encoder, xorshift};

    /// The ids of `piece` by the short loop and by the long loop, each with a cache of its own.
    fn both_loops(table: &MergeTable, piece: &[u8]) -> (Vec<u32>, Vec<u32>) {
        let (mut short, mut long) = (Vec::new(), Vec::new());
        let cache = || MergeCache::for_text(0).unwrap();
        ShortMerge::with_room(piece.len())
            .unwrap()
            .merge(table, &mut cache(), piece, &mut short);
        LongMerge::default()
            .merge(table, &mut cache(), piece, &mut long)
            .unwrap();
        (short, long)
    }

    #[test]
    fn long_pieces_merge_like_short_ones() {
        let e = encoder(
            &[b"aa", b"aaaa", b"ab"],
            &[(b"a", b"a"), (b"aa", b"aa"), (b"a", b"b")],
            &[],
        );
        for n in [1, 2, 3, 5, 7, 127, 128, 129, 1000, 1001] {
            for tail in ["", "b", "ab"] {
                let piece = format!("{}{tail}", "a".repeat(n));
                let (short, long) = both_loops(&e.merges, piece.as_bytes());
                assert_eq!(short, long, "{n} {tail}");
            }
        }
    }

    #[test]
    fn long_path_equals_short_path_on_trained_vocabularies() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        for round in 0..20 {
            let alphabet: &[u8] = if round % 2 == 0 { b"ab" } else { b"abcab  aab" };
            let text: String = (0..3000)
                .map(|_| alphabet[xorshift(&mut seed) as usize % alphabet.len()] as char)
                .collect();
            let e = trained_encoder(&text, 256 + 40);
            for len in [2, 3, 10, 129, 500] {
                let piece: Vec<u8> = (0..len)
                    .map(|_| alphabet[xorshift(&mut seed) as usize % alphabet.len()])
                    .collect();
                let (short, long) = both_loops(&e.merges, &piece);
                assert_eq!(
                    short,
                    long,
                    "round {round}, piece {:?}",
                    String::from_utf8_lossy(&piece)
                );
            }
        }
    }
}
