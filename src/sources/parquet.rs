//! Parquet files: the text column of each row group, read a batch of rows at a time ([`ParquetText`]).
//!
//! arrow-rs decodes the column's pages into Arrow string arrays, whose strings the caller reads in
//! place ([`TextBatch`]). A row group is the unit of work: threads take the row groups of one file as
//! they take the chunks of a text file, each reading its own through the file shared between them.
//!
//! Memory follows the batch, not the file: the reader fetches a page at a time (never a whole column
//! chunk or row group), and a batch holds about `batch_bytes` of text, its rows counted from the row
//! group's statistics, so long documents come a few at a time and short ones many. A page is read
//! whole, as its decoder needs it: writers check a page's size (1 MB) only every 1,024 rows, so a page
//! of long documents can hold many megabytes.
//!
//! Only the text column is read (a projection). The Arrow schema a writer embeds is ignored: its hints
//! (large strings, string views, dictionaries) change how arrays are laid out, not the text, and
//! without them every string column comes back as one type. arrow-rs checks that a string page is
//! UTF-8, as the Parquet format requires, so invalid UTF-8 is a damaged row group, not a bad record.
//!
//! Memory: the decoder's allocations are not fallible (it aborts the process when one fails), so before
//! each batch the memory it will take is reserved and given back ([`decoder_headroom`]): a memory limit
//! too tight for a batch is an [`Error::OutOfMemory`], not an abort. The reservation covers a batch of
//! `batch_bytes` and the largest pages of the row group, whose sizes the pages' headers give: they are
//! read before decoding (see [`super::pages`], which also refuses the pages arrow-rs cannot decode
//! safely).
//!
//! Errors: a file that is not Parquet, or whose footer or row group cannot be decoded, is
//! [`Error::BadParquet`], which skip mode skips (the file, or the rest of the row group); a missing text
//! column, or one that is not strings, is [`Error::TextColumn`], which it does not (the caller named
//! the wrong column); a null text is a bad record ([`Error::BadRecord`] at [`RecordAt::Row`]); an
//! error of the system's, reading the file, is [`Error::Io`]. A panic of the decoder on damaged data is
//! caught and reported as [`Error::BadParquet`].

use std::fs::File;
use std::io::{self, Read};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use arrow_array::cast::AsArray;
use arrow_array::{Array, StringArray};
use arrow_schema::DataType;
use bytes::Bytes;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader,
    ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::ProjectionMask;
use parquet::basic::Compression;
use parquet::errors::ParquetError;
use parquet::file::metadata::ColumnChunkMetaData;
use parquet::file::reader::{ChunkReader, Length};

use super::pages::read_page_header;
use crate::error::{try_reserve, AllocError, Error, RecordAt, Result};

/// The most rows a batch holds, however short they are: a batch's array of offsets stays small.
const MAX_BATCH_ROWS: usize = 65_536;

/// A Parquet file opened for its text column: its footer read and checked once, shared by the threads
/// that read its row groups.
pub(crate) struct ParquetText {
    path: PathBuf,
    file: FileChunks,
    metadata: ArrowReaderMetadata,
    /// The text column's index among the top-level fields.
    field: usize,
    /// Its leaf column, whose statistics size the batches.
    leaf: usize,
    /// The first row of each row group, and the rows of the file last.
    first_rows: Vec<u64>,
}

/// The rows of each row group of the Parquet file `path`, from its footer: where a large file can be
/// cut into parts counted apart ([`crate::count_parquet_row_groups`]). Fails as counting the file
/// would on a file that cannot be read or is not Parquet.
pub fn parquet_row_groups(path: &Path) -> Result<Vec<u64>> {
    let (_, metadata) = footer(path)?;
    let mut rows = first_rows(path, &metadata)?;
    for i in 1..rows.len() {
        rows[i - 1] = rows[i] - rows[i - 1];
    }
    rows.pop();
    Ok(rows)
}

