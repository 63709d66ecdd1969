//! The worker threads' table of pieces ([`PieceTable`], looked up through a [`Batched`]): a large
//! two-way table of pieces of up to [`TABLE_PIECE`] bytes and their ids, looked up a batch of
//! [`BATCH`] pieces at a time: a worker's or a call's own, or shared by the workers of a run.
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
//! The workers of a run of more than two threads share one table ([`PieceTable::for_workers`]), which
//! they read and write under a sequence lock per way ([`PieceTable`]); with fewer, each has its own. A
//! table each took 32 MB a worker: `encode_dataset` peaked at 331 MB on 4 threads and 580 MB on 8,
//! against 236 and 367 MB shared. On 2 threads a shared table ran at 0.99-1.01 of a table each (a
//! prototype that shared it without the lock ran 4-7% faster: the lock costs about what sharing saves;
//! `benchmarks/README.md`, the thirty-third session), so two workers keep theirs.
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
//! [`PieceTable::narrow`]; a key is never all zero (its top byte is the piece's length), so an empty
//! way matches nothing; entries are replaced whole, and losing one only costs time; a table that is
//! not [`PieceTable::shared`] is one `Batched`'s own, and only that one thread reads or writes it.

use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{fence, AtomicBool, AtomicU64};
use std::sync::Arc;

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

/// The most ids of 16 bits an entry holds, when every id fits in 16 bits ([`PieceTable::narrow`]).
const NARROW_IDS: usize = 7;

/// The most ids [`Batched::push_hits`] writes for an entry (a narrow entry's 7 and its count; a wide
/// entry's are 4), of which it then keeps the entry's count: the room it needs past the output's end.
pub(super) const WRITTEN_IDS: usize = NARROW_IDS + 1;

/// An entry's ids: [`WIDE_IDS`] ids of 32 bits, or [`NARROW_IDS`] ids of 16 bits two to a word (low
/// half first), and in the last word's high half their number ([`COUNT_SHIFT`]) and the way's
/// [`WRITING`] bit and version.
type Ids = [u32; WIDE_IDS + 1];

/// Where an entry's number of ids starts in its last word (3 bits: at most [`NARROW_IDS`]).
const COUNT_SHIFT: u32 = 16;

/// In a way's last word of ids: set while a worker writes the way ([`PieceTable::shared`]).
const WRITING: u32 = 1 << 19;

/// In a way's last word of ids: the lowest bit of its version, the 12 bits above [`WRITING`], which
/// each write of the way in a shared table steps.
const VERSION_STEP: u32 = 1 << 20;

/// An entry's number of ids, of which `push_hits` keeps the first.
#[inline(always)]
fn count(ids: &Ids) -> usize {
    (ids[WIDE_IDS] >> COUNT_SHIFT & 7) as usize
}

/// Two ways of one cache line, as words: a piece looked up touches one line. Words `2w` and
/// `2w + 1` are way `w`'s key (see [`table_key`]), all zero when empty; words `4 + 2w` and `5 + 2w`
/// are its ids ([`Ids`], two to a word, low first). The last, its guard, carries the way's
/// [`WRITING`] bit and version.
#[derive(Default)]
#[repr(C, align(64))]
struct Set {
    words: [AtomicU64; 8],
}

/// A set as the one thread that uses a table of its own reads and writes it: plain words, in the
/// layout of [`Set`] (each way's key, then each way's ids).
#[repr(C, align(64))]
struct OwnSet {
    keys: [[u64; 2]; 2],
    ids: [Ids; 2],
}

const _: () = assert!(size_of::<OwnSet>() == size_of::<Set>());

