//! The pieces the table of pieces misses, set aside and resolved together ([`Misses`]): their lookups
//! in the vocabulary issued at once, and the pieces that are not one token merged in lanes that take
//! turns ([`Misses::merge_lanes`]), so that their waits on memory overlap instead of following each
//! other.
//!
//! A piece the table of pieces misses is looked up in the vocabulary (megabytes), and merged when it
//! is no token. Merging asks for the rank of each new pair, and a pair the [`MergeCache`] lacks is
//! read from the table of pairs (2 MB for GPT-2): on a first call over 20 MB of prose, about 280,000
//! such reads, each waiting for memory in turn, since a merge depends on the ranks the merge before
//! it read. Merging is a quarter of the workers' time on web-like text, most of it waiting so.
//!
//! So `Encoder::encode_batched` writes the ids of the pieces the table holds and sets the others aside
//! with the place their ids go ([`Misses::push`]), until [`MIN_MISSES`] are waiting or the text ends.
//! Then the vocabulary's slots of all of them are prefetched before any is read, a piece set aside
//! twice is resolved once ([`Misses::mark_copies`]), and the pieces that are not one token each get a
//! lane. A lane merges as [`super::merge`]'s short loop does (lowest rank, leftmost among equals)
//! while the ranks it needs are in the cache or ruled out by the table's filter of pairs; when one is
//! neither, the lane prefetches where the table keeps it and yields to the next lane, and by its next
//! turn the rank has arrived. Last, the ids are put in place in the output ([`Misses::put_in_place`]).
//!
//! Invariants: a lane's ids are those [`super::merge::ShortMerge`] gives the same piece (the tests
//! compare them), tiktoken's merge of the whole piece; each miss's ids go where the output ended when
//! it was set aside, before the ids of every piece after it, whatever order the lanes finish in.

use super::table::{MergeCache, MergeTable, NO_MERGE};
use crate::bytes_map::InlineKey;
use crate::error::{try_vec, AllocError};

/// A piece being merged: its symbols, the ranks of the pairs they form, and what is still to read.
#[derive(Clone, Copy)]
struct Lane {
    /// The miss (index into [`Misses::misses`]) this lane merges.
    miss: usize,
    /// The number of symbols.
    n: usize,
    symbols: [u32; LONGEST],
    /// `ranks[j]`: the (rank, merged id) of symbols `j` and `j + 1`.
    ranks: [(u32, u32); LONGEST],
    /// Bit `j`: no token holds the bytes on either side of the boundary after symbol `j` (a cut, see
    /// `Encoder::merge_segments`), so that pair never merges and is never asked.
    cuts: u32,
    /// Bit `j`: `ranks[j]` is still to be read from the cache, where it was prefetched.
    pending: u32,
}

impl Lane {
    const EMPTY: Lane = Lane {
        miss: 0,
        n: 0,
        symbols: [0; LONGEST],
        ranks: [NO_MERGE; LONGEST],
        cuts: 0,
        pending: 0,
    };
}

/// A piece set aside: the piece, where its ids go, and the ids once known.
#[derive(Clone, Copy, Debug)]
pub(super) struct Miss {
    /// The piece's key (of at most [`LONGEST`] bytes), by which the table of pieces keeps it.
    pub(super) key: InlineKey,
    /// Where the piece starts in the text.
    pub(super) start: usize,
    /// The output's length when the piece was set aside: its ids go there, before those of the
    /// pieces after it.
    pub(super) at: usize,
    /// Its ids, `ids[first..first + len]`.
    first: usize,
    len: usize,
    /// Whether a lane merged it (rather than a lookup finding it).
    pub(super) merged: bool,
    /// The earlier miss of the same piece whose ids it takes, or [`NO_COPY`].
    copy_of: usize,
}

/// [`Miss::copy_of`] of a miss resolved on its own.
const NO_COPY: usize = usize::MAX;

/// The longest piece a miss may be: the table of pieces' longest (`batch::TABLE_PIECE`) or longer.
pub(super) const LONGEST: usize = 15;

/// Misses are resolved once this many are set aside (or the text ends): enough lanes that the ranks a
/// lane prefetched have arrived when its turn comes again. A batch of prose misses about 4 pieces.
pub(super) const MIN_MISSES: usize = 32;

/// The misses set aside and the buffers that resolve them, allocated once at their largest.
pub(super) struct Misses {
    misses: Vec<Miss>,
    lanes: Vec<Lane>,
    /// The ids of the misses, each at most [`LONGEST`] (one per byte).
    ids: Vec<u32>,
}

/// [`Misses::mark_copies`] finds earlier misses of a piece through this many slots, by hash.
const COPY_SLOTS: usize = 256;

