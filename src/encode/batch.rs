//! The worker threads' table of pieces ([`Batched`]): a large two-way table of pieces of up to
//! [`TABLE_PIECE`] bytes and their ids, looked up a batch of [`BATCH`] pieces at a time.
//!
//! `encode_file` and `encode_dataset` run each worker over gigabytes, and in web text the distinct words
//! keep coming (Heaps' law): the scratch's tables of recent pieces and its cache of merged pieces hold
//! the common ones, and the long tail was merged again and again (100 MB of `s2`'s web-like text: 2.2M
//! of its 26.2M pieces merged, each of them costing a few hundred nanoseconds). A table of hundreds of
//! thousands of pieces holds that tail, but it spans megabytes, and looked up one piece at a time each
//! lookup waits for memory about as long as merging the piece takes (larger caches of merged pieces
//! measured slower). So the scanner's pieces are taken a batch at a time, as gigatoken does: each
//! piece's key and set are computed and the set prefetched as the scanner finds it ([`Batched::fill`]),
//! and the batch is then looked up in order ([`Batched::push_hits`]), by when most sets have arrived.
//! The table is on 2 MB pages: on 4 KB pages its lookups also missed the TLB, and `encode_file` on C
//! ran 5% slower than without the table, against 1% on 2 MB pages.
//!
//! A piece the table misses is set aside and resolved later with others ([`super::lanes`]), so that
//! their lookups in the vocabulary and their merges wait on memory at the same time.
//!
//! The workers use it from the start. A call (`encode`) takes it up only once its tables of recent
//! pieces miss more than one piece in ten (`Scratch::count_window`): web-like text, German and French,
//! and CJK text do, and run 7-64% faster with the table; C source misses one in twenty, and ran 20%
//! slower with it, its short pieces costing more through a batch than through the small tables in L2
//! (`benchmarks/README.md`, the twenty-sixth session).
//!
//! An entry holds up to 3 ids, or up to 7 when every id fits in 16 bits (GPT-2's and most trained
//! vocabularies): in `s2`, 1.85M of the 3.85M distinct pieces of up to 15 bytes have more than 3 ids,
//! and they were merged again at nearly every occurrence (5.8M merges per GB), while 7 ids cover all
//! but a few. A piece new to the table goes into the second way of its set, and a hit in the second
//! way moves it to the first: a word seen once (most of the long tail) then replaces only another such
//! word, and the common words tend to stay.
//!
//! Invariants: an entry holds the ids of exactly the piece its key spells, in the layout of
//! [`Batched::narrow`]; a key is never all zero (its top byte is the piece's length), so an empty way
//! matches nothing; entries are replaced whole, and losing one only costs time.

use super::lanes::{Misses, LONGEST};
use crate::bytes_map::InlineKey;
use crate::error::{try_box, AllocError};
use crate::huge_pages;
use crate::prefetch::prefetch;
use crate::pretokenize::PreTokens;

/// The longest piece the table holds: its bytes and its length fill a 128-bit key.
pub(super) const TABLE_PIECE: usize = 15;

// The pieces the table misses are set aside whole.
const _: () = assert!(TABLE_PIECE <= LONGEST);

/// The pieces looked up together: enough that a set prefetched when its piece is found has arrived when
/// the piece is looked up.
pub(super) const BATCH: usize = 256;

/// The most ids of 32 bits an entry holds; pieces of more are not kept here.
const WIDE_IDS: usize = 3;

/// The most ids of 16 bits an entry holds, when every id fits in 16 bits ([`Batched::narrow`]).
const NARROW_IDS: usize = 7;

/// The most ids [`Batched::push_hits`] writes for an entry (a narrow entry's 7 and its count; a wide
/// entry's are 4), of which it then keeps the entry's count: the room it needs past the output's end.
pub(super) const WRITTEN_IDS: usize = NARROW_IDS + 1;

/// An entry's ids: [`WIDE_IDS`] ids of 32 bits and their number last, or [`NARROW_IDS`] ids of 16
/// bits and their number last, two to a word, low half first.
type Ids = [u32; WIDE_IDS + 1];