/// The first row of each row group of the file `path`, and its rows last; an error for row counts
/// that are negative or add up past 2^64 - 1.
fn first_rows(path: &Path, metadata: &ArrowReaderMetadata) -> Result<Vec<u64>> {
    let groups = metadata.metadata().row_groups();
    let mut first_rows = Vec::new();
    try_reserve(&mut first_rows, groups.len() + 1)
        .map_err(|e| e.named("the row groups of a Parquet file"))?;
    let mut row = 0u64;
    for group in groups {
        first_rows.push(row);
        row = u64::try_from(group.num_rows())
            .ok()
            .and_then(|rows| row.checked_add(rows))
            .ok_or_else(|| Error::BadParquet {
                path: path.to_path_buf(),
                rows: None,
                why: format!("a row group of {} rows", group.num_rows()),
            })?;
    }
    first_rows.push(row);
    Ok(first_rows)
}

/// The file `path` opened, and its footer read.
fn footer(path: &Path) -> Result<(FileChunks, ArrowReaderMetadata)> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    let file = FileChunks::new(file, len);
    let options = ArrowReaderOptions::new().with_skip_arrow_metadata(true);
    let metadata = decoding(|| ArrowReaderMetadata::load(&file, options))
        .map_err(|why| file.error(path, why))?
        .map_err(|e| file.error(path, e.to_string()))?;
    Ok((file, metadata))
}

impl ParquetText {
    /// Opens the Parquet file `path` and finds its string column `text_field`.
    pub(crate) fn open(path: &Path, text_field: &str) -> Result<ParquetText> {
        let (file, metadata) = footer(path)?;
        // The footer's accessors panic on some damaged values: a panic is damaged data too.
        decoding(|| Self::with_footer(path, text_field, file, metadata)).unwrap_or_else(|why| {
            Err(Error::BadParquet {
                path: path.to_path_buf(),
                rows: None,
                why,
            })
        })
    }

    /// [`Self::open`], the footer read.
    fn with_footer(
        path: &Path,
        text_field: &str,
        file: FileChunks,
        metadata: ArrowReaderMetadata,
    ) -> Result<ParquetText> {
        let bad = |why: String| Error::BadParquet {
            path: path.to_path_buf(),
            rows: None,
            why,
        };
        let schema = metadata.schema();
        let Some(field) = schema.fields().iter().position(|f| f.name() == text_field) else {
            let names: Vec<String> = schema
                .fields()
                .iter()
                .map(|f| format!("'{}'", f.name()))
                .collect();
            return Err(Error::TextColumn {
                path: path.to_path_buf(),
                why: format!(
                    "no column '{text_field}' (its columns: {})",
                    names.join(", ")
                ),
            });
        };
        let kind = schema.field(field).data_type();
        // Without the writer's hints, every Parquet string column is read as `Utf8`.
        if *kind != DataType::Utf8 {
            return Err(Error::TextColumn {
                path: path.to_path_buf(),
                why: format!("column '{text_field}' is {kind}, not a column of strings"),
            });
        }
        let parquet_schema = metadata.parquet_schema();
        let leaf = (0..parquet_schema.num_columns())
            .find(|&i| parquet_schema.get_column_root_idx(i) == field)
            .ok_or_else(|| bad(format!("column '{text_field}' has no leaf column")))?;
        let first_rows = first_rows(path, &metadata)?;
        Ok(ParquetText {
            path: path.to_path_buf(),
            file,
            metadata,
            field,
            leaf,
            first_rows,
        })
    }

    /// How many row groups the file has.
    pub(crate) fn row_groups(&self) -> usize {
        self.first_rows.len() - 1
    }

    /// The first row of row group `group`, in the file.
    pub(crate) fn first_row(&self, group: usize) -> u64 {
        self.first_rows[group]
    }