impl Misses {
    /// Buffers for the misses of a text encoded `batch` pieces at a time: up to [`MIN_MISSES`] less
    /// one wait, and a batch may add as many as it has (about 100 KB for batches of 256), or the
    /// error of their allocation.
    pub(super) fn new(batch: usize) -> Result<Misses, AllocError> {
        let most = MIN_MISSES - 1 + batch;
        let no_miss = Miss {
            key: InlineKey {
                lo: 0,
                hi: 0,
                len: 0,
                hash: 0,
            },
            start: 0,
            at: 0,
            first: 0,
            len: 0,
            merged: false,
            copy_of: NO_COPY,
        };
        let mut misses = try_vec(no_miss, most)?;
        misses.clear();
        let mut lanes = try_vec(Lane::EMPTY, most)?;
        lanes.clear();
        Ok(Misses {
            misses,
            lanes,
            ids: try_vec(0, most * LONGEST)?,
        })
    }

    /// Forgets the misses resolved.
    #[inline(always)]
    pub(super) fn clear(&mut self) {
        self.misses.clear();
        self.lanes.clear();
    }

    /// Sets aside the piece of `key` that starts at `start` in the text, whose ids go where the output
    /// ends now (`at`).
    #[inline(always)]
    pub(super) fn push(&mut self, key: &InlineKey, start: usize, at: usize) {
        debug_assert!(self.misses.len() < self.misses.capacity());
        let first = self.misses.len() * LONGEST;
        self.misses.push(Miss {
            key: *key,
            start,
            at,
            first,
            len: 0,
            merged: false,
            copy_of: NO_COPY,
        });
    }

    /// The number of misses set aside.
    #[inline(always)]
    pub(super) fn len(&self) -> usize {
        self.misses.len()
    }

    /// The misses set aside, in the text's order.
    pub(super) fn list(&self) -> &[Miss] {
        &self.misses
    }

    /// The ids of miss `i`, once resolved.
    pub(super) fn ids(&self, i: usize) -> &[u32] {
        let miss = &self.misses[i];
        &self.ids[miss.first..miss.first + miss.len]
    }

    /// Resolves miss `i` as `ids` (at most [`LONGEST`]).
    #[inline(always)]
    pub(super) fn resolve(&mut self, i: usize, ids: &[u32]) {
        let miss = &mut self.misses[i];
        self.ids[miss.first..miss.first + ids.len()].copy_from_slice(ids);
        miss.len = ids.len();
    }

    /// Marks each miss whose piece an earlier miss also is (a new word often comes again soon) as a
    /// copy of it, to be resolved by [`Self::resolve_copies`] rather than looked up and merged again.
    /// Finds them through a small table by hash: a copy it does not see is only resolved twice.
    pub(super) fn mark_copies(&mut self) {
        // Index + 1 of the last miss not a copy in each slot; 0 for none.
        let mut seen = [0u16; COPY_SLOTS];
        for i in 0..self.misses.len() {
            let key = self.misses[i].key;
            let slot = &mut seen[(key.hash >> (64 - COPY_SLOTS.trailing_zeros())) as usize];
            match slot.checked_sub(1).map(usize::from) {
                Some(j) if self.misses[j].key.same_bytes(&key) => self.misses[i].copy_of = j,
                _ => *slot = i as u16 + 1,
            }
        }
    }

    /// Whether miss `i` is marked as a copy of an earlier one.
    #[inline(always)]
    pub(super) fn is_copy(&self, i: usize) -> bool {
        self.misses[i].copy_of != NO_COPY
    }

    /// Gives each miss marked as another's copy ([`Self::mark_copies`]) that miss's ids, once those
    /// are resolved.
    pub(super) fn resolve_copies(&mut self) {
        for i in 0..self.misses.len() {
            let j = self.misses[i].copy_of;
            if j != NO_COPY {
                let (from, len) = (self.misses[j].first, self.misses[j].len);
                let miss = &mut self.misses[i];
                self.ids.copy_within(from..from + len, miss.first);
                miss.len = len;
            }
        }
    }

    /// Gives miss `i`, whose piece `piece` (2 to [`LONGEST`] bytes) is not one token, a lane:
    /// its bytes as symbols and the ranks of their pairs, from the byte tables.
    pub(super) fn add_lane(&mut self, i: usize, piece: &[u8], table: &MergeTable) {
        debug_assert!((2..=LONGEST).contains(&piece.len()));
        self.misses[i].merged = true;
        let mut lane = Lane {
            miss: i,
            n: piece.len(),
            ..Lane::EMPTY
        };
        for (slot, &b) in lane.symbols.iter_mut().zip(piece) {
            *slot = table.byte_id(b);
        }
        for (j, w) in piece.windows(2).enumerate() {
            lane.ranks[j] = table.byte_pair(w[0], w[1]);
            lane.cuts |= u32::from(!table.adjacent_in_token(w[0], w[1])) << j;
        }
        self.lanes.push(lane);
    }

