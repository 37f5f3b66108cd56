//! Raw bytes as Python buffers without a copy: a Rust-owned `Bytes` behind the buffer protocol.

use std::os::raw::c_int;

use bytes::Bytes;
use pyo3::{exceptions::PyBufferError, ffi, prelude::*, types::PyMemoryView};

/// A read-only buffer over bytes owned by Rust (a slice of a shard's memory map, or of a decoded
/// part). Python sees it through `memoryview(buffer)`: nothing is copied until Python asks for a
/// copy (`bytes(view)`), and the bytes stay alive as long as any view of them does.
#[pyclass(name = "_Buffer", module = "energon_rs._native", frozen)]
pub(crate) struct Buffer {
    data: Bytes,
}

impl Buffer {
    /// A `memoryview` over `data`.
    pub(crate) fn memoryview(py: Python<'_>, data: Bytes) -> PyResult<Bound<'_, PyAny>> {
        let buffer = Bound::new(py, Buffer { data })?;
        Ok(PyMemoryView::from(buffer.as_any())?.into_any())
    }
}

#[pymethods]
impl Buffer {
    /// Fills `view` with a read-only view of the bytes; the view holds a reference to `slf`.
    ///
    /// # Safety
    ///
    /// Called by Python's buffer protocol with a valid `view` pointer.
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        if view.is_null() {
            return Err(PyBufferError::new_err("view is null"));
        }
        if flags & ffi::PyBUF_WRITABLE == ffi::PyBUF_WRITABLE {
            return Err(PyBufferError::new_err("energon_rs buffers are read-only"));
        }
        let data = slf.get().data.clone();
        let len =
            isize::try_from(data.len()).map_err(|_| PyBufferError::new_err("buffer too large"))?;
        // SAFETY: `view` is non-null and provided by the buffer protocol. `PyBuffer_FillInfo`
        // stores a new reference to `slf` in `view.obj`, which keeps the `Buffer` (and so the
        // `Bytes` it owns, which never move or change) alive until the view is released. The
        // pointer is only read (read-only flag 1).
        let rc = unsafe {
            ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                data.as_ptr().cast_mut().cast(),
                len,
                1,
                flags,
            )
        };
        if rc == -1 {
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }

    fn __len__(&self) -> usize {
        self.data.len()
    }
}