    /// The rows of row group `group`.
    pub(crate) fn rows(&self, group: usize) -> u64 {
        self.first_rows[group + 1] - self.first_rows[group]
    }

    /// Row group `group`'s share of the file's bytes, by its rows (for progress): the shares of all
    /// the row groups add up to the file's size.
    pub(crate) fn share(&self, group: usize) -> u64 {
        let bytes = self.file.len;
        let rows = u128::from(self.first_rows[self.row_groups()]).max(1);
        let at = |row: u64| (u128::from(bytes) * u128::from(row) / rows) as u64;
        match group + 1 == self.row_groups() {
            true => bytes - at(self.first_rows[group]),
            false => at(self.first_rows[group + 1]) - at(self.first_rows[group]),
        }
    }

    /// The rows of row group `group`, in batches of about `batch_bytes` of text.
    pub(crate) fn batches(
        self: &Arc<Self>,
        group: usize,
        batch_bytes: usize,
    ) -> Result<TextBatches> {
        let first_row = self.first_rows[group];
        decoding(|| self.batches_of(group, batch_bytes))
            .unwrap_or_else(|why| Err(self.group_error(group, first_row, why)))
    }

    /// [`Self::batches`], its panics not caught.
    fn batches_of(self: &Arc<Self>, group: usize, batch_bytes: usize) -> Result<TextBatches> {
        let first_row = self.first_rows[group];
        let (chunk, bytes) = self
            .text_chunk(group)
            .map_err(|why| self.group_error(group, first_row, why))?;
        let text_bytes = u64::try_from(chunk.uncompressed_size()).unwrap_or(0).max(1);
        let rows = self.rows(group).max(1);
        let batch_rows = (batch_bytes as u128 * u128::from(rows) / u128::from(text_bytes))
            .clamp(1, MAX_BATCH_ROWS as u128) as usize;
        let compressed = chunk.compression() != Compression::UNCOMPRESSED;
        let pages = self
            .check_pages(bytes, compressed)
            .map_err(|why| self.group_error(group, first_row, why))?;
        let headroom = decoder_headroom(batch_bytes, pages);
        reserve(headroom)?;
        let built = decoding(|| {
            let mask = ProjectionMask::roots(self.metadata.parquet_schema(), [self.field]);
            ParquetRecordBatchReaderBuilder::new_with_metadata(
                self.file.clone(),
                self.metadata.clone(),
            )
            .with_projection(mask)
            .with_row_groups(vec![group])
            .with_batch_size(batch_rows)
            .build()
        });
        let reader = built
            .and_then(|built| built.map_err(|e| e.to_string()))
            .map_err(|why| self.group_error(group, first_row, why))?;
        Ok(TextBatches {
            text: self.clone(),
            group,
            reader,
            row: first_row,
            headroom,
        })
    }

    /// The footer's description of the text column in row group `group`, and the bytes of the file
    /// its pages are in (within the file), checked where arrow-rs's accessors would panic on a damaged
    /// footer.
    fn text_chunk(
        &self,
        group: usize,
    ) -> std::result::Result<(&ColumnChunkMetaData, Range<u64>), String> {
        let chunk = (self.metadata.metadata().row_groups().get(group))
            .and_then(|g| g.columns().get(self.leaf))
            .ok_or_else(|| format!("row group {group} has no column {}", self.leaf))?;
        let start = chunk
            .dictionary_page_offset()
            .unwrap_or(chunk.data_page_offset());
        let (Ok(start), Ok(length)) =
            (u64::try_from(start), u64::try_from(chunk.compressed_size()))
        else {
            return Err("the text column's place in the file is negative".to_string());
        };
        let end = start.saturating_add(length).min(self.file.len);
        Ok((chunk, start..end))
    }

