//! `bytepair._core.encode_dataset`: the engine's [`encode_dataset`] for Python. Files are read by the
//! engine; iterables of `str` come from Python iterators, read through [`PyDocuments`] by whichever
//! worker holds the reader (it takes the GIL for each batch, and encodes with it released).

use std::path::PathBuf;

use pyo3::exceptions::{PyStopIteration, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple};

use super::counts::{errors_mode, kind_of};
use super::encoder::dtype_of;
use super::encoder::PyEncoder;
use super::errors::alloc_err;
use super::interrupt::{run_interruptible, PyProgress};
use super::objects::{int, list, string, tuple};
use super::strings::utf8;
use crate::error::try_reserve;
use crate::{
    encode_dataset, DatasetInput, DatasetJob, DatasetOptions, DocumentReader, Error, Errors, Piece,
    RecordAt, Shard, ShardFormat, ShardInputs, DEFAULT_CHUNK_SIZE,
};

/// Documents from a Python iterator whose items are `(input_bytes, batch)`: `batch` a list of `str`
/// (an iterable's documents).
struct PyDocuments<'p> {
    iterator: Py<PyAny>,
    errors: Errors,
    /// Items of an iterable read so far, for messages.
    items: u64,
    /// Where a Python exception raised by the iterator is kept, to be the call's exception.
    progress: &'p PyProgress,
}

impl DocumentReader for PyDocuments<'_> {
    fn read(&mut self, piece: &mut Piece) -> crate::Result<bool> {
        piece.clear();
        Python::attach(|py| self.read_batch(py, piece)).unwrap_or_else(|err| {
            self.progress.keep(err);
            Err(Error::Interrupted)
        })
    }
}

impl PyDocuments<'_> {
    /// Reads the next batch into `piece`: whether the iterator ended, an engine error (a bad record
    /// in strict mode, out of memory), or a Python exception.
    fn read_batch(&mut self, py: Python<'_>, piece: &mut Piece) -> PyResult<crate::Result<bool>> {
        let item = match self.iterator.bind(py).call_method0(intern!(py, "__next__")) {
            Ok(item) => item,
            Err(e) if e.is_instance_of::<PyStopIteration>(py) => return Ok(Ok(true)),
            Err(e) => return Err(e),
        };
        let (input_bytes, batch): (u64, Bound<'_, PyAny>) = item.extract()?;
        piece.input_bytes = input_bytes;
        let bad = |at: RecordAt, why: String, piece: &mut Piece| {
            let e = Error::BadRecord { at, why };
            match self.errors {
                Errors::Strict => Err(e),
                Errors::Skip => {
                    piece.skip(&e);
                    Ok(())
                }
            }
        };
        let texts = batch.cast::<PyList>()?;
        let first = self.items;
        self.items += texts.len() as u64;
        for (i, item) in texts.iter().enumerate() {
            let at = first + i as u64;
            let Ok(text) = item.cast::<PyString>() else {
                let kind = item.get_type().name()?;
                return Err(PyTypeError::new_err(format!(
                    "item {at} is {kind}, not str: an iterable of documents must give str"
                )));
            };
            let added = match utf8(text) {
                Ok(text) => piece.push_document(&text),
                Err(e) => bad(RecordAt::Item(at), e.value(py).to_string(), piece),
            };
            if let Err(e) = added {
                return Ok(Err(e));
            }
        }
        Ok(Ok(false))
    }
}

/// A shard as `on_shard` gets it: `(name, tokens, documents, skipped, text_bytes, ((file, bytes,
/// crc32), (file, bytes, crc32)))`, the data file first.
fn shard_to_py<'py>(
    py: Python<'py>,
    shard: &Shard,
    inputs: ShardInputs,
) -> PyResult<Bound<'py, PyTuple>> {
    let file = |i: usize| -> PyResult<Bound<'py, PyAny>> {
        let f = &shard.files[i];
        let fields = [
            string(py, &f.name)?,
            int(py, f.bytes)?,
            int(py, f.crc32 as u64)?,
        ];
        Ok(tuple(py, fields)?.into_any())
    };
    let files = tuple(py, [file(0)?, file(1)?])?.into_any();
    tuple(
        py,
        [
            string(py, &shard.name)?,
            int(py, shard.tokens)?,
            int(py, shard.documents)?,
            int(py, inputs.skipped)?,
            int(py, inputs.text_bytes)?,
            files,
        ],
    )
}

