//! The one error type of the engine. Every variant carries the context a user needs to act:
//! which option, which target, which offset.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// The job spec is invalid (bad option value or combination).
    Spec,
    /// A target cannot be opened, created, sized or is unsuitable.
    Target,
    /// O_DIRECT alignment is violated (size, offset or buffer).
    Alignment,
    /// An I/O request failed or transferred fewer bytes than asked.
    Io,
    /// The engine (e.g. io_uring set-up) is unavailable or failed.
    Engine,
    /// The front end asked to stop (a signal) while the plan was being built.
    Interrupted,
}

#[derive(Debug, Clone)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

impl Error {
    pub fn spec(message: impl Into<String>) -> Self {
        Error { kind: ErrorKind::Spec, message: message.into() }
    }
    pub fn target(path: &str, message: impl fmt::Display) -> Self {
        Error { kind: ErrorKind::Target, message: format!("{path}: {message}") }
    }
    pub fn alignment(message: impl Into<String>) -> Self {
        Error { kind: ErrorKind::Alignment, message: message.into() }
    }
    pub fn io(message: impl Into<String>) -> Self {
        Error { kind: ErrorKind::Io, message: message.into() }
    }
    pub fn engine(message: impl Into<String>) -> Self {
        Error { kind: ErrorKind::Engine, message: message.into() }
    }
    pub fn interrupted(message: impl Into<String>) -> Self {
        Error { kind: ErrorKind::Interrupted, message: message.into() }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// Text of the last OS error (errno) with its symbolic number, e.g. "Invalid argument (os error 22)".
pub fn last_os_error() -> std::io::Error {
    std::io::Error::last_os_error()
}