    /// Reads the headers of the pages in `bytes` of the file, of a column chunk `compressed` or not:
    /// the most memory decoding them takes at a time (the largest data page and the largest dictionary
    /// page, see [`PageHeader::memory`]), or why the row group is refused (see [`super::pages`]).
    fn check_pages(
        &self,
        bytes: Range<u64>,
        compressed: bool,
    ) -> std::result::Result<usize, String> {
        let (mut data, mut dictionary) = (0u64, 0u64);
        let mut at = bytes.start;
        while at < bytes.end {
            let file = At {
                file: self.file.clone(),
                at,
            };
            let (header, header_bytes) = read_page_header(&mut io::BufReader::new(file))
                .map_err(|e| format!("the page header at byte {at}: {e}"))?;
            if let Some(why) = header.refused(compressed) {
                return Err(format!("{why}, at byte {at}"));
            }
            let most = match header.is_dictionary() {
                true => &mut dictionary,
                false => &mut data,
            };
            *most = (*most).max(header.memory(compressed));
            at = at
                .saturating_add(header_bytes)
                .saturating_add(header.compressed_size as u64);
        }
        Ok(usize::try_from(data.saturating_add(dictionary)).unwrap_or(usize::MAX))
    }

    /// The error of reading row group `group` from row `row` on: the system's, memory, or damaged
    /// data.
    fn group_error(&self, group: usize, row: u64, why: String) -> Error {
        self.file
            .take_failure(&self.path)
            .unwrap_or_else(|| Error::BadParquet {
                path: self.path.clone(),
                rows: Some((row, group)),
                why,
            })
    }
}

/// The rows of one row group, a batch at a time.
pub(crate) struct TextBatches {
    text: Arc<ParquetText>,
    group: usize,
    reader: ParquetRecordBatchReader,
    /// The row of the next batch's first, in the file.
    row: u64,
    /// The memory reserved before each batch ([`decoder_headroom`]).
    headroom: usize,
}

impl TextBatches {
    /// The next batch, or None at the end of the row group.
    pub(crate) fn next_batch(&mut self) -> Result<Option<TextBatch>> {
        reserve(self.headroom)?;
        let strings = match decoding(|| self.reader.next().map(|batch| batch.map(strings_of))) {
            Ok(None) => return Ok(None),
            Ok(Some(Ok(strings))) => strings,
            Ok(Some(Err(e))) => Err(e.to_string()),
            Err(why) => Err(why),
        }
        .map_err(|why| self.text.group_error(self.group, self.row, why))?;
        let first_row = self.row;
        self.row += strings.len() as u64;
        Ok(Some(TextBatch {
            text: self.text.clone(),
            first_row,
            strings,
        }))
    }
}

/// The text column of a batch of the projection to it: its strings, or why there are none.
fn strings_of(batch: arrow_array::RecordBatch) -> std::result::Result<StringArray, String> {
    let column = batch
        .columns()
        .first()
        .ok_or("a batch without the text column")?;
    match column.as_string_opt::<i32>() {
        Some(strings) => Ok(strings.clone()),
        None => Err(format!("a batch of {}, not strings", column.data_type())),
    }
}

/// Rows of a Parquet file's text column, each a document.
pub(crate) struct TextBatch {
    text: Arc<ParquetText>,
    /// The file's row of the first.
    first_row: u64,
    strings: StringArray,
}

impl TextBatch {
    /// How many rows the batch holds.
    pub(crate) fn len(&self) -> usize {
        self.strings.len()
    }

    /// The file's row of the batch's row `i`.
    pub(crate) fn row(&self, i: usize) -> u64 {
        self.first_row + i as u64
    }

    /// The text of row `i`: an error naming the row when it is null.
    pub(crate) fn text(&self, i: usize) -> Result<&str> {
        match self.strings.is_null(i) {
            true => Err(Error::BadRecord {
                at: RecordAt::Row(self.text.path.clone(), self.row(i)),
                why: "the text is null".to_string(),
            }),
            false => Ok(self.strings.value(i)),
        }
    }
}