impl Set {
    /// [`Self::get`] for a table of one thread's own: plain loads and stores, as the words of no set
    /// are then read or written by another thread.
    ///
    /// # Safety
    ///
    /// No other thread may access the set meanwhile.
    #[inline(always)]
    unsafe fn get_own(&self, key: [u64; 2]) -> Option<Ids> {
        // SAFETY: the words are atomics, so their bytes lie in `UnsafeCell`s and may be written
        // through a shared reference; `OwnSet` has their size and alignment and every bit pattern is
        // valid for it; and the caller's promise excludes any other access while this one lasts.
        let set = unsafe { &mut *self.words.as_ptr().cast_mut().cast::<OwnSet>() };
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

    /// [`PieceTable::insert`]'s write of the second way for a table of one thread's own.
    ///
    /// # Safety
    ///
    /// As [`Self::get_own`].
    #[inline(always)]
    unsafe fn insert_own(&self, key: [u64; 2], ids: Ids) {
        // SAFETY: as in `get_own`.
        let set = unsafe { &mut *self.words.as_ptr().cast_mut().cast::<OwnSet>() };
        set.keys[1] = key;
        set.ids[1] = ids;
    }

    /// The ids of `key`'s piece if the set has it; a hit in the second way moves to the first. With
    /// `SHARED` ([`PieceTable::shared`]), read and moved under the ways' locks (see its docs): the
    /// guards are loaded first, the key and ids in order after them, and the guard of the way hit
    /// again last.
    #[inline(always)]
    fn get<const SHARED: bool>(&self, key: [u64; 2]) -> Option<Ids> {
        if !SHARED {
            // SAFETY: a table that is not shared is one `Batched`'s own (`Batched::new`), used by
            // one thread at a time.
            return unsafe { self.get_own(key) };
        }
        let words = &self.words;
        let guards = [
            words[ids_word(0) + 1].load(Acquire),
            words[ids_word(1) + 1].load(Acquire),
        ];
        let keys = [0, 1].map(|way| {
            [
                words[key_word(way)].load(Acquire),
                words[key_word(way) + 1].load(Acquire),
            ]
        });
        let way = (keys[1] == key) as usize;
        if keys[way] != key {
            return None;
        }
        let (first, guard) = (words[ids_word(way)].load(Acquire), guards[way]);
        if guard & WRITING_WORD != 0 || words[ids_word(way) + 1].load(Relaxed) != guard {
            return None;
        }
        if way == 1 {
            self.promote(keys, guards, first);
        }
        Some([
            first as u32,
            (first >> 32) as u32,
            guard as u32,
            (guard >> 32) as u32,
        ])
    }

    /// Swaps the two ways of a shared table's set whose second way was just hit, given `keys`,
    /// `guards` and the second way's first ids word as read, when both ways can be taken unchanged
    /// since.
    #[inline(always)]
    fn promote(&self, keys: [[u64; 2]; 2], guards: [u64; 2], second: u64) {
        let words = &self.words;
        let (guard0, guard1) = (ids_word(0) + 1, ids_word(1) + 1);
        let take = |word: usize, guard: u64| {
            guard & WRITING_WORD == 0
                && words[word]
                    .compare_exchange(guard, guard | WRITING_WORD, Acquire, Relaxed)
                    .is_ok()
        };
        if !take(guard1, guards[1]) {
            return;
        }
        if !take(guard0, guards[0]) {
            words[guard1].store(guards[1], Release);
            return;
        }
        fence(Release);
        let first = words[ids_word(0)].load(Relaxed);
        for (way, (key, ids)) in [(keys[1], second), (keys[0], first)]
            .into_iter()
            .enumerate()
        {
            words[key_word(way)].store(key[0], Relaxed);
            words[key_word(way) + 1].store(key[1], Relaxed);
            words[ids_word(way)].store(ids, Relaxed);
        }
        words[guard0].store(next_guard(guards[1], guards[0]), Release);
        words[guard1].store(next_guard(guards[0], guards[1]), Release);
    }
}

/// The word of a set that holds way `way`'s key (and the next word its second half).
const fn key_word(way: usize) -> usize {
    2 * way
}

/// The word of a set that holds way `way`'s first ids (and the next word, its guard, the rest).
const fn ids_word(way: usize) -> usize {
    4 + 2 * way
}

/// [`WRITING`] in a guard word.
const WRITING_WORD: u64 = (WRITING as u64) << 32;

/// A guard word's version bits.
const VERSION_WORD: u64 = !(((VERSION_STEP as u64) << 32) - 1);

/// The guard word that holds `data` (a guard's ids and count, without version) and the version
/// after that of `old`: the version of a way steps at each write, wrapping.
#[inline(always)]
fn next_guard(data: u64, old: u64) -> u64 {
    data & !(VERSION_WORD | WRITING_WORD)
        | (old & VERSION_WORD).wrapping_add((VERSION_STEP as u64) << 32)
}

/// A piece's key in the table: its bytes, zero-padded, with its length in the top byte (a piece of at
/// most [`TABLE_PIECE`] bytes leaves that byte free), so that no key is all zero.
#[inline(always)]
fn table_key(key: &InlineKey) -> [u64; 2] {
    [key.lo, key.hi | (key.len as u64) << 56]
}

/// The table of pieces: a call's or a worker's own, or one shared by the workers of a run of more than
/// two threads ([`Self::shared`]), so that a piece one worker merged is a hit for the others, and the
/// table's memory does not grow with the threads.
///
/// A shared table's ways are read and written as a sequence lock each: a writer takes a way by
/// setting its [`WRITING`] bit (a compare-and-swap, so that two writers never write one way at once:
/// the loser leaves it, which only costs time), writes the key and ids, and stores the guard with the
/// version stepped and the bit cleared. A reader loads the guard, the key and the ids, then the guard
/// again, and takes the entry only when the two guards are equal and not being written: then no write
/// of the way began or ended between them, so the key and ids it read are one entry's. The version has
/// 12 bits: a reader would be fooled only if exactly a multiple of 4,096 writes of that one way
/// happened between its two loads of a few nanoseconds. A table of one's own is written without the
/// lock and read without the second load.
pub(crate) struct PieceTable {
    sets: Vec<Set>,
    /// Whether the entries hold ids of 16 bits, fixed for a shared table ([`Batched::use_narrow_ids`]).
    narrow: bool,
    /// Whether workers share the table, and write it under the ways' locks.
    shared: bool,
    /// Whether any entry was written since the table was last emptied.
    used: AtomicBool,
    /// 64 minus log2 of the number of sets: a set is the top bits of a product.
    shift: u32,
}

impl PieceTable {
    /// An empty table of `sets` sets (a power of two, 64 bytes each) whose entries hold ids of 16
    /// bits if `narrow`, shared by worker threads if `shared`.
    fn new(sets: usize, narrow: bool, shared: bool) -> Result<PieceTable, AllocError> {
        debug_assert!(sets.is_power_of_two());
        // On 2 MB pages: a set per lookup, spread over megabytes, missed the TLB on 4 KB pages.
        let mut table: Vec<Set> = Vec::new();
        huge_pages::try_reserve(&mut table, sets)?;
        table.resize_with(sets, Set::default);
        Ok(PieceTable {
            sets: table,
            narrow,
            shared,
            used: AtomicBool::new(false),
            shift: 64 - sets.trailing_zeros(),
        })
    }

