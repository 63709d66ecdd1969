//! Encoding text to token ids, and ids back to bytes: [`Encoder`], and the dispatch of each pre-token
//! to the fastest way to its ids.
//!
//! Text is split at special tokens, then into GPT-2 pre-tokens by the same scanner training uses, and
//! each pre-token is encoded on its own:
//!
//! 1. A pre-token that is itself a token is that one id (tiktoken's rule, and the fast path: most
//!    pre-tokens of ordinary text are whole tokens).
//! 2. Otherwise it starts as single bytes, and the adjacent pair whose concatenation is the token of
//!    the lowest merge rank is merged, leftmost first among equals, until no pair is a merged token
//!    ([`merge`], which asks the [`table`] built once per encoder).
//!
//! Before step 2, a piece is cut between every two bytes that are adjacent in no token, and the
//! segments are encoded on their own (`Encoder::merge_segments`): no merge can join across such a cut.
//! Pieces seen recently or merged before come from the per-thread caches ([`cache`]), and pieces of
//! one or two bytes seen for the first time from 64K-entry byte tables.
//!
//! The rest of the folder: [`file`] encodes whole files into `.npy` arrays ([`npy`]) on all cores.
//!
//! Invariants: the ids of a text do not depend on how it is split into calls at safe cuts
//! ([`Encoder::encode_prefix`]), on the caches, or on the number of threads; an encoder is immutable
//! once built (its caches are behind a pool), so one instance serves many threads.

mod batch;
pub(crate) mod cache;
pub(crate) mod file;
mod lanes;
mod merge;
pub(crate) mod npy;
mod table;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::bytes_map::{small_key, BytesMap, FastMap, InlineKey, INLINE};
use crate::chunks::{last_safe_cut, lookahead, next_safe_cut};
use crate::error::{try_reserve, try_vec, AllocError, Error, Result};
use crate::huge_pages::MapAhead;
use crate::pretokenize::{pretokenize, PreTokens};
use crate::special::{Segment, SpecialTokens};
use crate::threads::{run_on_threads, thread_count};
pub(crate) use batch::PieceTable;
use batch::{Batched, BATCH, TABLE_PIECE, WRITTEN_IDS};
use cache::{inline_key_of, CacheCap, Scratch, ScratchPool, SMALL_PIECE, WINDOW};
use lanes::{Miss, MIN_MISSES};
use merge::LONG_PIECE;
use table::{MergeTable, NO_MERGE};

/// [`Encoder::encode_cancellable`] encodes about this many bytes between two looks at its flag.
const CANCEL_BLOCK: usize = 1 << 20;

/// How far ids may run past the number of tokens: ids index a table, so one huge id would make it
/// huge (and an allocation failure aborts the process).
const MAX_ID_GAP: u32 = 1 << 20;

/// [`Encoder::encode_then`] keeps its buffer of ids up to this many (64 KB).
#[cfg(any(feature = "python", test))]
const KEEP_SHORT_IDS: usize = 1 << 14;

/// What the encoder's per-call buffers are called in out-of-memory errors.
const CACHES: &str = "the encoder's caches";

/// A vocabulary and merges, ready to encode and decode.
#[derive(Debug)]
pub struct Encoder {
    /// Token bytes to id, for whole pre-tokens.
    table: BytesMap<u32>,
    /// Id to token bytes.
    tokens: TokenBytes,
    /// What the merge loops ask: byte ids, and the rank of merging two tokens.
    merges: MergeTable,
    specials: SpecialTokens,
    special_ids: Vec<u32>,
    /// Caches kept warm between calls of [`Self::encode`].
    scratches: ScratchPool,
    /// The same for [`Self::encode_prefix`], with smaller caches: a stream's memory must stay small.
    stream_scratches: ScratchPool,
    /// Whether every id fits in 16 bits, so that the workers' tables hold more ids per piece.
    narrow_ids: bool,
    /// Whether the bytes of every token of 3 bytes or more merge to that token, so that a segment of a
    /// piece (`Self::merge_segments`) that is a token is that token. tiktoken looks up only whole
    /// pieces: a vocabulary that holds a token its merges do not build from its bytes (an imported one
    /// may; a trained one does not) has its segments merged, never looked up.
    tokens_merge_whole: bool,
}

/// The most worker threads that each keep a table of pieces of their own; more share one
/// ([`Encoder::table_for_workers`]). A shared table is read and written under a lock per way, which
/// costs about what a piece one worker merged for the other saves: on 2 threads it ran at 0.99-1.01
/// of a table each, and behind in one of two token-shard runs (`benchmarks/README.md`, the
/// thirty-third session). A table each takes 32 MB a worker, which on 4 threads took
/// `encode_dataset` past its 300 MB bound (331 MB, against 236 shared).
const OWN_TABLES: usize = 2;

impl Encoder {
    /// Builds an encoder from `vocab` (id, bytes), `merges` in order of creation, and special tokens.
    ///
    /// A special token that is not in the vocabulary is appended with the next free id. Fails when two
    /// ids share bytes, one id names two tokens, a byte value has no id, a merge names a token the
    /// vocabulary lacks, a special token is empty, or the tables do not fit in memory.
    pub fn new<T: AsRef<[u8]>, M: AsRef<[u8]>>(
        vocab: &[(u32, T)],
        merges: &[(M, M)],
        specials: &[String],
    ) -> Result<Encoder> {
        let specials = SpecialTokens::new(specials)?;
        let tables = |e: AllocError| e.named("the tables of the vocabulary");
        // Borrowed keys: a vocabulary is tens of thousands of short tokens, and a copy of each would be
        // as many small allocations that cannot fail softly.
        let mut ids: FastMap<&[u8], u32> = FastMap::default();
        ids.try_reserve(vocab.len() + specials.tokens().len())
            .map_err(|_| tables(AllocError::of::<(&[u8], u32)>(vocab.len())))?;
        let mut max_id = 0;
        for (id, bytes) in vocab {
            let (id, bytes) = (*id, bytes.as_ref());
            max_id = max_id.max(id);
            if let Some(other) = ids.insert(bytes, id) {
                return Err(Error::InvalidVocab(format!(
                    "ids {other} and {id} are both {:?}; each token must be distinct",
                    String::from_utf8_lossy(bytes)
                )));
            }
        }
        let mut byte_ids = [0u32; 256];
        for (b, slot) in byte_ids.iter_mut().enumerate() {
            *slot = *ids.get([b as u8].as_slice()).ok_or_else(|| {
                Error::InvalidVocab(format!(
                    "byte 0x{b:02x} has no id; a byte-level vocabulary needs all 256"
                ))
            })?;
        }
        let mut special_ids = Vec::new();
        try_reserve(&mut special_ids, specials.tokens().len()).map_err(tables)?;
        for t in specials.tokens() {
            let id = match ids.get(t.as_bytes()) {
                Some(&id) => id,
                None => {
                    max_id = max_id
                        .checked_add(1)
                        .ok_or(Error::InvalidVocab("vocabulary is full".into()))?;
                    ids.insert(t.as_bytes(), max_id);
                    max_id
                }
            };
            special_ids.push(id);
        }
        if max_id >= ids.len() as u32 + MAX_ID_GAP {
            return Err(Error::InvalidVocab(format!(
                "id {max_id} is too large for {} tokens; ids must be at most {MAX_ID_GAP} past the \
                 number of tokens",
                ids.len()
            )));
        }
        let tokens = TokenBytes::new(&ids, max_id).map_err(tables)?;
        // Two tokens of one id would decode as one of them, and could make a merge table entry that
        // reads as empty: such a vocabulary is refused. Each token wrote its id's span, so a token whose
        // id spells other bytes lost its span to another token.
        if let Some((bytes, &id)) = ids
            .iter()
            .find(|&(bytes, &id)| tokens.get(id) != Some(*bytes))
        {
            return Err(Error::InvalidVocab(format!(
                "id {id} is given to both {:?} and {:?}; each id must name one token",
                String::from_utf8_lossy(tokens.get(id).unwrap_or_default()),
                String::from_utf8_lossy(bytes)
            )));
        }
        let narrow_ids = max_id <= u16::MAX as u32;
        let merges = MergeTable::new(&ids, byte_ids, merges, &specials, narrow_ids)?;
        let mut table = BytesMap::with_capacity(ids.len()).map_err(tables)?;
        for (token, &id) in &ids {
            *table.entry(token).map_err(tables)? = id;
        }
        let mut encoder = Encoder {
            table,
            tokens,
            merges,
            specials,
            special_ids,
            scratches: ScratchPool::new(CacheCap::CALL),
            stream_scratches: ScratchPool::new(CacheCap::STREAM),
            narrow_ids,
            tokens_merge_whole: false,
        };
        encoder.tokens_merge_whole = encoder.every_token_merges_whole().map_err(tables)?;
        Ok(encoder)
    }