/// The memory the decoder may take for a batch of about `batch_bytes` of text from pages that take
/// `pages` bytes at a time: the batch's strings in a buffer that grows by doubling (up to twice their
/// size, with the old buffer while it is copied), and the pages.
fn decoder_headroom(batch_bytes: usize, pages: usize) -> usize {
    batch_bytes.saturating_mul(3).saturating_add(pages)
}

/// Reserves `bytes` and gives them back: an error, rather than the decoder's abort, when they cannot be
/// had.
fn reserve(bytes: usize) -> Result<()> {
    let mut probe: Vec<u8> = Vec::new();
    try_reserve(&mut probe, bytes).map_err(|e| e.named("decoding a batch of Parquet rows"))
}

/// Runs the decoder's `f`, its panic (damaged data the decoder did not expect) becoming an error.
fn decoding<T>(f: impl FnOnce() -> T) -> std::result::Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|panic| {
        let what = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("a panic");
        format!("the Parquet decoder failed: {what}")
    })
}

/// The file as the Parquet reader reads it: positioned reads (`pread`), so that threads share one open
/// file without a file offset to race on, each read checked against the file's length before its
/// buffer is allocated, and fallibly (a damaged length is an error, not an allocation of gigabytes),
/// the system's errors and failed allocations kept, since the reader turns them into text.
#[derive(Clone)]
struct FileChunks {
    file: Arc<File>,
    len: u64,
    failure: Arc<Mutex<Option<Failure>>>,
}

/// Why a read of [`FileChunks`] failed, when it was not the data.
enum Failure {
    Io(io::Error),
    OutOfMemory(AllocError),
}

impl FileChunks {
    fn new(file: File, len: u64) -> FileChunks {
        FileChunks {
            file: Arc::new(file),
            len,
            failure: Arc::new(Mutex::new(None)),
        }
    }

    fn keep(&self, failure: Failure) {
        *self.failure.lock().unwrap_or_else(PoisonError::into_inner) = Some(failure);
    }

    /// The error of the last read of the file `path` that failed for a reason other than its data.
    fn take_failure(&self, path: &Path) -> Option<Error> {
        let failure = self
            .failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()?;
        Some(match failure {
            Failure::Io(e) => Error::io(path, e),
            Failure::OutOfMemory(e) => e.named("a page of a Parquet file"),
        })
    }

    /// The error of opening the file `path`: the system's, memory, or a file that is not Parquet.
    fn error(&self, path: &Path, why: String) -> Error {
        self.take_failure(path)
            .unwrap_or_else(|| Error::BadParquet {
                path: path.to_path_buf(),
                rows: None,
                why,
            })
    }

    /// Reads `buf.len()` bytes at `offset`, keeping the system's error.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.file.read_at(buf, offset).inspect_err(|e| {
            if e.kind() != io::ErrorKind::Interrupted {
                let kept = io::Error::new(e.kind(), e.to_string());
                let kept = e.raw_os_error().map_or(kept, io::Error::from_raw_os_error);
                self.keep(Failure::Io(kept));
            }
        })
    }
}

impl Length for FileChunks {
    fn len(&self) -> u64 {
        self.len
    }
}

impl ChunkReader for FileChunks {
    type T = io::BufReader<At>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(io::BufReader::new(At {
            file: self.clone(),
            at: start,
        }))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        if start
            .checked_add(length as u64)
            .is_none_or(|end| end > self.len)
        {
            return Err(ParquetError::EOF(format!(
                "{length} bytes at offset {start} are past the end of the file ({} bytes)",
                self.len
            )));
        }
        let mut buffer = Vec::new();
        try_reserve(&mut buffer, length).map_err(|e| {
            self.keep(Failure::OutOfMemory(e));
            ParquetError::General(format!("could not allocate {} bytes", e.bytes))
        })?;
        buffer.resize(length, 0);
        let mut done = 0;
        while done < length {
            match self.read_at(&mut buffer[done..], start + done as u64) {
                Ok(0) => return Err(ParquetError::EOF("the file ended early".to_string())),
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ParquetError::External(Box::new(e))),
            }
        }
        Ok(buffer.into())
    }
}