    /// An empty table of `sets` sets (a power of two) for the workers of a run to share, its entries
    /// in the layout of `narrow`. A table that is not shared is one `Batched`'s own
    /// ([`Batched::new`]), which no other thread can reach.
    pub(super) fn for_workers(sets: usize, narrow: bool) -> Result<Arc<PieceTable>, AllocError> {
        Ok(Arc::new(PieceTable::new(sets, narrow, true)?))
    }

    /// The number of sets.
    pub(super) fn sets(&self) -> usize {
        self.sets.len()
    }

    /// The most ids an entry holds in the table's layout.
    #[inline(always)]
    fn most_ids(&self) -> usize {
        if self.narrow {
            NARROW_IDS
        } else {
            WIDE_IDS
        }
    }

    /// The set of a hash.
    #[inline(always)]
    fn set_of(&self, hash: u64) -> usize {
        (hash >> self.shift) as usize
    }

    /// Set `i`, which must be below the number of sets.
    #[inline(always)]
    fn set(&self, i: usize) -> &Set {
        debug_assert!(i < self.sets.len());
        // SAFETY: the caller's promise.
        unsafe { self.sets.get_unchecked(i) }
    }

    /// Keeps `ids` (no more than [`Self::most_ids`], each of 16 bits in the narrow layout) as the ids
    /// of `key`'s piece in the second way of set `i` (a hit moves it to the first). In a shared table,
    /// not when another worker is writing that way.
    #[inline(always)]
    fn insert(&self, i: usize, key: &InlineKey, ids: &[u32]) {
        if ids.len() > self.most_ids() || self.narrow && ids.iter().any(|&id| id > 0xFFFF) {
            return;
        }
        if !self.used.load(Relaxed) {
            self.used.store(true, Relaxed);
        }
        let mut entry: Ids = [0; WIDE_IDS + 1];
        if self.narrow {
            let mut narrow = [0u32; NARROW_IDS + 1];
            narrow[..ids.len()].copy_from_slice(ids);
            for (j, word) in entry.iter_mut().enumerate() {
                *word = narrow[2 * j] | narrow[2 * j + 1] << 16;
            }
        } else {
            entry[..ids.len()].copy_from_slice(ids);
        }
        entry[WIDE_IDS] |= (ids.len() as u32) << COUNT_SHIFT;
        let set = self.set(i);
        let key = table_key(key);
        if !self.shared {
            // SAFETY: as in `Set::get`.
            unsafe { set.insert_own(key, entry) };
            return;
        }
        let first = entry[0] as u64 | (entry[1] as u64) << 32;
        let data = entry[2] as u64 | (entry[3] as u64) << 32;
        let (words, guard) = (&set.words, ids_word(1) + 1);
        let old = words[guard].load(Relaxed);
        if old & WRITING_WORD != 0
            || words[guard]
                .compare_exchange(old, old | WRITING_WORD, Acquire, Relaxed)
                .is_err()
        {
            return;
        }
        fence(Release);
        words[key_word(1)].store(key[0], Relaxed);
        words[key_word(1) + 1].store(key[1], Relaxed);
        words[ids_word(1)].store(first, Relaxed);
        words[guard].store(next_guard(data, old), Release);
    }