/// Encodes `jobs` into shards in `folder`. Each job is `(shard, source)`: `source` a file as
/// `(path, format, compression)` (`source_kind`'s names), or an iterator of batches ([`PyDocuments`]).
/// `on_shard` is called with each shard once it is in place ([`shard_to_py`]); returns
/// `(tokens, documents, skipped, skipped_errors, input_bytes)`.
#[pyfunction]
#[pyo3(name = "encode_dataset", signature = (encoder, folder, jobs, format, dtype_bits, eot, separator, text_field, skip, num_threads, chunk_size, total_bytes, on_shard, progress=None))]
#[allow(clippy::too_many_arguments)]
pub(super) fn encode_dataset_py<'py>(
    py: Python<'py>,
    encoder: PyRef<'py, PyEncoder>,
    folder: PathBuf,
    jobs: &Bound<'py, PyList>,
    format: &str,
    dtype_bits: u32,
    eot: Option<u32>,
    separator: Option<String>,
    text_field: String,
    skip: bool,
    num_threads: Option<usize>,
    chunk_size: Option<usize>,
    total_bytes: u64,
    on_shard: Py<PyAny>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyTuple>> {
    let format = ShardFormat::from_name(format)
        .ok_or_else(|| PyValueError::new_err(format!("no shard format {format:?}")))?;
    let dtype = dtype_of(dtype_bits)?;
    let errors = errors_mode(skip);
    let progress = PyProgress::new(progress);
    let mut dataset_jobs = Vec::new();
    try_reserve(&mut dataset_jobs, jobs.len()).map_err(alloc_err("the inputs"))?;
    for job in jobs.iter() {
        let (shard, source): (String, Bound<'_, PyAny>) = job.extract()?;
        let input = match source.extract::<(PathBuf, String, Option<String>)>() {
            Ok((path, format, compression)) => {
                DatasetInput::File(path, kind_of(&format, compression.as_deref())?)
            }
            Err(_) => DatasetInput::Reader(Box::new(PyDocuments {
                iterator: source.unbind(),
                errors,
                items: 0,
                progress: &progress,
            })),
        };
        dataset_jobs.push(DatasetJob { input, shard });
    }
    let options = DatasetOptions {
        format,
        dtype,
        eot,
        separator: separator.as_deref(),
        text_field: &text_field,
        errors,
        num_threads,
        chunk_size: chunk_size.unwrap_or(DEFAULT_CHUNK_SIZE),
        total_bytes,
    };
    let encoder = &encoder.inner;
    let mut on_shard = |shard: &Shard, inputs: ShardInputs| -> crate::Result<()> {
        Python::attach(|py| {
            let shard = shard_to_py(py, shard, inputs)?;
            on_shard.call1(py, (shard,)).map(drop)
        })
        .map_err(|err| {
            progress.keep(err);
            Error::Interrupted
        })
    };
    let summary = run_interruptible(py, &progress, || {
        encode_dataset(
            encoder,
            &folder,
            dataset_jobs,
            &options,
            &mut on_shard,
            &progress,
        )
        .map_err(|e| progress.error(e))
    })?;
    let skipped_errors = list(py, summary.skipped_errors.len(), |i| {
        string(py, &summary.skipped_errors[i])
    })?;
    tuple(
        py,
        [
            int(py, summary.tokens)?,
            int(py, summary.documents)?,
            int(py, summary.skipped)?,
            skipped_errors.into_any(),
            int(py, summary.input_bytes)?,
        ],
    )
}