    /// Whether the bytes of every token of 3 bytes or more, special tokens aside, merge to that token
    /// ([`Self::tokens_merge_whole`]). Fails when the merge loops' buffers cannot be allocated.
    fn every_token_merges_whole(&self) -> std::result::Result<bool, AllocError> {
        let mut scratch = Scratch::for_text(0, CacheCap::STREAM)?;
        let mut out = Vec::new();
        for id in 0..self.vocab_size() as u32 {
            let Some(token) = self.token_bytes(id) else {
                continue;
            };
            if token.len() < 3 || self.special_ids.contains(&id) {
                continue;
            }
            out.clear();
            try_reserve(&mut out, token.len())?;
            self.merge_uncut(token, &mut out, &mut scratch)?;
            if out[..] != [id] {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// One more than the largest id.
    pub fn vocab_size(&self) -> usize {
        self.tokens.spans.len()
    }

    /// The special tokens and their ids.
    pub fn specials(&self) -> (&SpecialTokens, &[u32]) {
        (&self.specials, &self.special_ids)
    }

    /// Appends the ids of `text` to `out`, with caches kept from earlier calls (see `ScratchPool`).
    /// Fails when memory runs out (`out` then holds some of the text's ids, not to be used).
    pub fn encode(&self, text: &str, out: &mut Vec<u32>) -> Result<()> {
        self.scratches
            .with(text.len(), |scratch| self.encode_with(text, out, scratch))
            .map_err(|e| e.named(CACHES))?
    }

    /// What `f` makes of the ids of `text`, encoded into a buffer that the caches keep between calls
    /// rather than into a vector of its own: for short texts (chat messages), where allocating and
    /// freeing the ids is a noticeable part of the call. The buffer is kept only up to
    /// [`KEEP_SHORT_IDS`] ids, so a long text does not leave megabytes behind.
    #[cfg(any(feature = "python", test))]
    pub(crate) fn encode_then<T>(&self, text: &str, f: impl FnOnce(&[u32]) -> T) -> Result<T> {
        let encoded = self.scratches.with(text.len(), |scratch| {
            let mut ids = std::mem::take(&mut scratch.ids);
            ids.clear();
            let result = self.encode_with(text, &mut ids, scratch).map(|()| f(&ids));
            if ids.capacity() <= KEEP_SHORT_IDS {
                scratch.ids = ids;
            }
            result
        });
        encoded.map_err(|e| e.named(CACHES))?
    }

    /// [`Self::encode`] that gives up with [`Error::Interrupted`] (and `out` half written) soon after
    /// `cancel` is set: the text is encoded a block of about `CANCEL_BLOCK` bytes at a time, cut
    /// where cutting changes nothing, and the merge loop of a long piece looks at `cancel` too. The
    /// pages of `out` a block's ids will likely take are mapped before the block (`MapAhead`).
    pub fn encode_cancellable(
        &self,
        text: &str,
        out: &mut Vec<u32>,
        cancel: &Arc<AtomicBool>,
    ) -> Result<()> {
        let cancelled = || cancel.load(Ordering::Relaxed);
        // The ids of the whole text reserved at once, rather than block by block as they grow.
        try_reserve(out, text.len()).map_err(|e| e.of_text("the ids", text.len()))?;
        self.scratches
            .with(text.len(), |scratch| {
                scratch.cancelled_by(Some(cancel), |scratch| {
                    let (mut start, mut encoded) = (0, Ok(()));
                    let mut ahead = MapAhead::default();
                    while start < text.len() && !cancelled() && encoded.is_ok() {
                        let end = self.block_end(text, start, CANCEL_BLOCK);
                        encoded = ahead
                            .write(out, |out| self.encode_with(&text[start..end], out, scratch));
                        start = end;
                    }
                    encoded
                })
            })
            .map_err(|e| e.named(CACHES))??;
        if cancelled() {
            return Err(Error::Interrupted);
        }
        Ok(())
    }

    /// The last place in `text`, searched from `from`, where a held-back text may be cut (0 when there
    /// is none), and where the search stopped: short of the end by the special tokens' lookahead, since
    /// more text could still complete a token there.
    fn last_cut(&self, text: &str, from: usize) -> (usize, usize) {
        let limit = text.len().saturating_sub(lookahead(&self.specials));
        let cut = last_safe_cut(text.as_bytes(), &self.specials, from, limit).unwrap_or(0);
        (cut, limit)
    }

    /// The end of the block of `text` that starts at `start`, about `block` bytes long, where cutting
    /// changes nothing: the last safe cut within `block` bytes, else the first one after, else the end
    /// of the text. `block` must be longer than any special token.
    pub(crate) fn block_end(&self, text: &str, start: usize, block: usize) -> usize {
        let (bytes, specials) = (text.as_bytes(), &self.specials);
        if text.len() - start <= block {
            return text.len();
        }
        // Special tokens are shorter than a block, so `end` is past `start`.
        let end = text.len() - lookahead(specials);
        let to = (start + block).min(end);
        last_safe_cut(bytes, specials, start + 1, to)
            .or_else(|| next_safe_cut(bytes, specials, to, end))
            .unwrap_or(text.len())
    }

    /// [`Self::encode`] with caller-kept buffers and caches (`encode_file` keeps one per worker thread).
    /// `scratch` must only ever be used with this encoder: it holds its ids.
    pub(crate) fn encode_with(
        &self,
        text: &str,
        out: &mut Vec<u32>,
        scratch: &mut Scratch,
    ) -> Result<()> {
        // Room for the most ids the text can have, one per byte (a special token is one id for several
        // bytes, a piece at most one id per byte), so that the loop below never grows `out`: pushes
        // cannot fail, and pages of the reservation that are never written cost no memory.
        try_reserve(out, text.len()).map_err(|e| e.of_text("the ids", text.len()))?;
        let bytes = text.as_bytes();
        for segment in self.specials.split(text) {
            match segment {
                Segment::Special(i) => out.push(self.special_ids[i]),
                Segment::Text(part) => {
                    let mut pieces = pretokenize(part);
                    if !scratch.table_in_use {
                        // Counted down in a local: in the scratch, the count was stored and loaded
                        // again for every piece.
                        let mut left = scratch.misses.left;
                        for piece in pieces.by_ref() {
                            // The piece's offset in `text`, so that its key can be read in place.
                            let start = piece.as_ptr() as usize - bytes.as_ptr() as usize;
                            // SAFETY: the piece is a part of `part`, itself a part of `text`.
                            unsafe { self.encode_piece(bytes, start, piece.len(), out, scratch) }
                                .map_err(|e| e.named("merging a long pre-token"))?;
                            left -= 1;
                            if left == 0 {
                                left = WINDOW;
                                if scratch.count_window() {
                                    break;
                                }
                            }
                        }
                        scratch.misses.left = left;
                    }
                    if scratch.table_in_use {
                        debug_assert!(scratch.batched.is_some(), "a table in use is there");
                        if let Some(mut batched) = scratch.batched.take() {
                            let encoded =
                                self.encode_batched(bytes, pieces, out, scratch, &mut batched);
                            scratch.batched = Some(batched);
                            encoded.map_err(|e| e.named("merging a long pre-token"))?;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// The table of pieces that the `threads` workers of one run share (`encode_file`,
    /// `encode_dataset`), for chunks of `chunk` bytes of an input of `input` bytes (0 when unknown),
    /// sized as a worker's own table ([`CacheCap::WORKER`]: 32 MB at most, less for less text than a
    /// chunk); none for up to [`OWN_TABLES`] threads, whose workers each make their own. Fails when it
    /// cannot be allocated.
    pub(crate) fn table_for_workers(
        &self,
        chunk: usize,
        input: u64,
        threads: usize,
    ) -> std::result::Result<Option<Arc<PieceTable>>, AllocError> {
        if threads <= OWN_TABLES {
            return Ok(None);
        }
        let text_len = Scratch::worker_text_len(chunk, input);
        let sets = Batched::sets_for(text_len, CacheCap::WORKER.table_sets);
        PieceTable::for_workers(sets, self.narrow_ids).map(Some)
    }

    /// Appends the ids of the rest of `pieces`, pieces of a part of `text` without special tokens, a
    /// batch of pieces at a time through the table of pieces ([`batch`]); pieces of up to
    /// [`TABLE_PIECE`] bytes it does not hold are set aside and resolved together ([`lanes`]), and
    /// then kept in it; longer pieces take the way of [`Self::encode_piece`]. `out` must have room for
    /// an id per byte of the pieces. Fails only when merging a long piece runs out of memory.
    fn encode_batched(
        &self,
        text: &[u8],
        mut pieces: PreTokens<'_>,
        out: &mut Vec<u32>,
        scratch: &mut Scratch,
        batched: &mut Batched,
    ) -> std::result::Result<(), AllocError> {
        batched.use_narrow_ids(self.narrow_ids);
        // The merged pieces the cache keeps: those of more ids than the table holds. With 7 ids an
        // entry, none: the pieces of more are too few to pay for a lookup on every miss of the table
        // (in `s2`, 0.2M merges per GB against 7.4M of pieces the table holds).
        let cache_over = match self.narrow_ids {
            true => None,
            false => Some(batched.most_ids()),
        };
        batched.misses.clear();
        loop {
            let n = batched.fill(text, &mut pieces);
            let mut next = 0;
            while next < n {
                // The hits in a row, then the piece they stopped at, if any.
                let k = batched.push_hits(next, n, out);
                if k == n {
                    break;
                }
                next = k + 1;
                let (start, len) = batched.piece(k);
                if len > TABLE_PIECE {
                    // SAFETY: the piece is a part of `part`, itself a part of `text`.
                    unsafe { self.encode_piece(text, start, len, out, scratch) }?;
                    continue;
                }
                // `push_hits` stopped at a piece the table lacks, unless `out` lacked room.
                if out.capacity() - out.len() < WRITTEN_IDS && batched.push_hit(k, out) {
                    continue;
                }
                if len <= 2 {
                    let before = out.len();
                    // SAFETY: as above.
                    let piece = unsafe { text.get_unchecked(start..start + len) };
                    self.encode_bytes(piece, out);
                    batched.insert(k, &out[before..]);
                    continue;
                }
                let key = *batched.key(k);
                batched.misses.push(&key, start, out.len());
            }
            // Resolved once enough are set aside for their lanes to overlap, and before the part ends
            // (a special token's id follows it).
            if batched.misses.len() >= MIN_MISSES || (n < BATCH && batched.misses.len() > 0) {
                self.resolve_misses(text, batched, cache_over, out, scratch);
                batched.misses.clear();
            }
            if n < BATCH {
                return Ok(());
            }
        }
    }

    /// Resolves the pieces set aside because the table of pieces missed them ([`lanes`]), puts their
    /// ids in place in `out`, and keeps them in the table (and in the cache of merged pieces when they
    /// have more than `cache_over` ids). `out` must have room for their ids.
    fn resolve_misses(
        &self,
        text: &[u8],
        batched: &mut Batched,
        cache_over: Option<usize>,
        out: &mut Vec<u32>,
        scratch: &mut Scratch,
    ) {
        batched.prefetch_missed_sets();
        let misses = &mut batched.misses;
        misses.mark_copies();
        // Every lookup of the vocabulary below waits for memory at most once, all at the same time.
        for miss in misses.list() {
            if cache_over.is_some() {
                scratch.cache.prefetch(&miss.key);
            }
            self.table.prefetch(&miss.key);
        }
        for i in 0..misses.len() {
            if misses.is_copy(i) {
                continue;
            }
            let Miss { key, start, .. } = misses.list()[i];
            if cache_over.is_some() {
                if let Some((first, len)) = scratch.cache.get_inline(&key) {
                    let (first, len) = (first as usize, len as usize);
                    misses.resolve(i, &scratch.cached_ids[first..first + len]);
                    continue;
                }
            }
            match self.table.get_inline(&key) {
                Some(id) => misses.resolve(i, &[id]),
                None => {
                    // SAFETY: the piece is a part of `text`, as every piece set aside.
                    let piece = unsafe { text.get_unchecked(start..start + key.len as usize) };
                    misses.add_lane(i, piece, &self.merges);
                }
            }
        }
        misses.merge_lanes(&self.merges, &mut scratch.merge_cache);
        misses.resolve_copies();
        misses.put_in_place(out);
        for i in 0..batched.misses.len() {
            let miss = batched.misses.list()[i];
            let mut ids = [0u32; TABLE_PIECE];
            let n = batched.misses.ids(i).len();
            ids[..n].copy_from_slice(batched.misses.ids(i));
            if miss.merged && cache_over.is_some_and(|held| n > held) {
                // SAFETY: as above.
                let piece =
                    unsafe { text.get_unchecked(miss.start..miss.start + miss.key.len as usize) };
                Self::keep(piece, Some(&miss.key), 0, &ids[..n], scratch);
            }
            batched.insert_key(&miss.key, &ids[..n]);
        }
    }

    /// Encodes the longest prefix of `text` that ends where a cut is safe (all of it when `last`), and
    /// returns its length in bytes: streaming input holds back the rest until more text arrives, so the
    /// ids equal those of the whole text however it is split. Fails when memory runs out.
    pub fn encode_prefix(&self, text: &str, last: bool, out: &mut Vec<u32>) -> Result<usize> {
        let end = match last {
            true => text.len(),
            false => self.last_cut(text, 0).0,
        };
        let text = &text[..end];
        self.stream_scratches
            .with(text.len(), |scratch| self.encode_with(text, out, scratch))
            .map_err(|e| e.named(CACHES))??;
        Ok(end)
    }

    /// Encodes a text handed over a block at a time, with the ids [`Self::encode`] gives the whole, and
    /// neither the text nor its ids ever held whole: `next` appends the UTF-8 of the next block to the
    /// buffer it is given and says whether more follows; the ids of each stretch that ends at a safe
    /// cut (the rest of the buffer waits for the next block) are appended to `out`, and `sink` is then
    /// handed `out`: it may take them and clear it, or leave them to gather the whole text's ids in
    /// place. The binding encodes a Python `str` into a list this way, so that a block and its ids are
    /// still in the CPU's cache when they are converted, encoded and copied, and only the list is
    /// written to memory never touched before; and into one vector of ids for NumPy, without a copy.
    ///
    /// `text_len` (the whole text's bytes, or an estimate) sizes the caches. Stops with
    /// [`Error::Interrupted`] soon after `cancel` is set, and with the first error of `next` or `sink`.
    #[cfg(any(feature = "python", test))]
    pub(crate) fn encode_blocks<E: From<Error>>(
        &self,
        text_len: usize,
        cancel: Option<&Arc<AtomicBool>>,
        mut next: impl FnMut(&mut String) -> std::result::Result<bool, E>,
        out: &mut Vec<u32>,
        mut sink: impl FnMut(&mut Vec<u32>) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let cancelled = || cancel.is_some_and(|c| c.load(Ordering::Relaxed));
        let mut text = String::new();
        // Bytes of `text` past the first known to hold no safe cut: each block is searched once, so a
        // text with no cut at all (a long run of one letter, compact JSON) is not scanned again per
        // block, which made it quadratic. A position's verdict needs only the `lookahead` bytes after
        // it, so it does not change as text arrives.
        let mut scanned = 0;
        // `out`'s pages for a stretch's ids mapped before it, when `out` is large (a sink that keeps
        // the ids); a sink that empties it keeps it under that size.
        let mut ahead = MapAhead::default();
        let encoded = self.scratches.with(text_len, |scratch| {
            scratch.cancelled_by(cancel, |scratch| -> std::result::Result<(), E> {
                loop {
                    let more = next(&mut text)?;
                    let end = match more {
                        true => {
                            let (cut, limit) = self.last_cut(&text, scanned);
                            // No cut lies between the cut and `limit`; the drain below moves them.
                            scanned = limit.max(scanned) - cut;
                            cut
                        }
                        false => text.len(),
                    };
                    ahead.write(out, |out| self.encode_with(&text[..end], out, scratch))?;
                    sink(out)?;
                    text.drain(..end);
                    if !more || cancelled() {
                        return Ok(());
                    }
                }
            })
        });
        encoded.map_err(|e| E::from(e.named(CACHES)))??;
        match cancelled() {
            true => Err(E::from(Error::Interrupted)),
            false => Ok(()),
        }
    }

    /// The ids of `text` in a new vector, as [`Self::encode`] gives them, or as
    /// [`Self::encode_cancellable`] does when `cancel` is given. The vector has room for one id per byte
    /// of the text, reserved at once (with `cancel`, its pages mapped a block ahead, see
    /// [`Self::encode_cancellable`]); on an error it is freed before
    /// the error is returned (a caller that allocates to report the error then has that memory).
    pub fn encode_to_vec(&self, text: &str, cancel: Option<&Arc<AtomicBool>>) -> Result<Vec<u32>> {
        let mut ids: Vec<u32> = Vec::new();
        try_reserve(&mut ids, text.len()).map_err(|e| e.of_text("the ids", text.len()))?;
        match cancel {
            Some(cancel) => self.encode_cancellable(text, &mut ids, cancel)?,
            None => self.encode(text, &mut ids)?,
        }
        Ok(ids)
    }

    /// The ids of each of `texts` ([`Self::encode_to_vec`]), encoded on up to `num_threads` threads
    /// (see [`crate::thread_count`]), each thread taking the next text not yet taken, so that a long
    /// text holds up only its thread. Fails with the error of the first text (in order) that failed, or
    /// with [`Error::Interrupted`] soon after `cancel` is set; every text's ids are freed first.
    pub fn encode_batch<T: AsRef<str> + Sync>(
        &self,
        texts: &[T],
        num_threads: Option<usize>,
        cancel: Option<&Arc<AtomicBool>>,
    ) -> Result<Vec<Vec<u32>>> {
        let cancelled = || cancel.is_some_and(|c| c.load(Ordering::Relaxed));
        let ids_of_texts = |e: AllocError| e.named("the ids of the texts");
        // A slot per text, filled by the thread that takes the text (allocated once: each thread
        // collecting its own would grow vectors as it went).
        let mut slots: Vec<Mutex<Vec<u32>>> = Vec::new();
        try_reserve(&mut slots, texts.len()).map_err(ids_of_texts)?;
        slots.extend(texts.iter().map(|_| Mutex::new(Vec::new())));
        // The error of the first text that failed, and which text it was.
        let first_error: Mutex<Option<(usize, Error)>> = Mutex::new(None);
        let next = AtomicUsize::new(0);
        let threads = thread_count(num_threads).min(texts.len());
        run_on_threads(threads, || {
            while !cancelled() {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(text) = texts.get(i) else { break };
                match self.encode_to_vec(text.as_ref(), cancel) {
                    Ok(ids) => *slots[i].lock().unwrap_or_else(PoisonError::into_inner) = ids,
                    // Cancelled: the loop ends and the call fails below.
                    Err(Error::Interrupted) => {}
                    Err(e) => {
                        let mut first = first_error.lock().unwrap_or_else(PoisonError::into_inner);
                        if first.as_ref().is_none_or(|&(at, _)| i < at) {
                            *first = Some((i, e));
                        }
                    }
                }
            }
        });
        let first_error = first_error
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        if cancelled() || first_error.is_some() {
            drop(slots);
            return Err(first_error.map_or(Error::Interrupted, |(_, e)| e));
        }
        let mut batch = Vec::new();
        try_reserve(&mut batch, slots.len()).map_err(ids_of_texts)?;
        batch.extend(
            slots
                .into_iter()
                .map(|slot| slot.into_inner().unwrap_or_else(PoisonError::into_inner)),
        );
        Ok(batch)
    }

    /// An encoder of single pre-tokens, for counting the tokens of pre-tokens that each come once.
    /// Fails when its caches cannot be allocated.
    pub(crate) fn pretoken_encoder(&self) -> Result<PreTokenEncoder<'_>> {
        // Each piece comes once: small caches, which would not be hit.
        let scratch = Scratch::for_text(0, CacheCap::STREAM)
            .map_err(|e| e.named("the tables of the vocabulary"))?;
        Ok(PreTokenEncoder {
            encoder: self,
            scratch,
            ids: Vec::new(),
        })
    }

    /// Appends the ids of one pre-token (as [`pretokenize`] makes them), without looking for special
    /// tokens or pre-tokens in it. `scratch` must only ever be used with this encoder. Fails when memory
    /// runs out.
    fn encode_pretoken(
        &self,
        piece: &[u8],
        out: &mut Vec<u32>,
        scratch: &mut Scratch,
    ) -> Result<()> {
        try_reserve(out, piece.len()).map_err(|e| e.named("the ids of a pre-token"))?;
        // SAFETY: the piece is all of `piece`.
        unsafe { self.encode_piece(piece, 0, piece.len(), out, scratch) }
            .map_err(|e| e.named("merging a long pre-token"))
    }

    /// Appends the ids of the pre-token `text[start..start + len]`: from the cache of recent pieces,
    /// from the cache of merged pieces, as a whole token, or merged. `out` must have room for `len` ids.
    /// Fails only when merging a long piece runs out of memory; the caches are skipped when full.
    ///
    /// # Safety
    ///
    /// `start + len` must be at most `text.len()`: the piece is sliced unchecked, since checking it
    /// cost 5 instructions a piece, as many as the scanner spends finding it.
    #[inline(always)]
    unsafe fn encode_piece(
        &self,
        text: &[u8],
        start: usize,
        len: usize,
        out: &mut Vec<u32>,
        scratch: &mut Scratch,
    ) -> std::result::Result<(), AllocError> {
        debug_assert!(start + len <= text.len());
        // SAFETY: the caller's promise.
        let piece = unsafe { text.get_unchecked(start..start + len) };
        if len > INLINE {
            match self.table.get(piece) {
                Some(id) => out.push(id),
                None if len >= LONG_PIECE => {
                    self.merge_segments(piece, out, scratch)?;
                }
                None => match scratch.cache.get(piece) {
                    Some(ids) => scratch.push_cached(ids, out),
                    None => {
                        let before = out.len();
                        // Not cached when cut into segments of under 4 bytes on average: rebuilt
                        // from its segments it costs little, while its key costs an allocation, and
                        // such pieces (sentences of CJK text) rarely recur. Pieces of `LONG_PIECE`
                        // bytes or more are never cached: they rarely repeat, and caching them would
                        // let memory grow with the text.
                        if self.merge_segments(piece, out, scratch)? * 4 <= len {
                            Self::keep(piece, None, before, out, scratch);
                        }
                    }
                },
            }
            return Ok(());
        }
        // Pieces of up to 7 bytes, most of any text's, take one path whatever their length: whether a
        // piece is one, two or more bytes is a branch the predictor gets wrong a third of the time.
        if len <= SMALL_PIECE {
            // SAFETY: the caller's promise, as for `piece`.
            let key = unsafe { small_key(text, start, len) };
            if scratch.small.push_to(key, out) {
                return Ok(());
            }
            scratch.misses.missed += 1;
            let before = out.len();
            // The byte tables answer one and two bytes without a key of the large maps.
            if !self.encode_bytes(piece, out) {
                self.encode_unseen(piece, &inline_key_of(key), out, scratch)?;
            }
            scratch.small.insert(key, &out[before..]);
            return Ok(());
        }
        // SAFETY: the caller's promise, as for `piece`.
        let key = unsafe { InlineKey::at(text, start, len) };
        if scratch.recent.push_to(&key, out) {
            return Ok(());
        }
        scratch.misses.missed += 1;
        let before = out.len();
        self.encode_unseen(piece, &key, out, scratch)?;
        scratch.recent.insert(&key, &out[before..]);
        Ok(())
    }

    /// Appends the ids of a piece of 3 to [`INLINE`] bytes, whose key is `key`, that is not among
    /// the recent pieces: from the cache of merged pieces, as a whole token, or merged (and then
    /// cached).
    #[inline(always)]
    fn encode_unseen(
        &self,
        piece: &[u8],
        key: &InlineKey,
        out: &mut Vec<u32>,
        scratch: &mut Scratch,
    ) -> std::result::Result<(), AllocError> {
        // Copied: used by reference, the key made encoding run 2% more instructions (cachegrind).
        let key = *key;
        let before = out.len();
        // Most pieces that miss the recent ones are words of several tokens, not tokens, so the merged
        // pieces are asked before the vocabulary; no piece is in both. Both tables are megabytes, so
        // each lookup may wait on memory: the vocabulary's slot is loaded while the cache is asked,
        // and a piece that is one token waits once, not twice.
        self.table.prefetch(&key);
        match scratch.cache.get_inline(&key) {
            Some(ids) => scratch.push_cached(ids, out),
            None => match self.table.get_inline(&key) {
                Some(id) => out.push(id),
                None => {
                    self.merge_segments(piece, out, scratch)?;
                    Self::keep(piece, Some(&key), before, out, scratch);
                }
            },
        }
        Ok(())
    }

    /// Keeps the ids `out[before..]` of `piece` (whose key is `key` when it is at most [`INLINE`]
    /// bytes) in the cache of merged pieces: in the cache's id array, and where they are in the cache.
    /// A cache that cannot grow (out of memory) keeps nothing: it only saves time.
    fn keep(
        piece: &[u8],
        key: Option<&InlineKey>,
        before: usize,
        out: &[u32],
        scratch: &mut Scratch,
    ) {
        // Started over before the ids would pass the cap, so that the array never doubles past it.
        let (adding, cap) = (out.len() - before, scratch.cap);
        if scratch.cache.len() >= cap.pieces || scratch.cached_ids.len() + adding > cap.ids {
            scratch.cache.clear();
            scratch.cached_ids.clear();
        }
        let start = scratch.cached_ids.len();
        if try_reserve(&mut scratch.cached_ids, adding).is_err() {
            return;
        }
        let entry = match key {
            Some(key) => scratch.cache.entry_inline(key),
            None => scratch.cache.entry(piece),
        };
        if let Ok(entry) = entry {
            *entry = (start as u32, adding as u32);
            scratch.cached_ids.extend_from_slice(&out[before..]);
        }
    }

    /// Appends the ids of a piece that is not one token one segment at a time, cut between every two
    /// bytes that are adjacent in no token, and returns the number of segments. A merge makes a token,
    /// so no merge can ever join bytes across such a cut: each side merges as if alone, and the ids are
    /// those of the whole piece.
    ///
    /// CJK text is where this pays. Its words are long pieces (a sentence without spaces is one), but
    /// GPT-2's tokens join few of its characters, so such a piece cuts into many segments of a few
    /// bytes, most of them one token or a merge of two or three bytes. It also keeps a run of one emoji
    /// from being one long merge.
    #[inline(never)]
    fn merge_segments(
        &self,
        piece: &[u8],
        out: &mut Vec<u32>,
        scratch: &mut Scratch,
    ) -> std::result::Result<usize, AllocError> {
        let (mut start, mut segments) = (0, 1);
        // The cuts of up to 64 places at a time, as bits, found without a branch per byte: where the
        // cuts fall in CJK text, every few bytes, is more than the branch predictor can follow.
        let mut base = 1;
        while base < piece.len() {
            let stop = piece.len().min(base + 64);
            let mut cuts = 0u64;
            for (i, pair) in piece[base - 1..stop].windows(2).enumerate() {
                cuts |= u64::from(!self.merges.adjacent_in_token(pair[0], pair[1])) << i;
            }
            while cuts != 0 {
                let end = base + cuts.trailing_zeros() as usize;
                cuts &= cuts - 1;
                // A segment of one byte is that byte's id: a run of spaces (code's indentation) is
                // all such segments, and a call for each cost more than the rest of its encoding.
                if end - start == 1 {
                    out.push(self.merges.byte_id(piece[start]));
                } else {
                    self.encode_segment(&piece[start..end], out, scratch)?;
                }
                (start, segments) = (end, segments + 1);
            }
            base = stop;
        }
        if start == 0 {
            self.merge_uncut(piece, out, scratch)?;
        } else {
            self.encode_segment(&piece[start..], out, scratch)?;
        }
        Ok(segments)
    }

    /// Appends the ids of a piece or segment that has no cut, by the merge loop for its length. Only
    /// the long loop allocates (the short one's buffers are reserved in [`Scratch`]), so only it fails.
    fn merge_uncut(
        &self,
        piece: &[u8],
        out: &mut Vec<u32>,
        scratch: &mut Scratch,
    ) -> std::result::Result<(), AllocError> {
        let cache = &mut scratch.merge_cache;
        if piece.len() >= LONG_PIECE {
            scratch.long.merge(&self.merges, cache, piece, out)
        } else {
            scratch.short.merge(&self.merges, cache, piece, out);
            Ok(())
        }
    }

    /// Appends the ids of a segment of a piece: from the byte tables, from the recent segments, as a
    /// token (when every token merges from its own bytes, [`Self::tokens_merge_whole`]), or merged.
    /// Segments have a table of their own rather than a place in the cache of merged pieces, where
    /// they took the place of whole pieces, which recur more (European text 4% slower).
    fn encode_segment(
        &self,
        segment: &[u8],
        out: &mut Vec<u32>,
        scratch: &mut Scratch,
    ) -> std::result::Result<(), AllocError> {
        if self.encode_bytes(segment, out) {
            return Ok(());
        }
        if segment.len() > INLINE {
            let token = match self.tokens_merge_whole {
                true => self.table.get(segment),
                false => None,
            };
            match token {
                Some(id) => out.push(id),
                None => self.merge_uncut(segment, out, scratch)?,
            }
            return Ok(());
        }
        let key = InlineKey::new(segment);
        if scratch.segments.push_to(&key, out) {
            return Ok(());
        }
        let before = out.len();
        let token = match self.tokens_merge_whole {
            true => self.table.get_inline(&key),
            false => None,
        };
        match token {
            Some(id) => out.push(id),
            None => self.merge_uncut(segment, out, scratch)?,
        }
        scratch.segments.insert(&key, &out[before..]);
        Ok(())
    }

    /// Appends the ids of a piece of one or two bytes from the byte tables, without a key or a cache,
    /// and returns true; returns false for a longer piece. Every byte is a token, and two bytes are one
    /// token exactly when they are a pair of the pair table.
    #[inline(always)]
    fn encode_bytes(&self, piece: &[u8], out: &mut Vec<u32>) -> bool {
        match *piece {
            [b] => out.push(self.merges.byte_id(b)),
            [b0, b1] => match self.merges.byte_pair(b0, b1) {
                (rank, merged) if rank != NO_MERGE.0 => out.push(merged),
                _ => out.extend_from_slice(&[self.merges.byte_id(b0), self.merges.byte_id(b1)]),
            },
            _ => return false,
        }
        true
    }

    /// Appends the bytes of `ids`, concatenated, to `out`. Fails on an id that has no token, and when
    /// `out` cannot grow (out of memory).
    pub fn decode(&self, ids: impl IntoIterator<Item = u64>, out: &mut Vec<u8>) -> Result<()> {
        for id in ids {
            let bytes = u32::try_from(id)
                .ok()
                .and_then(|id| self.token_bytes(id))
                .ok_or(Error::UnknownId(id))?;
            if out.capacity() - out.len() < bytes.len() {
                try_reserve(out, bytes.len()).map_err(|e| e.named("the decoded bytes"))?;
            }
            out.extend_from_slice(bytes);
        }
        Ok(())
    }

    /// The bytes of one token, if the id has one.
    pub fn token_bytes(&self, id: u32) -> Option<&[u8]> {
        let &(start, end) = self.tokens.spans.get(id as usize)?;
        (start != NO_TOKEN).then(|| &self.tokens.bytes[start as usize..end as usize])
    }
}

/// Encodes pre-tokens one at a time ([`Encoder::pretoken_encoder`]).
pub(crate) struct PreTokenEncoder<'e> {
    encoder: &'e Encoder,
    scratch: Scratch,
    ids: Vec<u32>,
}

impl PreTokenEncoder<'_> {
    /// The number of tokens the pre-token `piece` encodes to. Fails when memory runs out.
    pub(crate) fn token_count(&mut self, piece: &[u8]) -> Result<usize> {
        self.ids.clear();
        self.encoder
            .encode_pretoken(piece, &mut self.ids, &mut self.scratch)?;
        Ok(self.ids.len())
    }
}

/// The start of the span of an id that has no token.
const NO_TOKEN: u32 = u32::MAX;

/// The bytes of every token, end to end in one allocation (not one per token), and each id's span of
/// them (`NO_TOKEN` where the vocabulary has a gap).
#[derive(Debug)]
struct TokenBytes {
    bytes: Vec<u8>,
    spans: Vec<(u32, u32)>,
}

impl TokenBytes {
    /// The bytes of `id`'s token, if it has one.
    fn get(&self, id: u32) -> Option<&[u8]> {
        let &(start, end) = self.spans.get(id as usize)?;
        self.bytes.get(start as usize..end as usize)
    }

    fn new(ids: &FastMap<&[u8], u32>, max_id: u32) -> std::result::Result<TokenBytes, AllocError> {
        let total: usize = ids.keys().map(|t| t.len()).sum();
        if total >= NO_TOKEN as usize {
            return Err(AllocError { bytes: total });
        }
        let mut tokens = TokenBytes {
            bytes: Vec::new(),
            spans: try_vec((NO_TOKEN, NO_TOKEN), max_id as usize + 1)?,
        };
        try_reserve(&mut tokens.bytes, total)?;
        for (bytes, &id) in ids {
            let start = tokens.bytes.len() as u32;
            tokens.bytes.extend_from_slice(bytes);
            tokens.spans[id as usize] = (start, tokens.bytes.len() as u32);
        }
        Ok(tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn encoder(
        extra: &[&[u8]],
        merges: &[(&[u8], &[u8])],
        specials: &[&str],
    ) -> Encoder {
        let mut vocab: Vec<(u32, Vec<u8>)> = (0..=255u8).map(|b| (b as u32, vec![b])).collect();
        for (i, t) in extra.iter().enumerate() {
            vocab.push((256 + i as u32, t.to_vec()));
        }
        let merges: Vec<(Vec<u8>, Vec<u8>)> = merges
            .iter()
            .map(|(a, b)| (a.to_vec(), b.to_vec()))
            .collect();
        let specials: Vec<String> = specials.iter().map(|s| s.to_string()).collect();
        Encoder::new(&vocab, &merges, &specials).unwrap()
    }

    fn encode(e: &Encoder, text: &str) -> Vec<u32> {
        let mut out = Vec::new();
        e.encode(text, &mut out).unwrap();
        out
    }

    #[test]
    fn the_workers_table_of_pieces_gives_the_ids_of_one_piece_at_a_time() {
        // Words of every length around the table's longest piece, that merge to one id or to several
        // (up to 3, up to 7, and more than an entry holds in either layout), letters that are not
        // ASCII, long runs, and a special token; a text's last pieces have fewer than 16 bytes after
        // their start.
        let training =
            "the then thence thenceforth abcdefghijklmno abcdefghijklmnop 1234567 ".repeat(50);
        let words = [
            "the",
            " then",
            "thence",
            " thenceforth",
            "abcdefghijklmno",
            " abcdefghijklmno",
            "abcdefghijklmnop",
            "abcdefghijklmnopq",
            "1234567",
            " 123456789012345",
            "a",
            "é",
            "日本語",
            "  ",
            "\n",
            "'s",
            "!!",
            "x",
            "zqzqz",
            " qzqzqzqzqz",
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
            "<|endoftext|>",
            // Pieces that differ only in trailing zero bytes, and one whose bytes are all zero: the
            // length in the key tells them apart, and from an empty way.
            "\0",
            "\0\0",
            "a\0",
            " a\0\0",
        ];
        let mut e = trained_encoder_with(&training, 256 + 120, &["<|endoftext|>"]);
        assert!(e.narrow_ids);
        // 32 sets, so that pieces evict each other, with a batch's worth of pieces and more in a text.
        let mut worker = Scratch::for_text(0, CacheCap::WORKER).unwrap();
        assert_eq!(worker.batched.as_ref().unwrap().sets(), 32);
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        // Ids of 16 bits, then of 32 (as for a vocabulary of more than 65,536 ids) in the same table,
        // whose entries of the first layout must not be read in the second.
        for narrow in [true, false] {
            e.narrow_ids = narrow;
            for round in 0..300 {
                let text: String = (0..xorshift(&mut seed) % 700)
                    .map(|_| words[xorshift(&mut seed) as usize % words.len()])
                    .collect();
                let mut ids = Vec::new();
                e.encode_with(&text, &mut ids, &mut worker).unwrap();
                assert_eq!(ids, encode(&e, &text), "{narrow} {round}: {text:?}");
            }
        }
    }

    #[test]
    fn a_call_takes_up_the_table_of_pieces_when_the_recent_pieces_miss() {
        // Words of random letters, nearly all new (so the recent pieces miss), then a few words of one
        // letter repeated (so they hit); each text four windows of pieces and more.
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut word = || -> String {
            let len = 1 + xorshift(&mut seed) as usize % 12;
            let letters = (0..len).map(|_| (b'a' + (xorshift(&mut seed) % 16) as u8) as char);
            std::iter::once(' ').chain(letters).collect()
        };
        let varied: String = (0..4 * WINDOW + 1000).map(|_| word()).collect();
        let repeated = " a b c d e f".repeat(WINDOW);
        let e = trained_encoder(&varied[..100_000], 256 + 300);
        // One piece at a time, as a stream is encoded: never with the table.
        let one_at_a_time = |text: &str| {
            let mut stream = Scratch::for_text(0, CacheCap::STREAM).unwrap();
            let mut ids = Vec::new();
            e.encode_with(text, &mut ids, &mut stream).unwrap();
            assert!(!stream.table_in_use && stream.batched.is_none());
            ids
        };
        let mut call = Scratch::for_text(varied.len(), CacheCap::CALL).unwrap();
        assert!(!call.table_in_use && call.batched.is_none());
        for text in [&varied, &repeated, &varied] {
            call.fit(text.len());
            let mut ids = Vec::new();
            e.encode_with(text, &mut ids, &mut call).unwrap();
            assert_eq!(ids, one_at_a_time(text));
            // Each call decides for itself; the table, once allocated, is kept.
            assert_eq!(call.table_in_use, text == &varied);
            assert!(call.batched.is_some());
        }
        // A text of fewer than three windows of pieces never takes it up.
        let mut call = Scratch::for_text(0, CacheCap::CALL).unwrap();
        let short = &varied[..varied.len() / 3];
        let mut ids = Vec::new();
        e.encode_with(short, &mut ids, &mut call).unwrap();
        assert_eq!(ids, one_at_a_time(short));
        assert!(!call.table_in_use && call.batched.is_none());
    }

    #[test]
    fn a_segment_that_is_a_token_its_bytes_do_not_merge_to_is_merged_as_tiktoken_does() {
        // "abcd" is a token, but its bytes merge "bc" first and never reach it; "z" is in no token,
        // so "abcdz" is cut into "abcd" and "z". tiktoken looks up only whole pieces: [a, bc, d, z].
        let e = encoder(
            &[b"bc", b"ab", b"cd", b"abcd"],
            &[(b"b", b"c"), (b"a", b"b"), (b"c", b"d"), (b"ab", b"cd")],
            &[],
        );
        assert!(!e.tokens_merge_whole);
        let expected = [b'a' as u32, 256, b'd' as u32, b'z' as u32];
        assert_eq!(encode(&e, "abcdz"), expected);
        // The whole piece is a token: that one id.
        assert_eq!(encode(&e, "abcd"), [259]);
        // The same through a worker's table of pieces and its lanes, and in a piece of more than 16
        // bytes cut into such segments.
        let mut worker = Scratch::for_text(0, CacheCap::WORKER).unwrap();
        let text = "abcdz ".repeat(300) + "abcdabcdabcdabcdabcdz";
        let mut ids = Vec::new();
        e.encode_with(&text, &mut ids, &mut worker).unwrap();
        assert_eq!(ids, encode(&e, &text));
        assert_eq!(ids[..4], expected);
        assert!(!ids.contains(&259));
        // A trained vocabulary's tokens all merge from their bytes.
        assert!(trained_encoder(&"abcabc abab the then ".repeat(20), 256 + 20).tokens_merge_whole);
    }

    #[test]
    fn merges_apply_by_rank_and_specials_map_to_ids() {
        let e = encoder(
            &[b"ab", b"abc", b"bc"],
            &[(b"a", b"b"), (b"ab", b"c"), (b"b", b"c")],
            &["<s>"],
        );
        // ids: ab 256, abc 257, bc 258, and the special token appended as 259.
        assert_eq!(encode(&e, "abcbc"), [257, 258]);
        assert_eq!(encode(&e, "bc<s>x"), [258, 259, b'x' as u32]);
        assert_eq!(e.vocab_size(), 260);
    }

    /// An encoder of the vocabulary of `vocab_size` tokens trained on `text`.
    pub(super) fn trained_encoder(text: &str, vocab_size: usize) -> Encoder {
        trained_encoder_with(text, vocab_size, &[])
    }

    /// [`trained_encoder`] with special tokens.
    fn trained_encoder_with(text: &str, vocab_size: usize, special: &[&str]) -> Encoder {
        let specials = SpecialTokens::new(special).unwrap();
        let mut counts = crate::PreTokenCounts::default();
        crate::count_text(text, &specials, &mut counts).unwrap();
        let trained = crate::train_counts(&counts, vocab_size, &specials, &crate::Silent).unwrap();
        let vocab: Vec<(u32, &[u8])> = (0..).zip(trained.vocab.iter().map(Vec::as_slice)).collect();
        let token = |id: u32| trained.vocab[id as usize].as_slice();
        let merges: Vec<(&[u8], &[u8])> = trained
            .merges
            .iter()
            .map(|&(a, b)| (token(a), token(b)))
            .collect();
        // The trained vocabulary holds the special tokens.
        let special: Vec<String> = special.iter().map(|s| s.to_string()).collect();
        Encoder::new(&vocab, &merges, &special).unwrap()
    }

    /// A small deterministic generator for test text.
    pub(super) fn xorshift(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn segments_merge_like_the_whole_piece() {
        // Trained on words of "ab" and words of "xy", so no token holds a letter of each: pieces that
        // mix them are cut wherever the two kinds meet.
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let words: String = (0..4000)
            .map(|i| {
                let letters: &[u8] = if i % 2 == 0 { b"ab" } else { b"xy" };
                let len = 1 + xorshift(&mut seed) as usize % 6;
                let word: String = (0..len)
                    .map(|_| letters[xorshift(&mut seed) as usize % 2] as char)
                    .collect();
                word + " "
            })
            .collect();
        let e = trained_encoder(&words, 256 + 60);
        let mut cut = 0;
        // One scratch for all pieces: segments recur, and the later ones come from the recent segments.
        let mut scratch = Scratch::for_text(0, CacheCap::CALL).unwrap();
        for round in 0..2000 {
            let len = 2 + xorshift(&mut seed) as usize % if round % 10 == 0 { 400 } else { 40 };
            let piece: Vec<u8> = (0..len)
                .map(|_| b"aabbxyyx"[xorshift(&mut seed) as usize % 8])
                .collect();
            let (mut whole, mut segmented, mut again) = (Vec::new(), Vec::new(), Vec::new());
            e.merge_uncut(&piece, &mut whole, &mut scratch).unwrap();
            if e.merge_segments(&piece, &mut segmented, &mut scratch)
                .unwrap()
                > 1
            {
                cut += 1;
            }
            e.merge_segments(&piece, &mut again, &mut scratch).unwrap();
            let text = String::from_utf8_lossy(&piece);
            assert_eq!(segmented, whole, "{text:?}");
            assert_eq!(again, whole, "{text:?}, again");
        }
        assert!(cut > 1500, "only {cut} pieces were cut");
        // A segment of 3 to 16 bytes is kept in the recent segments, with the ids it has alone.
        let mut ids = Vec::new();
        e.merge_segments(b"ababxyxy", &mut ids, &mut scratch)
            .unwrap();
        for segment in [&b"abab"[..], b"xyxy"] {
            let (mut kept, mut alone) = (Vec::new(), Vec::new());
            assert!(scratch
                .segments
                .push_to(&InlineKey::new(segment), &mut kept));
            e.merge_uncut(segment, &mut alone, &mut scratch).unwrap();
            assert_eq!(kept, alone);
        }
    }

    #[test]
    fn tokens_no_merge_builds_are_reached_like_tiktoken() {
        // "abc" is a token no merge builds: whole, it is one id; inside a longer piece tiktoken merges
        // "ab" + "c" into it, ranking it after the merges.
        let e = encoder(&[b"ab", b"abc"], &[(b"a", b"b")], &[]);
        assert_eq!(encode(&e, "abc"), [257]);
        assert_eq!(encode(&e, "abcabc"), [257, 257]);
        // Pieces of one and two bytes take the byte tables: "xy" is a token no merge builds, "yx" is
        // no token, "ab" is merged.
        let e = encoder(&[b"ab", b"xy"], &[(b"a", b"b")], &[]);
        let (x, y) = (b'x' as u32, b'y' as u32);
        assert_eq!(encode(&e, "xy yx ab b"), [257, 32, y, x, 32, 256, 32, 98]);
    }

    #[test]
    fn bad_vocabularies_are_errors() {
        let vocab = |extra: Vec<(u32, Vec<u8>)>| -> Vec<(u32, Vec<u8>)> {
            (0..=255u8)
                .map(|b| (b as u32, vec![b]))
                .chain(extra)
                .collect()
        };
        const NO_MERGES: &[(Vec<u8>, Vec<u8>)] = &[];
        let dup = Encoder::new(&vocab(vec![(256, b"a".to_vec())]), NO_MERGES, &[]);
        assert!(matches!(dup, Err(Error::InvalidVocab(m)) if m.contains("both")));
        let missing = Encoder::new(&vocab(vec![]), &[(b"a".to_vec(), b"b".to_vec())], &[]);
        assert!(matches!(missing, Err(Error::InvalidVocab(m)) if m.contains("merge 0 (result)")));
        let no_byte = Encoder::new(&[(0, b"a".to_vec())], NO_MERGES, &[]);
        assert!(matches!(no_byte, Err(Error::InvalidVocab(m)) if m.contains("byte 0x00")));
        // One id for two tokens, whichever comes first.
        for extra in [
            vec![(256, b"ab".to_vec()), (256, b"cd".to_vec())],
            vec![(256, b"cd".to_vec()), (256, b"ab".to_vec())],
        ] {
            let shared = Encoder::new(&vocab(extra), NO_MERGES, &[]);
            assert!(
                matches!(&shared, Err(Error::InvalidVocab(m)) if m.contains("id 256 is given to both")
                    && m.contains("\"ab\"") && m.contains("\"cd\"")),
                "{shared:?}"
            );
        }
        // A byte's id given to a longer token too.
        let byte_id = Encoder::new(&vocab(vec![(97, b"ab".to_vec())]), NO_MERGES, &[]);
        assert!(matches!(byte_id, Err(Error::InvalidVocab(m)) if m.contains("id 97")));
        let huge_id = Encoder::new(&vocab(vec![(u32::MAX - 1, b"ab".to_vec())]), NO_MERGES, &[]);
        assert!(matches!(huge_id, Err(Error::InvalidVocab(m)) if m.contains("too large")));
    }

    #[test]
    fn blocks_of_any_size_encode_like_the_whole_text_until_cancelled() {
        let e = encoder(&[b"ab"], &[(b"a", b"b")], &["<|x y|>"]);
        // With stretches of no safe cut longer than a block.
        let text =
            "ab ab<|x y|> abab\n\n ab  \u{e9}t\u{e9} x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x "
                .repeat(20);
        let whole = encode(&e, &text);
        let chars: Vec<char> = text.chars().collect();
        for block in 1..=40 {
            let (mut at, mut ids, mut sunk) = (0, Vec::new(), 0);
            let next = |buf: &mut String| -> Result<bool> {
                let end = chars.len().min(at + block);
                buf.extend(&chars[at..end]);
                at = end;
                Ok(at < chars.len())
            };
            let sink = |part: &mut Vec<u32>| -> Result<()> {
                ids.append(part);
                sunk += 1;
                Ok(())
            };
            e.encode_blocks(text.len(), None, next, &mut Vec::new(), sink)
                .unwrap();
            assert_eq!(ids, whole, "blocks of {block} characters");
            // Left in `out`, the stretches' ids are the whole text's.
            let (mut at, mut kept) = (0, vec![7]);
            let next = |buf: &mut String| -> Result<bool> {
                let end = chars.len().min(at + block);
                buf.extend(&chars[at..end]);
                at = end;
                Ok(at < chars.len())
            };
            e.encode_blocks(text.len(), None, next, &mut kept, |_| Ok(()))
                .unwrap();
            assert_eq!((kept[0], &kept[1..]), (7, &whole[..]));
            assert!(
                sunk >= chars.len() / block,
                "{sunk} stretches for blocks of {block}"
            );
        }
        // Cancelled before it starts: one stretch, then Interrupted.
        let cancel = Arc::new(AtomicBool::new(true));
        let mut sunk = 0;
        let stopped = e.encode_blocks(
            text.len(),
            Some(&cancel),
            |buf: &mut String| -> Result<bool> {
                buf.push_str("ab ab ");
                Ok(true)
            },
            &mut Vec::new(),
            |_: &mut Vec<u32>| -> Result<()> {
                sunk += 1;
                Ok(())
            },
        );
        assert!(matches!(stopped, Err(Error::Interrupted)) && sunk == 1);
        // An error of `next` or `sink` is the call's.
        let failed = e.encode_blocks(
            1,
            None,
            |_: &mut String| Err(Error::EmptySpecialToken),
            &mut Vec::new(),
            |_| Ok(()),
        );
        assert!(matches!(failed, Err(Error::EmptySpecialToken)));
    }

    #[test]
    fn prefixes_end_at_safe_cuts_and_add_up_to_the_whole() {
        let e = encoder(&[b"ab"], &[(b"a", b"b")], &["<|x y|>"]);
        let text = "ab ab<|x y|> abab\n\n ab  ";
        let whole = encode(&e, text);
        for split in 0..=text.len() {
            if !text.is_char_boundary(split) {
                continue;
            }
            // Feed text[..split], keep the tail, then feed the rest as the last piece.
            let mut ids = Vec::new();
            let used = e.encode_prefix(&text[..split], false, &mut ids).unwrap();
            let rest = format!("{}{}", &text[used..split], &text[split..]);
            e.encode_prefix(&rest, true, &mut ids).unwrap();
            assert_eq!(ids, whole, "split at {split}");
        }
    }

    #[test]
    fn a_batch_is_each_text_encoded_alone_until_cancelled() {
        let e = encoder(&[b"ab", b"abab"], &[(b"a", b"b"), (b"ab", b"ab")], &["<s>"]);
        let texts: Vec<String> = (0..50)
            .map(|i| format!("ab<s>{} abab b", "ab".repeat(i)))
            .collect();
        let alone: Vec<Vec<u32>> = texts.iter().map(|t| encode(&e, t)).collect();
        for threads in [None, Some(1), Some(3)] {
            assert_eq!(e.encode_batch(&texts, threads, None).unwrap(), alone);
        }
        assert!(e.encode_batch::<&str>(&[], None, None).unwrap().is_empty());
        let cancel = Arc::new(AtomicBool::new(true));
        assert!(matches!(
            e.encode_batch(&texts, Some(2), Some(&cancel)),
            Err(Error::Interrupted)
        ));
    }

    #[test]
    fn the_reused_buffer_gives_each_text_its_own_ids_and_is_kept_only_when_small() {
        let e = encoder(&[b"ab", b"abab"], &[(b"a", b"b"), (b"ab", b"ab")], &["<s>"]);
        let kept = |e: &Encoder| e.scratches.with(0, |s| s.ids.capacity()).unwrap();
        // Longer, shorter, then much longer texts: each call sees only its own ids.
        for n in [40, 3, 0, 7, KEEP_SHORT_IDS, 2] {
            let text = format!("ab<s>{} b ", "ab".repeat(n));
            assert_eq!(
                e.encode_then(&text, |ids| ids.to_vec()).unwrap(),
                encode(&e, &text)
            );
            assert!(kept(&e) <= KEEP_SHORT_IDS);
        }
        assert!(
            kept(&e) >= "ab<s> b ".len(),
            "a short text's buffer is kept"
        );
        let long = "a b ".repeat(KEEP_SHORT_IDS);
        assert_eq!(e.encode_then(&long, |ids| ids.len()).unwrap(), long.len());
        assert_eq!(kept(&e), 0, "a long text's buffer is freed");
    }

    #[test]
    fn cancellable_encoding_equals_encoding_until_cancelled() {
        let e = encoder(
            &[b"ab", b"abab"],
            &[(b"a", b"b"), (b"ab", b"ab")],
            &["<|x y|>"],
        );
        // Blocks of ordinary text, then a piece longer than a block with no cut in it.
        let text = format!(
            "{}{}{}",
            "ab abab<|x y|> b\n".repeat(CANCEL_BLOCK / 8),
            "ab".repeat(CANCEL_BLOCK),
            " ab"
        );
        let cancel = Arc::new(AtomicBool::new(false));
        let mut ids = Vec::new();
        e.encode_cancellable(&text, &mut ids, &cancel).unwrap();
        assert_eq!(ids, encode(&e, &text));
        cancel.store(true, Ordering::Relaxed);
        assert!(matches!(
            e.encode_cancellable(&text, &mut ids, &cancel),
            Err(Error::Interrupted)
        ));
    }

    #[test]
    fn decode_rejects_unknown_ids() {
        let e = encoder(&[], &[], &[]);
        let mut out = Vec::new();
        e.decode([104, 105], &mut out).unwrap();
        assert_eq!(out, b"hi");
        assert!(matches!(
            e.decode([300], &mut out),
            Err(Error::UnknownId(300))
        ));
    }
}