    /// Empties the table and makes its entries hold ids of 16 bits if `narrow`.
    fn empty_as(&mut self, narrow: bool) {
        if *self.used.get_mut() {
            self.sets.fill_with(Set::default);
            *self.used.get_mut() = false;
        }
        self.narrow = narrow;
    }
}

/// A worker's or a call's batch of pieces: where each of its pieces starts, how long it is, its key
/// and its set, and the table of pieces they are looked up in. One allocation per worker, reused for
/// every text it encodes.
pub(crate) struct Batched {
    table: Arc<PieceTable>,
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
    /// Empty batch buffers and a table of its own of `sets` sets (a power of two, 64 bytes each).
    pub(super) fn new(sets: usize) -> Result<Box<Batched>, AllocError> {
        Batched::with_table(Arc::new(PieceTable::new(sets, false, false)?))
    }

    /// Empty batch buffers for `table`, which may be shared.
    pub(super) fn with_table(table: Arc<PieceTable>) -> Result<Box<Batched>, AllocError> {
        try_box(Batched {
            table,
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
    /// empties the table when that changes, so that no entry is read in the other layout. A shared
    /// table is made in its workers' encoder's layout ([`PieceTable::for_workers`]), and keeps it: its
    /// entries are read in that layout, and ids it cannot hold are not kept.
    pub(super) fn use_narrow_ids(&mut self, narrow: bool) {
        if self.table.narrow != narrow {
            if let Some(table) = Arc::get_mut(&mut self.table) {
                table.empty_as(narrow);
            }
        }
    }

    /// Takes up to [`BATCH`] more pieces of `text` from `pieces` (which must be pieces of `text`),
    /// computes their keys and sets and prefetches the sets; returns how many it took (fewer only at
    /// the end).
    #[inline(always)]
    pub(super) fn fill(&mut self, text: &[u8], pieces: &mut PreTokens<'_>) -> usize {
        let mut n = 0;
        let (sets, shift) = (self.table.sets.as_ptr(), self.table.shift);
        while n < BATCH {
            let Some(piece) = pieces.next() else { break };
            let start = piece.as_ptr() as usize - text.as_ptr() as usize;
            // A longer piece gets the key of its first bytes, never used: one path for all.
            // SAFETY: the piece is a part of `text`, and so are its first bytes.
            let key = unsafe { InlineKey::at(text, start, piece.len().min(TABLE_PIECE)) };
            let set = (key.hash >> shift) as usize;
            prefetch(sets.wrapping_add(set));
            self.start[n] = start;
            self.len[n] = piece.len();
            self.key[n] = key;
            self.set[n] = set;
            n += 1;
        }
        n
    }

    /// The number of sets of the table.
    pub(super) fn sets(&self) -> usize {
        self.table.sets()
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

    /// The most ids an entry holds in the table's layout.
    #[inline(always)]
    pub(super) fn most_ids(&self) -> usize {
        self.table.most_ids()
    }

    /// The ids of piece `k` (of at most [`TABLE_PIECE`] bytes), if the table has them, in the layout
    /// of [`PieceTable::narrow`].
    #[inline(always)]
    fn hit<const SHARED: bool>(&self, k: usize) -> Option<Ids> {
        self.table
            .set(self.set[k])
            .get::<SHARED>(table_key(&self.key[k]))
    }

    /// Appends the ids of piece `k` (of at most [`TABLE_PIECE`] bytes) and returns true, if the table
    /// has them. For the end of a text, where `out` may lack room for a whole entry: [`Self::push_hits`]
    /// writes the rest.
    pub(super) fn push_hit(&mut self, k: usize, out: &mut Vec<u32>) -> bool {
        let found = match self.table.shared {
            true => self.hit::<true>(k),
            false => self.hit::<false>(k),
        };
        let Some(ids) = found else {
            return false;
        };
        if self.table.narrow {
            let mut wide = [0u32; NARROW_IDS + 1];
            // SAFETY: `wide` holds the 8 ids it writes.
            unsafe { write_narrow(wide.as_mut_ptr(), &ids) };
            push_first(out, &wide, count(&ids));
        } else {
            // Capped, so that no entry can make `push_first` claim ids it did not write.
            push_first(out, &ids, count(&ids).min(WIDE_IDS));
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
        match (self.table.narrow, self.table.shared) {
            (true, false) => self.push_hits_in::<true, false>(k, n, out),
            (false, false) => self.push_hits_in::<false, false>(k, n, out),
            (true, true) => self.push_hits_in::<true, true>(k, n, out),
            (false, true) => self.push_hits_in::<false, true>(k, n, out),
        }
    }

    /// [`Self::push_hits`] for the layout of `NARROW`, which must be [`PieceTable::narrow`], and
    /// `SHARED`, which must be [`PieceTable::shared`].
    #[inline(always)]
    fn push_hits_in<const NARROW: bool, const SHARED: bool>(
        &mut self,
        mut k: usize,
        n: usize,
        out: &mut Vec<u32>,
    ) -> usize {
        let (base, mut len, capacity) = (out.as_mut_ptr(), out.len(), out.capacity());
        let sets = &self.table.sets;
        while k < n && self.len[k] <= TABLE_PIECE && capacity - len >= WRITTEN_IDS {
            // SAFETY: a set is the top bits of a word, below the number of sets.
            let set = unsafe { sets.get_unchecked(self.set[k]) };
            let Some(ids) = set.get::<SHARED>(table_key(&self.key[k])) else {
                break;
            };
            // SAFETY: there is room for `WRITTEN_IDS` ids past `len`, the most either layout writes.
            unsafe {
                let end = base.add(len);
                if NARROW {
                    write_narrow(end, &ids);
                    len += count(&ids);
                } else {
                    end.cast::<Ids>().write_unaligned(ids);
                    len += count(&ids).min(WIDE_IDS);
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

    /// Prefetches the sets of the pieces set aside, to be kept in a shared table once merged: its
    /// writes take a way with a compare-and-swap, which waits for the set's line where a store would
    /// not.
    pub(super) fn prefetch_missed_sets(&self) {
        if self.table.shared {
            for miss in self.misses.list() {
                let set = self.table.set_of(miss.key.hash);
                prefetch(self.table.sets.as_ptr().wrapping_add(set));
            }
        }
    }

    /// [`Self::insert`] for the piece of `key`, found in an earlier batch.
    #[inline(always)]
    pub(super) fn insert_key(&mut self, key: &InlineKey, ids: &[u32]) {
        self.insert_at(self.table.set_of(key.hash), key, ids);
    }

    /// [`Self::insert`] for the piece of `key`, whose set is `set`.
    #[inline(always)]
    fn insert_at(&mut self, set: usize, key: &InlineKey, ids: &[u32]) {
        self.table.insert(set, key, ids);
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

    /// The ids a test keeps for piece `i` of [`words`] in the layout of `narrow`: from none to all
    /// that an entry holds, each telling `i` and its place apart.
    fn ids_of(i: usize, narrow: bool) -> Vec<u32> {
        let (most, top) = match narrow {
            true => (NARROW_IDS, 0xFFFF),
            false => (WIDE_IDS, u32::MAX),
        };
        (0..i % (most + 1))
            .map(|j| (i as u32 * 8 + j as u32).wrapping_mul(0x9E37_79B9) & top)
            .collect()
    }

    /// A text of `n` (at most 676) distinct pieces of a space and two letters.
    fn words(n: usize) -> String {
        let letter = |i: usize| char::from(b'a' + i as u8);
        (0..n)
            .map(|i| format!(" {}{}", letter(i / 26), letter(i % 26)))
            .collect()
    }

    #[test]
    fn workers_sharing_a_table_read_only_whole_entries() {
        // Two threads write and look up the same 96 pieces in 4 sets at once, so that ways are
        // written while the other thread reads them. A read that took one entry's key with another's
        // ids (or half of them) would give ids that are not its piece's.
        let text = words(96);
        for narrow in [true, false] {
            let table = Arc::new(PieceTable::new(4, narrow, true).unwrap());
            let hits: usize = std::thread::scope(|scope| {
                let workers: Vec<_> = (0..2)
                    .map(|t| {
                        let table = Arc::clone(&table);
                        let text = &text;
                        scope.spawn(move || {
                            let mut batch = Batched::with_table(table).unwrap();
                            let mut hits = 0;
                            for round in 0..3_000 {
                                let n = batch.fill(text.as_bytes(), &mut pretokenize(text));
                                assert_eq!(n, 96);
                                for k in 0..n {
                                    // The threads go through the pieces in opposite orders.
                                    let k = if t == 0 { k } else { n - 1 - k };
                                    if (k + round) % 3 == 0 {
                                        batch.insert(k, &ids_of(k, narrow));
                                    }
                                    let mut out = Vec::new();
                                    if batch.push_hit(k, &mut out) {
                                        assert_eq!(out, ids_of(k, narrow), "{narrow} piece {k}");
                                        hits += 1;
                                    }
                                }
                            }
                            hits
                        })
                    })
                    .collect();
                workers.into_iter().map(|w| w.join().unwrap()).sum()
            });
            assert!(hits > 1_000, "{narrow}: {hits} hits, too few to test");
        }
    }

    #[test]
    fn a_shared_table_keeps_its_layout_and_refuses_ids_it_cannot_hold() {
        let text = words(4);
        let table = PieceTable::for_workers(32, true).unwrap();
        assert!(table.shared && table.narrow);
        assert_eq!(table.sets(), 32);
        let mut batch = Batched::with_table(Arc::clone(&table)).unwrap();
        // Another holder: the layout of a shared table stays.
        batch.use_narrow_ids(false);
        assert_eq!(batch.most_ids(), NARROW_IDS);
        assert_eq!(batch.fill(text.as_bytes(), &mut pretokenize(&text)), 4);
        batch.insert(0, &[0x1_0000]);
        batch.insert(1, &[0xFFFF, 3]);
        let mut out = Vec::new();
        assert!(!batch.push_hit(0, &mut out), "an id of 17 bits is not kept");
        assert!(batch.push_hit(1, &mut out));
        assert_eq!(out, [0xFFFF, 3]);
        // A table of its own changes layout.
        let mut batch = Batched::new(32).unwrap();
        assert!(!batch.table.shared);
        for (narrow, most) in [(true, NARROW_IDS), (false, WIDE_IDS)] {
            batch.use_narrow_ids(narrow);
            assert_eq!(batch.most_ids(), most);
        }
    }

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