    /// Merges every lane to its ids and resolves its miss with them. Each lane merges while the ranks
    /// it needs are in `cache`; on a rank that is not, it prefetches it and the next lane takes its
    /// turn.
    pub(super) fn merge_lanes(&mut self, table: &MergeTable, cache: &mut MergeCache) {
        let mut active = self.lanes.len();
        while active > 0 {
            let mut i = 0;
            while i < active {
                let lane = &mut self.lanes[i];
                if merge_until_wait(lane, table, cache) {
                    i += 1;
                    continue;
                }
                let (miss, n, symbols) = (lane.miss, lane.n, lane.symbols);
                self.resolve(miss, &symbols[..n]);
                active -= 1;
                // The last active lane takes the finished one's place, which is not read again: one
                // copy of a lane, where a swap made three.
                self.lanes[i] = self.lanes[active];
            }
        }
    }

    /// Inserts the ids of every miss, all resolved, into `out` where each was set aside: the ids
    /// written after a miss move up by the ids of the misses up to it. Moves each id once, from the
    /// last miss back. `out` must have room for the misses' ids past its length.
    pub(super) fn put_in_place(&self, out: &mut Vec<u32>) {
        let added: usize = self.misses.iter().map(|miss| miss.len).sum();
        assert!(
            out.capacity() - out.len() >= added,
            "room for the ids set aside"
        );
        let (mut end, mut shift) = (out.len(), added);
        let base = out.as_mut_ptr();
        for miss in self.misses.iter().rev() {
            assert!(miss.at <= end, "misses set aside in the output's order");
            // SAFETY: the ids from `at` to `end` are initialized and move to below `end + shift`,
            // which is at most the old length plus `added`, within the capacity asserted above; the
            // miss's ids then fill the gap left below them. Every place up to the old length plus
            // `added` is written by the end of the loop.
            unsafe {
                std::ptr::copy(base.add(miss.at), base.add(miss.at + shift), end - miss.at);
                shift -= miss.len;
                let ids = self.ids.as_ptr().add(miss.first);
                std::ptr::copy_nonoverlapping(ids, base.add(miss.at + shift), miss.len);
            }
            end = miss.at;
        }
        // SAFETY: every id up to the new length is written (see above).
        unsafe { out.set_len(out.len() + added) };
    }
}