/// Two ways of one cache line: a piece looked up touches one line.
#[derive(Clone, Copy, Default)]
#[repr(C, align(64))]
struct Set {
    /// Each way's key (see [`table_key`]); all zero when empty.
    keys: [[u64; 2]; 2],
    /// Each way's ids.
    ids: [Ids; 2],
}

/// A piece's key in the table: its bytes, zero-padded, with its length in the top byte (a piece of at
/// most [`TABLE_PIECE`] bytes leaves that byte free), so that no key is all zero.
#[inline(always)]
fn table_key(key: &InlineKey) -> [u64; 2] {
    [key.lo, key.hi | (key.len as u64) << 56]
}

/// The table and the current batch: where each of its pieces starts, how long it is, its key and its
/// set. One allocation per worker, reused for every text it encodes.
pub(crate) struct Batched {
    sets: Vec<Set>,
    /// Whether the entries hold ids of 16 bits, set by [`Self::use_narrow_ids`].
    narrow: bool,
    /// Whether any entry was written since the table was last emptied.
    used: bool,
    /// 64 minus log2 of the number of sets: a set is the top bits of a product.
    shift: u32,
    start: [usize; BATCH],
    len: [usize; BATCH],
    /// The key of each piece (of its first [`TABLE_PIECE`] bytes when longer, never looked up), which
    /// a piece the table misses is then looked up with in the encoder's maps.
    key: [InlineKey; BATCH],
    set: [usize; BATCH],
    /// The pieces the table missed, set aside and resolved together ([`super::lanes`]).
    pub(super) misses: Misses,
}

impl Batched {
    /// A table of `sets` sets (a power of two, 64 bytes each) and empty batch buffers.
    pub(super) fn new(sets: usize) -> Result<Box<Batched>, AllocError> {
        debug_assert!(sets.is_power_of_two());
        // On 2 MB pages: a set per lookup, spread over megabytes, missed the TLB on 4 KB pages.
        let mut table: Vec<Set> = Vec::new();
        huge_pages::try_reserve(&mut table, sets)?;
        table.resize(sets, Set::default());
        try_box(Batched {
            sets: table,
            narrow: false,
            used: false,
            shift: 64 - sets.trailing_zeros(),
            start: [0; BATCH],
            len: [0; BATCH],
            key: [InlineKey {
                lo: 0,
                hi: 0,
                len: 0,
                hash: 0,
            }; BATCH],
            set: [0; BATCH],
            misses: Misses::new(BATCH)?,
        })
    }

    /// The sets for a worker that encodes chunks of `chunk` bytes: one per 8 bytes, from 32 up to
    /// `most`.
    pub(super) fn sets_for(chunk: usize, most: usize) -> usize {
        (chunk / 8).next_power_of_two().clamp(32, most)
    }

    /// Makes the entries hold ids of 16 bits (`narrow`, for an encoder whose ids all fit) or of 32;
    /// empties the table when that changes, so that no entry is read in the other layout.
    pub(super) fn use_narrow_ids(&mut self, narrow: bool) {
        if self.narrow != narrow {
            // A new table is empty already: filling it again would write its megabytes twice.
            if self.used {
                self.sets.fill(Set::default());
                self.used = false;
            }
            self.narrow = narrow;
        }
    }

    /// Takes up to [`BATCH`] more pieces of `text` from `pieces` (which must be pieces of `text`),
    /// computes their keys and sets and prefetches the sets; returns how many it took (fewer only at
    /// the end).
    #[inline(always)]
    pub(super) fn fill(&mut self, text: &[u8], pieces: &mut PreTokens<'_>) -> usize {
        let mut n = 0;
        while n < BATCH {
            let Some(piece) = pieces.next() else { break };
            let start = piece.as_ptr() as usize - text.as_ptr() as usize;
            // A longer piece gets the key of its first bytes, never used: one path for all.
            // SAFETY: the piece is a part of `text`, and so are its first bytes.
            let key = unsafe { InlineKey::at(text, start, piece.len().min(TABLE_PIECE)) };
            let set = (key.hash >> self.shift) as usize;
            prefetch(self.sets.as_ptr().wrapping_add(set));
            self.start[n] = start;
            self.len[n] = piece.len();
            self.key[n] = key;
            self.set[n] = set;
            n += 1;
        }
        n
    }