/// A reader of the file from an offset on.
struct At {
    file: FileChunks,
    at: u64,
}

impl Read for At {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read_at(buf, self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use arrow_array::{ArrayRef, RecordBatch};
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;

    /// Writes `rows` (None for a null) as the column "text" of the Parquet file `path`, after a column
    /// "id", `group_rows` rows a row group.
    pub(crate) fn write_parquet(path: &Path, rows: &[Option<&str>], group_rows: usize) {
        let ids: ArrayRef = Arc::new(arrow_array::Int64Array::from_iter_values(
            (0..rows.len()).map(|i| i as i64),
        ));
        let texts: ArrayRef = Arc::new(StringArray::from(rows.to_vec()));
        let batch = RecordBatch::try_from_iter([("id", ids), ("text", texts)]).unwrap();
        let properties = WriterProperties::builder()
            .set_max_row_group_row_count(Some(group_rows))
            .build();
        let file = File::create(path).unwrap();
        let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(properties)).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
    }

    fn temp(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("bytepair-parquet-{}-{name}", std::process::id()))
    }

    /// Every row of row group `group`, read `batch_bytes` at a time, with the batches' lengths.
    fn read_group(
        text: &Arc<ParquetText>,
        group: usize,
        batch_bytes: usize,
    ) -> (Vec<(u64, Option<String>)>, Vec<usize>) {
        let mut batches = text.batches(group, batch_bytes).unwrap();
        let (mut rows, mut lengths) = (Vec::new(), Vec::new());
        while let Some(batch) = batches.next_batch().unwrap() {
            lengths.push(batch.len());
            for i in 0..batch.len() {
                rows.push((batch.row(i), batch.text(i).ok().map(str::to_string)));
            }
        }
        (rows, lengths)
    }

    #[test]
    fn row_groups_are_read_in_batches_of_about_the_bytes_asked_their_rows_numbered_in_the_file() {
        let path = temp("batches.parquet");
        let texts: Vec<String> = (0..25)
            .map(|i| format!("row {i:02} {}", "x".repeat(i)))
            .collect();
        let mut rows: Vec<Option<&str>> = texts.iter().map(|t| Some(t.as_str())).collect();
        rows[12] = None;
        write_parquet(&path, &rows, 10);
        let text = Arc::new(ParquetText::open(&path, "text").unwrap());
        assert_eq!(text.row_groups(), 3);
        assert_eq!(
            (
                text.first_row(1),
                text.rows(1),
                text.first_row(2),
                text.rows(2)
            ),
            (10, 10, 20, 5)
        );
        let size = std::fs::metadata(&path).unwrap().len();
        assert_eq!((0..3).map(|g| text.share(g)).sum::<u64>(), size);
        let mut all = Vec::new();
        for group in 0..3 {
            // A byte a batch is a row a batch; a megabyte holds the whole row group.
            let (one_by_one, lengths) = read_group(&text, group, 1);
            assert!(lengths.iter().all(|&n| n == 1), "{lengths:?}");
            let (whole, lengths) = read_group(&text, group, 1 << 20);
            assert_eq!(lengths, vec![text.rows(group) as usize]);
            assert_eq!(one_by_one, whole);
            all.extend(whole);
        }
        let expected: Vec<(u64, Option<String>)> = rows
            .iter()
            .enumerate()
            .map(|(i, r)| (i as u64, r.map(str::to_string)))
            .collect();
        assert_eq!(all, expected);
        let mut batches = text.batches(1, 1 << 20).unwrap();
        let batch = batches.next_batch().unwrap().unwrap();
        let message = batch.text(2).unwrap_err().to_string();
        assert_eq!(
            message,
            format!("{}: row 12: the text is null", path.display())
        );
        assert_eq!(parquet_row_groups(&path).unwrap(), vec![10, 10, 5]);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_file_that_is_not_parquet_or_lacks_the_column_is_named_in_its_error() {
        let path = temp("not.parquet");
        std::fs::write(&path, b"PAR1 not really").unwrap();
        let e = ParquetText::open(&path, "text").err().unwrap();
        assert!(matches!(e, Error::BadParquet { rows: None, .. }), "{e:?}");
        assert!(e.to_string().starts_with(&format!(
            "{}: not a Parquet file, or a corrupt one (",
            path.display()
        )));
        write_parquet(&path, &[Some("a")], 10);
        let e = ParquetText::open(&path, "body").err().unwrap();
        let message = format!(
            "{}: no column 'body' (its columns: 'id', 'text')",
            path.display()
        );
        assert_eq!(e.to_string(), message);
        let e = ParquetText::open(&path, "id").err().unwrap();
        let message = format!(
            "{}: column 'id' is Int64, not a column of strings",
            path.display()
        );
        assert_eq!(e.to_string(), message);
        std::fs::remove_file(&path).unwrap();
        let e = ParquetText::open(&path, "text").err().unwrap();
        assert!(matches!(&e, Error::Io { source, .. } if source.kind() == io::ErrorKind::NotFound));
    }

    #[test]
    fn the_fuzz_findings_are_damaged_data_not_an_abort_or_a_panic() {
        // A DELTA_BYTE_ARRAY page whose header claims 1.4 * 10^14 values, which arrow-rs 60.1
        // allocates (and aborts on) before decoding any; a negative column chunk offset, on which its
        // `ColumnChunkMetaData::byte_range` asserts; a DELTA_BYTE_ARRAY page whose page header declares
        // its encoding an i16, which arrow-rs reads as its encoding all the same.
        let findings: [(&[u8], &str); 3] = [
            (
                include_bytes!(
                    "../../fuzz/corpus/parquet/crash-34648699d42c83e79dff04b35463f4a0afa55655"
                ),
                "a page of DELTA_BYTE_ARRAY values",
            ),
            (
                include_bytes!(
                    "../../fuzz/corpus/parquet/crash-7b0fb73762b91aae187e4cb59a1d3469bdf90a00"
                ),
                "the page header at byte",
            ),
            (
                include_bytes!(
                    "../../fuzz/corpus/parquet/crash-de65b3893f514ad2cb716df44b136aafb61c412c"
                ),
                "a page of DELTA_BYTE_ARRAY values",
            ),
        ];
        let path = temp("finding.parquet");
        for (bytes, why) in findings {
            std::fs::write(&path, bytes).unwrap();
            let text = Arc::new(ParquetText::open(&path, "text").unwrap());
            let e = text.batches(0, 1 << 20).err().unwrap();
            assert!(
                matches!(
                    e,
                    Error::BadParquet {
                        rows: Some((0, 0)),
                        ..
                    }
                ),
                "{e:?}"
            );
            assert!(e.to_string().contains(why), "{e}");
        }
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn reads_past_the_end_of_the_file_are_errors_before_any_allocation() {
        let path = temp("short.parquet");
        std::fs::write(&path, b"0123456789").unwrap();
        let file = FileChunks::new(File::open(&path).unwrap(), 10);
        assert_eq!(&file.get_bytes(2, 8).unwrap()[..], b"23456789");
        assert!(matches!(file.get_bytes(2, 9), Err(ParquetError::EOF(_))));
        assert!(matches!(
            file.get_bytes(3, usize::MAX),
            Err(ParquetError::EOF(_))
        ));
        let mut rest = String::new();
        file.get_read(6).unwrap().read_to_string(&mut rest).unwrap();
        assert_eq!(rest, "6789");
        std::fs::remove_file(&path).unwrap();
    }
}