/// Merges `lane` until it needs a rank that is not in the cache (returns true, the rank prefetched)
/// or no pair merges (returns false: the symbols are its ids). Reads first the ranks that it
/// prefetched when it last stopped.
#[inline]
fn merge_until_wait(lane: &mut Lane, table: &MergeTable, cache: &mut MergeCache) -> bool {
    let mut pending = lane.pending;
    while pending != 0 {
        let j = pending.trailing_zeros() as usize;
        pending &= pending - 1;
        lane.ranks[j] = cache.get(table, lane.symbols[j], lane.symbols[j + 1]);
    }
    lane.pending = 0;
    loop {
        let pairs = lane.n - 1;
        if pairs == 0 {
            return false;
        }
        // The leftmost of the lowest rank, as the short merge loop finds it.
        let (mut at, mut rank) = (0, lane.ranks[0].0);
        for j in 1..pairs {
            if lane.ranks[j].0 < rank {
                (at, rank) = (j, lane.ranks[j].0);
            }
        }
        if rank == NO_MERGE.0 {
            return false;
        }
        lane.symbols[at] = lane.ranks[at].1;
        for j in at + 1..pairs {
            lane.symbols[j] = lane.symbols[j + 1];
            lane.ranks[j - 1] = lane.ranks[j];
        }
        lane.ranks[pairs - 1] = NO_MERGE;
        lane.n -= 1;
        // The boundary after symbol `at` is gone: those above it move down one.
        let below = (1u32 << at) - 1;
        lane.cuts = lane.cuts & below | lane.cuts >> 1 & !below;
        let mut wait = false;
        for j in [at.wrapping_sub(1), at] {
            if j >= lane.n - 1 {
                continue;
            }
            if lane.cuts >> j & 1 != 0 {
                lane.ranks[j] = NO_MERGE;
                continue;
            }
            match cache.probe(table, lane.symbols[j], lane.symbols[j + 1]) {
                Some(rank) => lane.ranks[j] = rank,
                None => {
                    lane.pending |= 1 << j;
                    wait = true;
                }
            }
        }
        if wait {
            return true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::batch::BATCH;
    use crate::encode::merge::ShortMerge;
    use crate::encode::table::SizedByText;
    use crate::encode::tests::{trained_encoder, xorshift};

    #[test]
    fn lanes_merge_as_the_short_loop_does_whatever_order_they_finish_in() {
        // Pieces of 2 to 15 bytes with bytes that no token joins (cuts), so that lanes merge for
        // different numbers of turns; a cache of 64 pairs shared by all of them and by the short
        // loop, so that most ranks are prefetched and waited for, and pairs evict each other between
        // a lane's turns. Runs of one letter have equal ranks side by side: the leftmost merges.
        let training = "the then thence abcabcabc ab ba aaaaaaa bbb cabbage ".repeat(40);
        let e = trained_encoder(&training, 256 + 60);
        let text = training.as_bytes();
        let mut seed = 0x0123_4567_89AB_CDEFu64;
        let mut lanes = Misses::new(BATCH).unwrap();
        let mut cache = MergeCache::for_text(0).unwrap();
        assert_eq!(cache.entries(), 64);
        let mut short = ShortMerge::new().unwrap();
        let (mut merged_lanes, mut all) = (0, 0);
        for round in 0..200 {
            lanes.clear();
            let count = 1 + xorshift(&mut seed) as usize % (MIN_MISSES - 1 + BATCH);
            let pieces: Vec<Vec<u8>> = (0..count)
                .map(|_| {
                    // A stretch of the training text, a byte in eight replaced by one no token holds.
                    let len = 2 + xorshift(&mut seed) as usize % (LONGEST - 1);
                    let start = xorshift(&mut seed) as usize % (text.len() - len);
                    let mut piece = text[start..start + len].to_vec();
                    for b in piece.iter_mut() {
                        if xorshift(&mut seed) % 8 == 0 {
                            *b = 0xFF;
                        }
                    }
                    piece
                })
                .collect();
            for (i, piece) in pieces.iter().enumerate() {
                lanes.push(&InlineKey::new(piece), i, 0);
                lanes.add_lane(i, piece, &e.merges);
            }
            lanes.merge_lanes(&e.merges, &mut cache);
            for (i, piece) in pieces.iter().enumerate() {
                let mut ids = Vec::new();
                short.merge(&e.merges, &mut cache, piece, &mut ids);
                assert_eq!(lanes.ids(i), ids, "{round} {i}: {piece:?}");
                merged_lanes += usize::from(ids.len() < piece.len());
                all += 1;
            }
        }
        // Most pieces merged something, so the lanes took turns.
        assert!(merged_lanes > all / 4, "{merged_lanes} of {all}");
    }

    #[test]
    fn misses_go_where_they_were_set_aside_and_copies_take_the_ids_they_copy() {
        let e = trained_encoder(&"abcabc abab ".repeat(20), 256 + 10);
        let mut misses = Misses::new(BATCH).unwrap();
        let mut cache = MergeCache::for_text(0).unwrap();
        let (word, other) = (InlineKey::new(b"abcab"), InlineKey::new(b"xy"));
        // Set aside before the output's first id, and twice before its last.
        misses.push(&word, 7, 0);
        misses.push(&other, 20, 3);
        misses.push(&word, 30, 3);
        misses.mark_copies();
        assert!(!misses.is_copy(0) && !misses.is_copy(1) && misses.is_copy(2));
        misses.add_lane(0, b"abcab", &e.merges);
        misses.resolve(1, &[5, 6]);
        misses.merge_lanes(&e.merges, &mut cache);
        misses.resolve_copies();
        let mut ids = Vec::new();
        ShortMerge::new()
            .unwrap()
            .merge(&e.merges, &mut cache, b"abcab", &mut ids);
        assert!(ids.len() < 5, "abcab merges");
        assert_eq!(misses.ids(0), ids);
        assert_eq!(misses.ids(2), ids);
        let list = misses.list();
        assert_eq!((list[2].start, list[2].at), (30, 3));
        assert!(list[0].merged && !list[1].merged && !list[2].merged);
        let mut out = Vec::with_capacity(4 + 2 + 2 * ids.len());
        out.extend_from_slice(&[100, 101, 102, 103]);
        misses.put_in_place(&mut out);
        let expected = [&ids[..], &[100, 101, 102, 5, 6], &ids, &[103]].concat();
        assert_eq!(out, expected);
        // With no room for them, nothing is written out of bounds.
        let mut full = vec![1, 2, 3, 4];
        full.shrink_to_fit();
        let panicked = std::panic::catch_unwind(move || misses.put_in_place(&mut full));
        assert!(panicked.is_err());
    }
}