    /// The number of sets.
    pub(super) fn sets(&self) -> usize {
        self.sets.len()
    }

    /// Where piece `k` of the batch starts in the text, and its length.
    #[inline(always)]
    pub(super) fn piece(&self, k: usize) -> (usize, usize) {
        (self.start[k], self.len[k])
    }

    /// The key of piece `k` (of at most [`TABLE_PIECE`] bytes).
    #[inline(always)]
    pub(super) fn key(&self, k: usize) -> &InlineKey {
        &self.key[k]
    }

    /// The most ids an entry holds in the current layout.
    #[inline(always)]
    pub(super) fn most_ids(&self) -> usize {
        if self.narrow {
            NARROW_IDS
        } else {
            WIDE_IDS
        }
    }

    /// The ids of piece `k` (of at most [`TABLE_PIECE`] bytes), if the table has them, in the layout
    /// of [`Self::narrow`]. A hit in the second way moves to the first.
    #[inline(always)]
    fn hit(&mut self, k: usize) -> Option<Ids> {
        let key = table_key(&self.key[k]);
        // SAFETY: a set is the top bits of a word, below the number of sets.
        let set = unsafe { self.sets.get_unchecked_mut(self.set[k]) };
        let way = (set.keys[1] == key) as usize;
        if set.keys[way] != key {
            return None;
        }
        let ids = set.ids[way];
        if way == 1 {
            set.keys.swap(0, 1);
            set.ids.swap(0, 1);
        }
        Some(ids)
    }

    /// Appends the ids of piece `k` (of at most [`TABLE_PIECE`] bytes) and returns true, if the table
    /// has them. For the end of a text, where `out` may lack room for a whole entry: [`Self::push_hits`]
    /// writes the rest.
    pub(super) fn push_hit(&mut self, k: usize, out: &mut Vec<u32>) -> bool {
        let Some(ids) = self.hit(k) else {
            return false;
        };
        if self.narrow {
            let mut wide = [0u32; NARROW_IDS + 1];
            // SAFETY: `wide` holds the 8 ids it writes.
            unsafe { write_narrow(wide.as_mut_ptr(), &ids) };
            // Capped, so that no entry can make `push_first` claim ids it did not write.
            push_first(out, &wide, (wide[NARROW_IDS] as usize).min(NARROW_IDS));
        } else {
            push_first(out, &ids, (ids[WIDE_IDS] as usize).min(WIDE_IDS));
        }
        true
    }

    /// Appends the ids of pieces `k..n` of the batch while the table has them, and returns the first
    /// piece it stopped at (`n` when none): one longer than [`TABLE_PIECE`], one the table lacks, or
    /// one `out` may lack room for (less than [`WRITTEN_IDS`] left). Most pieces of most texts are
    /// hits, one after another: here the output's end stays in a register and an entry's ids go out
    /// in one or two unaligned stores, where a call of [`Self::push_hit`] for each piece kept the end
    /// in memory and moved the ids through the stack (first calls 13% faster on prose and on German
    /// and French, `benchmarks/README.md`).
    #[inline(always)]
    pub(super) fn push_hits(&mut self, k: usize, n: usize, out: &mut Vec<u32>) -> usize {
        match self.narrow {
            true => self.push_hits_in::<true>(k, n, out),
            false => self.push_hits_in::<false>(k, n, out),
        }
    }

    /// [`Self::push_hits`] for the layout of `NARROW`, which must be [`Self::narrow`].
    #[inline(always)]
    fn push_hits_in<const NARROW: bool>(
        &mut self,
        mut k: usize,
        n: usize,
        out: &mut Vec<u32>,
    ) -> usize {
        let (base, mut len, capacity) = (out.as_mut_ptr(), out.len(), out.capacity());
        while k < n && self.len[k] <= TABLE_PIECE && capacity - len >= WRITTEN_IDS {
            let Some(ids) = self.hit(k) else { break };
            // SAFETY: there is room for `WRITTEN_IDS` ids past `len`, the most either layout writes.
            unsafe {
                let end = base.add(len);
                if NARROW {
                    write_narrow(end, &ids);
                    len += ((ids[WIDE_IDS] >> 16) as usize).min(NARROW_IDS);
                } else {
                    end.cast::<Ids>().write_unaligned(ids);
                    len += (ids[WIDE_IDS] as usize).min(WIDE_IDS);
                }
            }
            k += 1;
        }
        // SAFETY: every id up to `len` is written (the count of an entry is capped at what it
        // holds), and `len` is within the capacity.
        unsafe { out.set_len(len) };
        k
    }

    /// Keeps `ids` as the ids of piece `k` (of at most [`TABLE_PIECE`] bytes), if they are no more than
    /// [`Self::most_ids`], in the second way of its set (a hit moves it to the first).
    #[inline(always)]
    pub(super) fn insert(&mut self, k: usize, ids: &[u32]) {
        let (set, key) = (self.set[k], self.key[k]);
        self.insert_at(set, &key, ids);
    }

    /// [`Self::insert`] for the piece of `key`, found in an earlier batch.
    #[inline(always)]
    pub(super) fn insert_key(&mut self, key: &InlineKey, ids: &[u32]) {
        self.insert_at((key.hash >> self.shift) as usize, key, ids);
    }

    /// [`Self::insert`] for the piece of `key`, whose set is `set`.
    #[inline(always)]
    fn insert_at(&mut self, set: usize, key: &InlineKey, ids: &[u32]) {
        if ids.len() > self.most_ids() {
            return;
        }
        let mut entry: Ids = [0; WIDE_IDS + 1];
        self.used = true;
        if self.narrow {
            debug_assert!(ids.iter().all(|&id| id <= 0xFFFF), "ids of 16 bits");
            let mut narrow = [0u32; NARROW_IDS + 1];
            narrow[..ids.len()].copy_from_slice(ids);
            narrow[NARROW_IDS] = ids.len() as u32;
            for (j, word) in entry.iter_mut().enumerate() {
                *word = narrow[2 * j] | narrow[2 * j + 1] << 16;
            }
        } else {
            entry[..ids.len()].copy_from_slice(ids);
            entry[WIDE_IDS] = ids.len() as u32;
        }
        let set = &mut self.sets[set];
        set.keys[1] = table_key(key);
        set.ids[1] = entry;
    }
}

/// Writes the 8 ids of 16 bits of a narrow entry (`ids`, two to a word, low half first) at `end` as
/// 8 ids of 32 bits: two unaligned stores on x86-64.
///
/// # Safety
///
/// `end` must be valid for writing 8 ids.
#[inline(always)]
unsafe fn write_narrow(end: *mut u32, ids: &Ids) {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    // SAFETY: SSE2 is there (the cfg); `ids` is 16 bytes, read unaligned; the caller's promise
    // covers the two stores of 16 bytes.
    unsafe {
        use std::arch::x86_64::{
            _mm_loadu_si128, _mm_setzero_si128, _mm_storeu_si128, _mm_unpackhi_epi16,
            _mm_unpacklo_epi16,
        };
        let halves = _mm_loadu_si128(ids.as_ptr().cast());
        let zero = _mm_setzero_si128();
        _mm_storeu_si128(end.cast(), _mm_unpacklo_epi16(halves, zero));
        _mm_storeu_si128(end.add(4).cast(), _mm_unpackhi_epi16(halves, zero));
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    for j in 0..NARROW_IDS + 1 {
        // SAFETY: the caller's promise.
        unsafe {
            end.add(j)
                .write_unaligned(ids[j / 2] >> (16 * (j % 2)) & 0xFFFF)
        };
    }
}

/// Appends the first `n` (at most `N`) of `ids` to `out`. Where `out` has room for all `N`, it writes
/// them all and then sets the length, which costs no branch on `n`: the tables of recent pieces answer
/// most pieces so, and their number of ids changes from piece to piece, which the branch predictor
/// rarely guesses.
#[inline(always)]
pub(super) fn push_first<const N: usize>(out: &mut Vec<u32>, ids: &[u32; N], n: usize) {
    debug_assert!(n <= N);
    if out.capacity() - out.len() >= N {
        // SAFETY: there is room for N more ids past the length, and the n <= N ids kept are
        // initialized by the write.
        unsafe {
            let end = out.as_mut_ptr().add(out.len());
            std::ptr::write_unaligned(end.cast::<[u32; N]>(), *ids);
            out.set_len(out.len() + n);
        }
    } else {
        out.extend_from_slice(&ids[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pretokenize::pretokenize;

    #[test]
    fn entries_give_back_every_id_and_count_in_both_layouts() {
        // Ids with the top bit of 16 set, the largest of 16 bits, zero, and of 32 bits for the wide layout.
        let text = "a b c d e f g h i j k l m n o p";
        for (narrow, ids) in [
            (true, &[0xFFFF, 0, 0x8000, 1, 0xFFFE, 0x7FFF, 0xFFFF][..]),
            (false, &[0xFFFF_FFFE, 0, 0x1_0000][..]),
        ] {
            let mut table = Batched::new(32).unwrap();
            table.use_narrow_ids(narrow);
            let n = table.fill(text.as_bytes(), &mut pretokenize(text));
            assert_eq!(n, 16);
            // Piece k keeps the first k % (most + 1) ids, from none to all.
            let most = table.most_ids();
            assert_eq!(most, ids.len());
            for k in 0..n {
                table.insert(k, &ids[..k % (most + 1)]);
            }
            for k in 0..n {
                let mut out = vec![7];
                // Two ways a set and 16 pieces in 32 sets: a piece may have been pushed out.
                if table.push_hit(k, &mut out) {
                    assert_eq!(out[1..], ids[..k % (most + 1)], "{narrow} {k}");
                    assert_eq!(out[0], 7);
                }
            }
            // The same ids through `push_hits`, in runs: it stops at each piece the table lacks.
            let mut out = Vec::with_capacity(n * most + 8);
            let (mut expected, mut hits, mut k) = (Vec::new(), Vec::new(), 0);
            while k < n {
                let stop = table.push_hits(k, n, &mut out);
                for j in k..stop {
                    expected.extend_from_slice(&ids[..j % (most + 1)]);
                }
                hits.extend(k..stop);
                assert_eq!(out, expected, "{narrow} {k}..{stop}");
                if stop < n {
                    assert!(
                        !table.push_hit(stop, &mut Vec::new()),
                        "{narrow} {stop} is no hit"
                    );
                }
                k = stop + 1;
            }
            assert!(hits.len() >= 4, "{narrow}: too few hits to test ({hits:?})");
            // Room running out within a run of hits: it stops at the next hit, which `push_hit` then
            // appends by growing the output.
            let j = *hits
                .iter()
                .find(|&&j| hits.contains(&(j + 1)) && j % (most + 1) > 0)
                .expect("two hits in a row, the first with ids");
            let mut out = Vec::with_capacity(WRITTEN_IDS);
            assert_eq!(table.push_hits(j, n, &mut out), j + 1, "{narrow} {j}");
            assert_eq!(out, ids[..j % (most + 1)], "{narrow} {j}");
            assert!(table.push_hit(j + 1, &mut out));
            let both = [&ids[..j % (most + 1)], &ids[..(j + 1) % (most + 1)]].concat();
            assert_eq!(out, both, "{narrow} {j}");
            // With less room than it writes for an entry it stops, having written nothing.
            let mut out = Vec::with_capacity(WRITTEN_IDS - 1);
            assert_eq!(table.push_hits(0, n, &mut out), 0);
            assert!(out.is_empty());
            // More ids than an entry holds are not kept.
            let mut long = ids.to_vec();
            long.push(1);
            table.insert(0, &long);
            let mut out = Vec::new();
            assert!(!table.push_hit(0, &mut out) || out.len() <= most);
        }
    }
}
